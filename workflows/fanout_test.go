package workflows

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

const fakeStart = "5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e"

// fakeFanout stands in for activities.Fanout. A script is "sleep=<ms>
// exit=<code> [nochange]"; merging a branch listed in conflicts conflicts.
type fakeFanout struct {
	mu        sync.Mutex
	cur, max  int
	started   []string // task ids in the order their scripts started
	merged    [][]string
	conflicts map[string]bool
	// children records each child SessionWorkflow: workflow id → "<task queue> <mode> <parent id>".
	children map[string]string
}

func (f *fakeFanout) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(_ context.Context, in FanoutPrepareInput) (FanoutPrepareResult, error) {
		return FanoutPrepareResult{StartCommit: fakeStart, Handle: Handle{
			WorkspaceID: in.WorkspaceID, HostID: testHost, Branch: "agent/edits-c", Mode: sandbox.ModeEdit,
			UserID: "u", ProjectID: "p", Repo: sandbox.RepoIdentity{URL: "https://example.com/o/r.git"}}}, nil
	}, ActivityFanoutPrepare)
	reg(func(_ context.Context, in AcquireTaskInput) (Handle, error) {
		if in.Request.Mode != sandbox.ModeTask || in.Request.BaseRef != fakeStart || in.HostID != testHost {
			return Handle{}, errors.New("unexpected task request")
		}
		id := sandbox.WorkspaceIDForKey(in.Request.Key())
		wf, _ := sandbox.SessionWorkflowID(id)
		return Handle{WorkspaceID: id, WorkflowID: wf, Branch: in.Request.Branch(), BaseCommit: in.StartCommit, HostID: testHost}, nil
	}, ActivityFanoutAcquireTask)
	reg(func(_ context.Context, in RunScriptInput) (RunScriptResult, error) {
		f.mu.Lock()
		f.cur++
		f.max = max(f.max, f.cur)
		f.started = append(f.started, in.TaskID)
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.cur--; f.mu.Unlock() }()
		r := RunScriptResult{StdoutTail: "out of " + in.TaskID}
		for _, w := range strings.Fields(in.Script) {
			k, v, _ := strings.Cut(w, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "sleep":
				time.Sleep(time.Duration(n) * time.Millisecond)
			case "exit":
				r.ExitCode = n
			}
		}
		return r, nil
	}, ActivityFanoutRunScript)
	reg(func(_ context.Context, in FinishTaskInput) (FinishTaskResult, error) {
		out := FinishTaskResult{Commit: fakeStart, Diff: TaskDiff{Patch: "patch of " + in.TaskID, Files: []string{in.TaskID + ".txt"}}}
		if in.Commit && !strings.Contains(in.TaskID, "nochange") {
			out.Commit = "c-" + in.TaskID
		}
		return out, nil
	}, ActivityFanoutFinishTask)
	reg(func(_ context.Context, in FanoutMergeInput) (sandbox.MergeResult, error) {
		f.mu.Lock()
		f.merged = append(f.merged, in.Request.Branches)
		f.mu.Unlock()
		res := sandbox.MergeResult{Branch: "agent/edits-c", Head: "head-after"}
		for _, b := range in.Request.Branches {
			bm := sandbox.BranchMerge{Branch: b, Status: sandbox.MergeMerged}
			if f.conflicts[b] {
				bm.Status, bm.ConflictFiles = sandbox.MergeConflict, []string{"same.txt"}
			}
			res.Branches = append(res.Branches, bm)
		}
		return res, nil
	}, ActivityFanoutMerge)
}

func newFanoutEnv(f *fakeFanout) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TaskFanoutWorkflow, workflow.RegisterOptions{Name: TaskFanoutWorkflowType})
	// The task sessions the fan-out starts as children: recorded, then done.
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in SessionInput) error {
		info := workflow.GetInfo(ctx)
		parent := ""
		if info.ParentWorkflowExecution != nil {
			parent = info.ParentWorkflowExecution.ID
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.children == nil {
			f.children = map[string]string{}
		}
		f.children[info.WorkflowExecution.ID] = info.TaskQueueName + " " + string(in.Request.Mode) + " " + parent
		return nil
	}, workflow.RegisterOptions{Name: SessionWorkflowType})
	f.register(env)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: FanoutWorkflowIDPrefix + "f1"})
	return env
}

