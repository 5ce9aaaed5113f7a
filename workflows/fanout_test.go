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

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
	// prepared holds each prepare step's input.
	prepared []wire.FanoutPrepareInput
}

func (f *fakeFanout) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(_ context.Context, in wire.FanoutPrepareInput) (wire.FanoutPrepareResult, error) {
		f.mu.Lock()
		f.prepared = append(f.prepared, in)
		f.mu.Unlock()
		return wire.FanoutPrepareResult{StartCommit: fakeStart, Handle: sandboxapi.Handle{
			WorkspaceID: in.WorkspaceID, HostID: testHost, Branch: "agent/edits-c", Mode: sandboxapi.ModeEdit,
			UserID: "u", ProjectID: "p", Repo: sandboxapi.RepoIdentity{URL: "https://example.com/o/r.git"}}}, nil
	}, wire.ActivityFanoutPrepare)
	reg(func(_ context.Context, in wire.AcquireTaskInput) (sandboxapi.Handle, error) {
		if in.Request.Mode != sandboxapi.ModeTask || in.Request.BaseRef != fakeStart || in.HostID != testHost {
			return sandboxapi.Handle{}, errors.New("unexpected task request")
		}
		id := sandboxapi.WorkspaceIDForKey(in.Request.Key())
		wf, _ := sandboxapi.SessionWorkflowID(id)
		return sandboxapi.Handle{WorkspaceID: id, WorkflowID: wf, Branch: in.Request.Branch(), BaseCommit: in.StartCommit, HostID: testHost}, nil
	}, wire.ActivityFanoutAcquireTask)
	reg(func(_ context.Context, in wire.RunScriptInput) (wire.RunScriptResult, error) {
		f.mu.Lock()
		f.cur++
		f.max = max(f.max, f.cur)
		f.started = append(f.started, in.TaskID)
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.cur--; f.mu.Unlock() }()
		r := wire.RunScriptResult{StdoutTail: "out of " + in.TaskID}
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
	}, wire.ActivityFanoutRunScript)
	reg(func(_ context.Context, in wire.FinishTaskInput) (wire.FinishTaskResult, error) {
		out := wire.FinishTaskResult{Commit: fakeStart, Diff: sandboxapi.TaskDiff{Patch: "patch of " + in.TaskID, Files: []string{in.TaskID + ".txt"}}}
		if in.Commit && !strings.Contains(in.TaskID, "nochange") {
			out.Commit = "c-" + in.TaskID
		}
		return out, nil
	}, wire.ActivityFanoutFinishTask)
	reg(func(_ context.Context, in wire.FanoutMergeInput) (sandboxapi.MergeResult, error) {
		f.mu.Lock()
		f.merged = append(f.merged, in.Request.Branches)
		f.mu.Unlock()
		res := sandboxapi.MergeResult{Branch: "agent/edits-c", Head: "head-after"}
		for _, b := range in.Request.Branches {
			bm := sandboxapi.BranchMerge{Branch: b, Status: sandboxapi.MergeMerged}
			if f.conflicts[b] {
				bm.Status, bm.ConflictFiles = sandboxapi.MergeConflict, []string{"same.txt"}
			}
			res.Branches = append(res.Branches, bm)
		}
		return res, nil
	}, wire.ActivityFanoutMerge)
}

func newFanoutEnv(f *fakeFanout) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TaskFanoutWorkflow, workflow.RegisterOptions{Name: sandboxapi.TaskFanoutWorkflowType})
	// The task sessions the fan-out starts as children: recorded, then done.
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in sandboxapi.SessionInput) error {
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
	}, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	f.register(env)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fanoutUP})
	return env
}

// fanoutUP is the workflow id of fan-out f1 of the tests' tenant (user u,
// project p), whose conversation the fake prepare step reports.
var fanoutUP, _ = sandboxapi.FanoutWorkflowID(sandboxapi.Tenant{UserID: "u", ProjectID: "p"}, "f1")

func byID(r sandboxapi.FanoutReport) map[string]sandboxapi.TaskResult {
	m := map[string]sandboxapi.TaskResult{}
	for _, t := range r.Tasks {
		m[t.TaskID] = t
	}
	return m
}

func TestFanoutBoundedParallelismAndInputOrderMerge(t *testing.T) {
	f := &fakeFanout{conflicts: map[string]bool{tbUP + "task-t5": true}}
	env := newFanoutEnv(f)
	in := sandboxapi.FanoutInput{
		ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"),
		MaxParallel:             2,
		Tasks: []sandboxapi.TaskSpec{ // the first tasks finish last
			{TaskID: "t1", Script: "sleep=300 exit=0", Instructions: "do one"},
			{TaskID: "t2", Script: "sleep=200 exit=0"},
			{TaskID: "t3", Script: "sleep=20 exit=3"},
			{TaskID: "t4", Script: "sleep=20 exit=0"},
			{TaskID: "t5", Script: "sleep=10 exit=0"},
			{TaskID: "t6-nochange", Script: "sleep=10 exit=0"},
		},
	}
	env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r sandboxapi.FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))

	// Each task's session is a child of the fan-out, on the conversation host's queue.
	require.Len(t, f.children, len(in.Tasks))
	for _, task := range in.Tasks {
		wf, err := sandboxapi.SessionWorkflowID(sandboxapi.WorkspaceIDForKey("task|u|p|" + task.TaskID))
		require.NoError(t, err)
		assert.Equal(t, wire.HostTaskQueue(testHost)+" task "+fanoutUP, f.children[wf], task.TaskID)
	}
	assert.Equal(t, 2, f.max, "at most MaxParallel scripts at once, and that many were used")
	assert.ElementsMatch(t, []string{"t1", "t2"}, f.started[:2], "the first slots go to the first tasks in input order")
	require.Len(t, f.merged, 1, "one merge_branches for the whole fan-out")
	assert.Equal(t, []string{tbUP + "task-t1", tbUP + "task-t2", tbUP + "task-t4", tbUP + "task-t5"}, f.merged[0],
		"succeeded tasks with changes, in input order, whatever order they finished in")

	assert.Equal(t, sandboxapi.FanoutCompleted, r.State)
	assert.Equal(t, "f1", r.FanoutID, "the fan-out id, without the tenant segment")
	require.Len(t, f.prepared, 1)
	assert.Equal(t, sandboxapi.TenantSegment("u", "p"), f.prepared[0].TenantSegment, "the prepare step checks the conversation's tenant")
	assert.Equal(t, "Checkpoint before fan-out f1", f.prepared[0].CheckpointMessage)
	assert.Equal(t, fakeStart, r.StartCommit)
	assert.Equal(t, "head-after", r.Head)
	tasks := byID(r)
	for id, want := range map[string][2]string{
		"t1": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged}, "t2": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged},
		"t3": {sandboxapi.TaskFailed, sandboxapi.TaskMergeSkipped}, "t4": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged},
		"t5": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeConflict}, "t6-nochange": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeNoChanges},
	} {
		assert.Equal(t, want, [2]string{tasks[id].Status, tasks[id].Merge}, id)
	}
	require.NotNil(t, tasks["t3"].ExitCode)
	assert.Equal(t, 3, *tasks["t3"].ExitCode)
	assert.Equal(t, "out of t3", tasks["t3"].StdoutTail)
	assert.Equal(t, []string{"same.txt"}, tasks["t5"].ConflictFiles)
	assert.Equal(t, tbUP+"task-t1", tasks["t1"].Branch)
	assert.Equal(t, "patch of t1", tasks["t1"].Diff.Patch)

	v, err := env.QueryWorkflow(sandboxapi.QueryProgress)
	require.NoError(t, err)
	var p sandboxapi.FanoutReport
	require.NoError(t, v.Get(&p))
	assert.Equal(t, sandboxapi.FanoutCompleted, p.State)
	assert.Empty(t, byID(p)["t1"].Diff.Patch, "the progress query leaves patches out")
	assert.Equal(t, []string{"t1.txt"}, byID(p)["t1"].Diff.Files)
}