func byID(r FanoutReport) map[string]TaskResult {
	m := map[string]TaskResult{}
	for _, t := range r.Tasks {
		m[t.TaskID] = t
	}
	return m
}

func TestFanoutBoundedParallelismAndInputOrderMerge(t *testing.T) {
	f := &fakeFanout{conflicts: map[string]bool{"agent/task-t5": true}}
	env := newFanoutEnv(f)
	in := FanoutInput{
		ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c"),
		MaxParallel:             2,
		Tasks: []TaskSpec{ // the first tasks finish last
			{TaskID: "t1", Script: "sleep=300 exit=0", Instructions: "do one"},
			{TaskID: "t2", Script: "sleep=200 exit=0"},
			{TaskID: "t3", Script: "sleep=20 exit=3"},
			{TaskID: "t4", Script: "sleep=20 exit=0"},
			{TaskID: "t5", Script: "sleep=10 exit=0"},
			{TaskID: "t6-nochange", Script: "sleep=10 exit=0"},
		},
	}
	env.ExecuteWorkflow(TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))

	// Each task's session is a child of the fan-out, on the conversation host's queue.
	require.Len(t, f.children, len(in.Tasks))
	for _, task := range in.Tasks {
		wf, err := sandbox.SessionWorkflowID(sandbox.WorkspaceIDForKey("task|u|p|" + task.TaskID))
		require.NoError(t, err)
		assert.Equal(t, HostTaskQueue(testHost)+" task "+FanoutWorkflowIDPrefix+"f1", f.children[wf], task.TaskID)
	}
	assert.Equal(t, 2, f.max, "at most MaxParallel scripts at once, and that many were used")
	assert.ElementsMatch(t, []string{"t1", "t2"}, f.started[:2], "the first slots go to the first tasks in input order")
	require.Len(t, f.merged, 1, "one merge_branches for the whole fan-out")
	assert.Equal(t, []string{"agent/task-t1", "agent/task-t2", "agent/task-t4", "agent/task-t5"}, f.merged[0],
		"succeeded tasks with changes, in input order, whatever order they finished in")

	assert.Equal(t, FanoutCompleted, r.State)
	assert.Equal(t, fakeStart, r.StartCommit)
	assert.Equal(t, "head-after", r.Head)
	tasks := byID(r)
	for id, want := range map[string][2]string{
		"t1": {TaskSucceeded, TaskMergeMerged}, "t2": {TaskSucceeded, TaskMergeMerged},
		"t3": {TaskFailed, TaskMergeSkipped}, "t4": {TaskSucceeded, TaskMergeMerged},
		"t5": {TaskSucceeded, TaskMergeConflict}, "t6-nochange": {TaskSucceeded, TaskMergeNoChanges},
	} {
		assert.Equal(t, want, [2]string{tasks[id].Status, tasks[id].Merge}, id)
	}
	require.NotNil(t, tasks["t3"].ExitCode)
	assert.Equal(t, 3, *tasks["t3"].ExitCode)
	assert.Equal(t, "out of t3", tasks["t3"].StdoutTail)
	assert.Equal(t, []string{"same.txt"}, tasks["t5"].ConflictFiles)
	assert.Equal(t, "agent/task-t1", tasks["t1"].Branch)
	assert.Equal(t, "patch of t1", tasks["t1"].Diff.Patch)

	v, err := env.QueryWorkflow(QueryProgress)
	require.NoError(t, err)
	var p FanoutReport
	require.NoError(t, v.Get(&p))
	assert.Equal(t, FanoutCompleted, p.State)
	assert.Empty(t, byID(p)["t1"].Diff.Patch, "the progress query leaves patches out")
	assert.Equal(t, []string{"t1.txt"}, byID(p)["t1"].Diff.Files)
}

func TestFanoutAgentTasksAndAcceptList(t *testing.T) {
	f := &fakeFanout{}
	env := newFanoutEnv(f)
	in := FanoutInput{
		ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c"),
		TaskTimeoutS:            600,
		AcceptTaskIDs:           []string{"a1", "a3", "s1"},
		Tasks: []TaskSpec{
			{TaskID: "a1"}, {TaskID: "a2"}, {TaskID: "a3"},
			{TaskID: "s1", Script: "exit=0"}, {TaskID: "s2", Script: "exit=0"},
		},
	}
	var mid FanoutReport
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
		env.SignalWorkflow(SignalCompleteTask, CompleteTaskSignal{TaskID: "nope", Succeeded: true})
		env.SignalWorkflow(SignalCompleteTask, CompleteTaskSignal{TaskID: "s2", Succeeded: false})
		env.SignalWorkflow(SignalCompleteTask, CompleteTaskSignal{TaskID: "a1", Succeeded: true, Message: "done"})
		env.SignalWorkflow(SignalCompleteTask, CompleteTaskSignal{TaskID: "a1", Succeeded: false, Message: "ignored"})
		env.SignalWorkflow(SignalCompleteTask, CompleteTaskSignal{TaskID: "a3", Succeeded: false, Message: "gave up"})
	}, time.Minute)
	env.ExecuteWorkflow(TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))

	assert.Equal(t, TaskWaiting, byID(mid)["a1"].Status, "agent tasks wait for complete_task")
	assert.Equal(t, FanoutRunning, mid.State)
	tasks := byID(r)
	for id, want := range map[string][2]string{
		"a1": {TaskSucceeded, TaskMergeMerged}, "a2": {TaskTimedOut, TaskMergeSkipped},
		"a3": {TaskFailed, TaskMergeSkipped}, "s1": {TaskSucceeded, TaskMergeMerged},
		"s2": {TaskSucceeded, TaskMergeNotAccepted},
	} {
		assert.Equal(t, want, [2]string{tasks[id].Status, tasks[id].Merge}, id)
	}
	assert.Equal(t, "done", tasks["a1"].Message)
	assert.Equal(t, TaskKindAgent, tasks["a1"].Kind)
	assert.Nil(t, tasks["a1"].ExitCode)
	assert.Equal(t, [][]string{{"agent/task-a1", "agent/task-s1"}}, f.merged)
}

func TestFanoutRejectsBadInput(t *testing.T) {
	for name, in := range map[string]FanoutInput{
		"no conversation": {Tasks: []TaskSpec{{TaskID: "t"}}},
		"no tasks":        {ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c")},
		"duplicate":       {ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c"), Tasks: []TaskSpec{{TaskID: "t"}, {TaskID: "t"}}},
		"bad accept":      {ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c"), Tasks: []TaskSpec{{TaskID: "t"}}, AcceptTaskIDs: []string{"x"}},
		"parallel":        {ConversationWorkspaceID: sandbox.WorkspaceIDForKey("edit|u|p|c"), Tasks: []TaskSpec{{TaskID: "t"}}, MaxParallel: 99},
		"analysis":        {Conversation: &sandbox.WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "https://example.com/o/r.git", Mode: sandbox.ModeAnalysis}, Tasks: []TaskSpec{{TaskID: "t"}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeFanout{}
			env := newFanoutEnv(f)
			env.ExecuteWorkflow(TaskFanoutWorkflowType, in)
			require.True(t, env.IsWorkflowCompleted())
			var app *temporal.ApplicationError
			require.True(t, errors.As(env.GetWorkflowError(), &app), "%v", env.GetWorkflowError())
			assert.Equal(t, sandbox.ErrInvalidArgument.Type, app.Type())
			assert.Empty(t, f.started)
		})
	}
}

// TestFanoutReplayRecordedHistories replays the fan-out histories recorded by
// the end-to-end tests (tests/fanout_test.go, SANDBOXCORE_UPDATE_HISTORIES=1)
// against the current workflow code: a change that is not replay-compatible
// fails here (guard it with workflow.GetVersion).
func TestFanoutReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fanout-histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded fan-out histories")
	for _, f := range files {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(TaskFanoutWorkflow, workflow.RegisterOptions{Name: TaskFanoutWorkflowType})
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}