func TestFanoutAgentTasksAndAcceptList(t *testing.T) {
	f := &fakeFanout{}
	env := newFanoutEnv(f)
	in := sandboxapi.FanoutInput{
		ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"),
		TaskTimeoutS:            600,
		AcceptTaskIDs:           []string{"a1", "a3", "s1"},
		Tasks: []sandboxapi.TaskSpec{
			{TaskID: "a1"}, {TaskID: "a2"}, {TaskID: "a3"},
			{TaskID: "s1", Script: "exit=0"}, {TaskID: "s2", Script: "exit=0"},
		},
	}
	var mid sandboxapi.FanoutReport
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(sandboxapi.QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "nope", Succeeded: true})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "s2", Succeeded: false})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "a1", Succeeded: true, Message: "done"})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "a1", Succeeded: false, Message: "ignored"})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "a3", Succeeded: false, Message: "gave up"})
	}, time.Minute)
	env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r sandboxapi.FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))

	assert.Equal(t, sandboxapi.TaskWaiting, byID(mid)["a1"].Status, "agent tasks wait for complete_task")
	assert.Equal(t, sandboxapi.FanoutRunning, mid.State)
	tasks := byID(r)
	for id, want := range map[string][2]string{
		"a1": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged}, "a2": {sandboxapi.TaskTimedOut, sandboxapi.TaskMergeSkipped},
		"a3": {sandboxapi.TaskFailed, sandboxapi.TaskMergeSkipped}, "s1": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged},
		"s2": {sandboxapi.TaskSucceeded, sandboxapi.TaskMergeNotAccepted},
	} {
		assert.Equal(t, want, [2]string{tasks[id].Status, tasks[id].Merge}, id)
	}
	assert.Equal(t, "done", tasks["a1"].Message)
	assert.Equal(t, sandboxapi.TaskKindAgent, tasks["a1"].Kind)
	assert.Nil(t, tasks["a1"].ExitCode)
	assert.Equal(t, [][]string{{tbUP + "task-a1", tbUP + "task-s1"}}, f.merged)
}

func TestFanoutRejectsBadInput(t *testing.T) {
	for name, in := range map[string]sandboxapi.FanoutInput{
		"no conversation": {Tasks: []sandboxapi.TaskSpec{{TaskID: "t"}}},
		"no tasks":        {ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c")},
		"duplicate":       {ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"), Tasks: []sandboxapi.TaskSpec{{TaskID: "t"}, {TaskID: "t"}}},
		"bad accept":      {ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"), Tasks: []sandboxapi.TaskSpec{{TaskID: "t"}}, AcceptTaskIDs: []string{"x"}},
		"parallel":        {ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"), Tasks: []sandboxapi.TaskSpec{{TaskID: "t"}}, MaxParallel: 99},
		"analysis":        {Conversation: &sandboxapi.WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "https://example.com/o/r.git", Mode: sandboxapi.ModeAnalysis}, Tasks: []sandboxapi.TaskSpec{{TaskID: "t"}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeFanout{}
			env := newFanoutEnv(f)
			env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
			require.True(t, env.IsWorkflowCompleted())
			var app *temporal.ApplicationError
			require.True(t, errors.As(env.GetWorkflowError(), &app), "%v", env.GetWorkflowError())
			assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
			assert.Empty(t, f.started)
		})
	}
}

// TestFanoutKeepsToItsTenant: under sandbox-fanout/<tenant
// segment>/<fanout_id> a conversation request of another tenant fails the
// run with InvalidArgument before any activity, naming none of its ids; a
// workflow id of neither form is refused; a legacy id
// (sandbox-fanout/<fanout_id>, from a client before tenant ids) runs as
// before, with no tenant for the prepare step to check.
func TestFanoutKeepsToItsTenant(t *testing.T) {
	conv := func(user, project string) *sandboxapi.WorkspaceRequest {
		return &sandboxapi.WorkspaceRequest{UserID: user, ProjectID: project, RepoURL: "https://example.com/o/r.git", Mode: sandboxapi.ModeEdit, ConversationID: "c"}
	}
	fail := func(t *testing.T, wfID string, in sandboxapi.FanoutInput) (*fakeFanout, *temporal.ApplicationError) {
		t.Helper()
		f := &fakeFanout{}
		env := newFanoutEnv(f)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wfID})
		env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
		require.True(t, env.IsWorkflowCompleted())
		var app *temporal.ApplicationError
		require.True(t, errors.As(env.GetWorkflowError(), &app), "%v", env.GetWorkflowError())
		return f, app
	}
	tasks := []sandboxapi.TaskSpec{{TaskID: "t", Script: "exit=0"}}
	for name, req := range map[string]*sandboxapi.WorkspaceRequest{"another user": conv("mallory", "p"), "another project": conv("u", "other-project")} {
		t.Run(name, func(t *testing.T) {
			f, app := fail(t, fanoutUP, sandboxapi.FanoutInput{Conversation: req, Tasks: tasks})
			assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
			var d sandboxapi.ErrorDetails
			require.NoError(t, app.Details(&d))
			assert.Equal(t, "conversation", d.Field)
			for _, id := range []string{req.UserID, req.ProjectID, sandboxapi.WorkspaceIDForKey(req.Key()), sandboxapi.TenantSegment(req.UserID, req.ProjectID)} {
				if len(id) > 1 { // not the shared one-letter ids of the tests' tenant
					assert.NotContains(t, app.Message(), id)
				}
			}
			assert.Empty(t, f.prepared, "nothing ran")
		})
	}
	t.Run("not a fan-out id", func(t *testing.T) {
		f, app := fail(t, "sandbox-fanout/x/f1", sandboxapi.FanoutInput{Conversation: conv("u", "p"), Tasks: tasks})
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
		assert.Empty(t, f.prepared)
	})
	t.Run("own tenant's request", func(t *testing.T) {
		f := &fakeFanout{}
		env := newFanoutEnv(f)
		env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, sandboxapi.FanoutInput{Conversation: conv("u", "p"), Tasks: tasks})
		require.NoError(t, env.GetWorkflowError())
		require.Len(t, f.prepared, 1)
		assert.Equal(t, sandboxapi.TenantSegment("u", "p"), f.prepared[0].TenantSegment)
	})
	t.Run("legacy id", func(t *testing.T) {
		f := &fakeFanout{}
		env := newFanoutEnv(f)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: sandboxapi.FanoutWorkflowIDPrefix + "f1"})
		env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, sandboxapi.FanoutInput{ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"), Tasks: tasks})
		require.NoError(t, env.GetWorkflowError())
		var r sandboxapi.FanoutReport
		require.NoError(t, env.GetWorkflowResult(&r))
		assert.Equal(t, "f1", r.FanoutID)
		assert.Equal(t, sandboxapi.FanoutCompleted, r.State)
		require.Len(t, f.prepared, 1)
		assert.Empty(t, f.prepared[0].TenantSegment, "a legacy id names no tenant")
	})
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
		replayer.RegisterWorkflowWithOptions(TaskFanoutWorkflow, workflow.RegisterOptions{Name: sandboxapi.TaskFanoutWorkflowType})
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}

// tbUP is the branch namespace of the tests' tenant (user u, project p):
// task branches are tbUP + "task-<task_id>" (docs/API.md "Identity").
var tbUP = "agent/" + sandboxapi.TenantSegment("u", "p") + "/"
