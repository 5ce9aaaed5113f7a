package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// conversation acquires a conversation's edit workspace on a fresh upstream
// and commits one change in it, so the fan-out starts from a commit of the
// conversation's own (not the upstream's).
func conversation(t *testing.T, sc *sandboxclient.Client, user string) (*sandboxclient.Session, sandboxapi.Handle) {
	t.Helper()
	return conversationIn(t, sc, user, "p")
}

// conversationIn is conversation for user's project.
func conversationIn(t *testing.T, sc *sandboxclient.Client, user, project string) (*sandboxclient.Session, sandboxapi.Handle) {
	t.Helper()
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	ctx := ctxFor(t, 2*time.Minute)
	s, hd, err := sc.Acquire(ctx, editRequest(user, project, "conv", gittest.FileURL(upstream)))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "shared.txt", []byte("base\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "conversation work"})
	require.NoError(t, err)
	return s, hd
}

// requireCleanAt asserts the conversation workspace is clean with HEAD at head.
func requireCleanAt(t *testing.T, s *sandboxclient.Session, head string) {
	t.Helper()
	st, err := s.Status(ctxFor(t, time.Minute))
	require.NoError(t, err)
	assert.False(t, st.Dirty, "conversation must be clean: %+v", st.Files)
	assert.Equal(t, head, st.Head)
}

// tenantOf is the tenant of a workspace's handle: its user and project.
func tenantOf(hd sandboxapi.Handle) sandboxapi.Tenant {
	return sandboxapi.Tenant{UserID: hd.UserID, ProjectID: hd.ProjectID}
}

func tasksByID(r sandboxapi.FanoutReport) map[string]sandboxapi.TaskResult {
	m := map[string]sandboxapi.TaskResult{}
	for _, t := range r.Tasks {
		m[t.TaskID] = t
	}
	return m
}

func TestFanoutThreeTasksAllMergeViaCLI(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "fanout3")
	queue := h.Config.TaskQueue
	s, hd := conversation(t, h.client, uniq(t, "u"))
	// Uncommitted work in the conversation is checkpointed before the tasks branch off.
	require.NoError(t, s.WriteFile(ctxFor(t, time.Minute), "wip.txt", []byte("wip\n"), 0))

	who := []string{"--user", hd.UserID, "--project", hd.ProjectID}
	r := runCLI(t, bin, queue, "", append([]string{"fanout", "start"}, append(who, "--workspace", hd.WorkspaceID, "--json", "--parallel", "2",
		"--task", "t1:echo one > one.txt",
		"--task", "t2:mkdir -p sub && echo two > sub/two.txt",
		"--task", "t3:echo three > three.txt && cat wip.txt",
		"--instructions", "t1=write one.txt")...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var started map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &started))
	id := started["fanout_id"]
	require.NotEmpty(t, id)

	r = runCLI(t, bin, queue, "", append([]string{"fanout", "watch", id, "--json", "--interval", "200ms"}, who...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var rep sandboxapi.FanoutReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)

	assert.Equal(t, sandboxapi.FanoutCompleted, rep.State, rep.Error)
	assert.True(t, rep.Checkpointed)
	tasks := tasksByID(rep)
	for id, file := range map[string]string{"t1": "one.txt", "t2": "sub/two.txt", "t3": "three.txt"} {
		tr := tasks[id]
		assert.Equal(t, sandboxapi.TaskSucceeded, tr.Status, "%s: %+v", id, tr)
		assert.Equal(t, sandboxapi.TaskMergeMerged, tr.Merge, id)
		assert.Equal(t, sandboxapi.TaskBranch(hd.UserID, hd.ProjectID, id), tr.Branch)
		require.NotNil(t, tr.Diff, id)
		assert.Equal(t, []string{file}, tr.Diff.Files, "the diff is against the start commit: %s", id)
		assert.Contains(t, tr.Diff.Patch, "+++ b/"+file)
	}
	assert.Equal(t, "wip\n", tasks["t3"].StdoutTail, "tasks start from the checkpointed conversation")

	ctx := ctxFor(t, time.Minute)
	for _, p := range []string{"one.txt", "sub/two.txt", "three.txt", "wip.txt", "shared.txt"} {
		_, err := s.ReadFile(ctx, p)
		assert.NoError(t, err, p)
	}
	requireCleanAt(t, s, rep.Head)
	subjects := gittest.Git(t, hd.LocalPath, "log", "--first-parent", "--format=%s", "-4")
	tb := func(task string) string { return sandboxapi.TaskBranch(hd.UserID, hd.ProjectID, task) }
	assert.Equal(t, "Merge branch '"+tb("t3")+"'\nMerge branch '"+tb("t2")+"'\nMerge branch '"+tb("t1")+"'\nCheckpoint before fan-out "+id, subjects,
		"merged in input order on top of the checkpoint")
	assert.Contains(t, gittest.Git(t, hd.LocalPath, "log", "-1", "--format=%B", tasks["t1"].Commit), "write one.txt", "instructions are kept in the task's commit")

	r = runCLI(t, bin, queue, "", append([]string{"fanout", "watch", id}, who...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "completed")
	assert.Contains(t, r.stdout, "t2")
	r = runCLI(t, bin, queue, "", append([]string{"fanout", "start", "--workspace", hd.WorkspaceID, "--id", id, "--task", "t9:true"}, who...)...)
	assert.Equal(t, 1, r.code, "a fan-out id is used once")
	assert.Contains(t, r.stderr, "SandboxConflict")
	r = runCLI(t, bin, queue, "", "fanout", "watch", id)
	assert.Equal(t, 2, r.code, "--user and --project are required: %s", r.stderr)
}

// TestFanoutWatchShowsProgressWhileRunning: `sandboxctl fanout watch` prints
// the fan-out's state while its task still runs, not only at the end.
func TestFanoutWatchShowsProgressWhileRunning(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "fanoutw")
	_, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{
		ConversationWorkspaceID: hd.WorkspaceID,
		Tasks:                   []sandboxapi.TaskSpec{{TaskID: "slow", Script: "sleep 4; echo done > slow.txt"}},
	})
	require.NoError(t, err)

	cmd := exec.CommandContext(ctx, bin, "fanout", "watch", f.ID(), "--interval", "200ms", "--user", hd.UserID, "--project", hd.ProjectID)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+h.Config.TaskQueue)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var runningAt, completedAt time.Time
	var taskRunningSeen bool
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, ": running (") && runningAt.IsZero():
			runningAt = time.Now()
		case strings.HasPrefix(strings.TrimSpace(line), "slow") && strings.Contains(line, sandboxapi.TaskRunning):
			taskRunningSeen = true
		case strings.Contains(line, ": completed (") && completedAt.IsZero():
			completedAt = time.Now()
		}
	}
	require.NoError(t, cmd.Wait())
	require.False(t, runningAt.IsZero(), "no running state was printed")
	require.False(t, completedAt.IsZero(), "no completed state was printed")
	assert.True(t, taskRunningSeen, "the task was never shown running")
	assert.Greater(t, completedAt.Sub(runningAt), time.Second, "progress must be printed while the task runs")
}

// TestFanoutTaskIDInUseIsAConflict: two fan-outs naming the same new task id
// at once would drive one task workspace and report each other's work; the
// second one's task fails with SandboxConflict, the first one is unaffected.
func TestFanoutTaskIDInUseIsAConflict(t *testing.T) {
	h := startHost(t, "fanoutdup")
	_, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	start := func(script string) *sandboxclient.Fanout {
		f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{
			ConversationWorkspaceID: hd.WorkspaceID,
			Tasks:                   []sandboxapi.TaskSpec{{TaskID: "same", Script: script}},
		})
		require.NoError(t, err)
		return f
	}
	first := start("sleep 6; echo one > r.txt")
	require.Eventually(t, func() bool {
		p, err := first.Progress(ctx)
		return err == nil && len(p.Tasks) == 1 && p.Tasks[0].Status == sandboxapi.TaskRunning
	}, 30*time.Second, 100*time.Millisecond)
	second := start("echo two > r.txt")
	rep2, err := second.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.TaskError, rep2.Tasks[0].Status)
	assert.Contains(t, rep2.Tasks[0].Message, "SandboxConflict")
	assert.Contains(t, rep2.Tasks[0].Message, "use a new task id")
	assert.NotEqual(t, sandboxapi.TaskMergeMerged, rep2.Tasks[0].Merge)

	rep1, err := first.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.TaskSucceeded, rep1.Tasks[0].Status)
	assert.Equal(t, sandboxapi.TaskMergeMerged, rep1.Tasks[0].Merge)
	assert.Equal(t, "one\n", gittest.Git(t, hd.LocalPath, "show", "HEAD:r.txt")+"\n")
}

// TestFanoutCancelKeepsTaskSessions: cancelling a fan-out (Web UI, CLI)
// leaves its task sessions running: they outlive it, as documented.
func TestFanoutCancelKeepsTaskSessions(t *testing.T) {
	h := startHost(t, "fanoutcancel")
	_, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{
		ConversationWorkspaceID: hd.WorkspaceID,
		Tasks:                   []sandboxapi.TaskSpec{{TaskID: "by-agent"}},
	})
	require.NoError(t, err)
	var taskWF, taskWS string
	require.Eventually(t, func() bool {
		p, err := f.Progress(ctx)
		if err == nil && len(p.Tasks) == 1 && p.Tasks[0].Status == sandboxapi.TaskWaiting {
			taskWF, taskWS = p.Tasks[0].WorkflowID, p.Tasks[0].WorkspaceID
		}
		return taskWF != ""
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, f.Cancel(ctx))
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(ctx, f.WorkflowID(), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, 30*time.Second, 100*time.Millisecond, "the fan-out is cancelled")
	for _, ev := range history(t, f.WorkflowID(), "").GetEvents() {
		assert.NotEqual(t, enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, ev.GetEventType(),
			"the fan-out asked its task session to cancel")
	}
	d, err := tc.DescribeWorkflowExecution(ctx, taskWF, "")
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "the task session outlives the cancelled fan-out")
	s, err := h.client.Session(taskWS)
	require.NoError(t, err)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err, "an agent can keep using the task session")
	assert.Equal(t, 0, res.ExitCode)
}

func TestFanoutConflictLeavesConversationClean(t *testing.T) {
	h := startHost(t, "fanoutc")
	s, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{
		ConversationWorkspaceID: hd.WorkspaceID,
		Tasks: []sandboxapi.TaskSpec{
			{TaskID: "a", Script: "echo from-a > shared.txt && echo a > a.txt"},
			{TaskID: "b", Script: "sleep 1; echo from-b > shared.txt && echo b > b.txt"},
		},
	})
	require.NoError(t, err)
	rep, err := f.Result(ctx)
	require.NoError(t, err)

	assert.Equal(t, sandboxapi.FanoutCompleted, rep.State, rep.Error)
	tasks := tasksByID(rep)
	assert.Equal(t, sandboxapi.TaskMergeMerged, tasks["a"].Merge)
	assert.Equal(t, sandboxapi.TaskMergeConflict, tasks["b"].Merge)
	assert.Equal(t, []string{"shared.txt"}, tasks["b"].ConflictFiles)
	assert.False(t, rep.Checkpointed)
	// Previewed before either was merged: both clean alone, conflicting
	// with each other, so the given order stands.
	assert.Equal(t, sandboxapi.MergeClean, tasks["a"].MergePreview)
	assert.Equal(t, sandboxapi.MergeConflict, tasks["b"].MergePreview)
	assert.Equal(t, []string{"shared.txt"}, tasks["b"].PreviewConflictFiles)
	assert.Equal(t, []string{"a", "b"}, rep.MergeOrder)

	requireCleanAt(t, s, rep.Head)
	assert.Equal(t, "", gittest.Git(t, hd.LocalPath, "status", "--porcelain", "--untracked-files=all"))
	assert.Equal(t, tasks["a"].Commit, gittest.Git(t, hd.LocalPath, "rev-parse", "HEAD^2"), "HEAD is the merge of the first task")
	assert.Equal(t, rep.StartCommit, gittest.Git(t, hd.LocalPath, "rev-parse", "HEAD^1"))
	got, err := s.ReadFile(ctx, "shared.txt")
	require.NoError(t, err)
	assert.Equal(t, "from-a\n", string(got))
	_, err = s.ReadFile(ctx, "b.txt")
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "nothing of the conflicting task is left")
	admin := gittest.Git(t, hd.LocalPath, "rev-parse", "--git-dir")
	assert.NoFileExists(t, filepath.Join(admin, "MERGE_HEAD"))

	// Each task's session is a child of the fan-out and outlives it (ABANDON).
	for _, tr := range rep.Tasks {
		d, err := tc.DescribeWorkflowExecution(ctx, tr.WorkflowID, "")
		require.NoError(t, err)
		info := d.GetWorkflowExecutionInfo()
		require.NotNil(t, info.GetParentExecution(), "task %s's session has no parent", tr.TaskID)
		assert.Equal(t, f.WorkflowID(), info.GetParentExecution().GetWorkflowId(), tr.TaskID)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, info.GetStatus(), "task %s's session ended with the fan-out", tr.TaskID)
	}
	replayFanout(t, f.WorkflowID(), "fanout-conflict-child-sessions.json")
}

func TestFanoutFailedScriptIsNotMergedAndAgentTasksComplete(t *testing.T) {
	h := startHost(t, "fanoutf")
	s, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{
		ConversationWorkspaceID: hd.WorkspaceID,
		TaskTimeoutS:            120,
		Tasks: []sandboxapi.TaskSpec{
			{TaskID: "bad", Script: "echo half > half.txt; echo broken >&2; exit 3"},
			{TaskID: "agent", Instructions: "add agent.txt"},
		},
	})
	require.NoError(t, err)

	// An external agent drives the task session it is given, then completes it.
	var taskWS string
	require.Eventually(t, func() bool {
		p, err := f.Progress(ctx)
		if err != nil {
			return false
		}
		tr := tasksByID(p)["agent"]
		taskWS = tr.WorkspaceID
		return tr.Status == sandboxapi.TaskWaiting
	}, time.Minute, 100*time.Millisecond)
	ts, err := h.client.Session(taskWS)
	require.NoError(t, err)
	require.NoError(t, ts.WriteFile(ctx, "agent.txt", []byte("by the agent\n"), 0))
	// (A retried fan-out step asks for updates its earlier attempt may never have sent.)
	var none any
	assert.ErrorIs(t, ts.UpdateOutcome(ctxFor(t, 20*time.Second), "never-sent", &none), sandboxapi.ErrWorkspaceNotFound)
	require.NoError(t, f.CompleteTask(ctx, "agent", true, "done"))

	rep, err := f.Result(ctx)
	require.NoError(t, err)
	tasks := tasksByID(rep)
	bad := tasks["bad"]
	assert.Equal(t, sandboxapi.TaskFailed, bad.Status)
	require.NotNil(t, bad.ExitCode)
	assert.Equal(t, 3, *bad.ExitCode)
	assert.Equal(t, "broken\n", bad.StderrTail)
	assert.Equal(t, sandboxapi.TaskMergeSkipped, bad.Merge)
	require.NotNil(t, bad.Diff)
	assert.Equal(t, []string{"half.txt"}, bad.Diff.Files, "a failed task's diff is still reported")
	assert.Equal(t, rep.StartCommit, bad.Commit, "a failed task is not committed")

	agent := tasks["agent"]
	assert.Equal(t, sandboxapi.TaskSucceeded, agent.Status)
	assert.Equal(t, sandboxapi.TaskMergeMerged, agent.Merge)
	assert.Equal(t, "done", agent.Message)

	_, err = s.ReadFile(ctx, "half.txt")
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "the failed task is not merged")
	got, err := s.ReadFile(ctx, "agent.txt")
	require.NoError(t, err)
	assert.Equal(t, "by the agent\n", string(got))
	requireCleanAt(t, s, rep.Head)
	replayFanout(t, f.WorkflowID(), "fanout-agent-and-failed-script-child-sessions.json")
}

// replayFanout replays a finished fan-out's history against the current
// workflow code and, with SANDBOXCORE_UPDATE_HISTORIES=1, records it for
// workflows.TestFanoutReplayRecordedHistories.
func replayFanout(t *testing.T, wfID, name string) {
	t.Helper()
	hist := history(t, wfID, "")
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.TaskFanoutWorkflow, workflow.RegisterOptions{Name: sandboxapi.TaskFanoutWorkflowType})
	// Under its own workflow id (which names the fan-out and its tenant),
	// and under the replayer's own, as workflows.TestFanoutReplayRecordedHistories replays it.
	require.NoError(t, replayed(replayer, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: wfID, RunID: hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()}}))
	require.NoError(t, replayed(replayer, hist))
	if os.Getenv(updateHistoriesEnv) == "1" {
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
		require.NoError(t, err)
		p := filepath.Join("..", "workflows", "testdata", "fanout-histories", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
}

// fanoutSignature is what must not depend on a worker crash: per task its
// status, exit code, merge outcome and changed files, and the conversation's
// resulting tree and merge history.
// tenantSegment matches the tenant part of an agent branch name.
var tenantSegment = regexp.MustCompile(`agent/[0-9a-f]{16}/`)

func fanoutSignature(t *testing.T, rep sandboxapi.FanoutReport, localPath string) string {
	var lines []string
	for _, tr := range rep.Tasks {
		code := "-"
		if tr.ExitCode != nil {
			code = fmt.Sprint(*tr.ExitCode)
		}
		var files []string
		if tr.Diff != nil {
			files = tr.Diff.Files
		}
		lines = append(lines, fmt.Sprintf("%s %s exit=%s merge=%s files=%v", tr.TaskID, tr.Status, code, tr.Merge, files))
	}
	sort.Strings(lines)
	lines = append(lines, "state="+rep.State,
		"tree="+strings.ReplaceAll(gittest.Git(t, localPath, "ls-tree", "-r", "--name-only", "HEAD"), "\n", ","),
		// The tenant segment of the task branches (agent/<tenant>/task-…)
		// differs between users; the signature compares the rest.
		"log="+tenantSegment.ReplaceAllString(strings.ReplaceAll(gittest.Git(t, localPath, "log", "--first-parent", "--format=%s", rep.StartCommit+"..HEAD"), "\n", ","), "agent/<tenant>/"),
		"status="+gittest.Git(t, localPath, "status", "--porcelain", "--untracked-files=all"))
	return strings.Join(lines, "\n")
}

func TestFanoutSurvivesWorkerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	destroyLeftSandboxes(t, dataDir)
	env := append(os.Environ(), workerProcessEnv+"=1", "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_DATA_DIR="+dataDir,
		"SANDBOX_HOST_ID=fcrash", "SANDBOX_TASK_QUEUE=q-fcrash", "SANDBOX_ALLOW_FILE_URLS=1")
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	sc := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: "q-fcrash"})
	tasks := []sandboxapi.TaskSpec{
		{TaskID: "one", Script: "sleep 3; echo one > one.txt"},
		{TaskID: "two", Script: "sleep 3; echo two > two.txt"},
		{TaskID: "clash", Script: "sleep 3; echo clash > one.txt"},
		{TaskID: "bad", Script: "sleep 3; echo bad > bad.txt; exit 3"},
	}
	run := func(user string, kill func(f *sandboxclient.Fanout)) (string, sandboxapi.FanoutReport) {
		_, hd := conversation(t, sc, user)
		ctx := ctxFor(t, 5*time.Minute)
		f, err := sc.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{ConversationWorkspaceID: hd.WorkspaceID, Tasks: tasks, MaxParallel: 4})
		require.NoError(t, err)
		if kill != nil {
			kill(f)
		}
		rep, err := f.Result(ctx)
		require.NoError(t, err)
		return fanoutSignature(t, rep, hd.LocalPath), rep
	}

	w1 := startWorker()
	crashed, rep := run(uniq(t, "u1"), func(f *sandboxclient.Fanout) {
		// Kill the worker while every script runs: each task session has its
		// exec update in flight.
		require.Eventually(t, func() bool {
			ctx := ctxFor(t, 10*time.Second)
			p, err := f.Progress(ctx)
			if err != nil {
				return false
			}
			for _, tr := range p.Tasks {
				if tr.Status != sandboxapi.TaskRunning {
					return false
				}
				ts, err := sc.Session(tr.WorkspaceID)
				if err != nil {
					return false
				}
				if d, err := ts.Describe(ctx); err != nil || d.InFlight == 0 {
					return false
				}
			}
			return true
		}, 2*time.Minute, 100*time.Millisecond)
		require.NoError(t, syscall.Kill(w1.Process.Pid, syscall.SIGKILL))
		_, _ = w1.Process.Wait()
		startWorker()
	})
	clean, _ := run(uniq(t, "u2"), nil)

	assert.Equal(t, clean, crashed, "a worker crash mid-fan-out must not change the result")
	assert.Contains(t, clean, "one succeeded exit=0 merge=merged files=[one.txt]")
	assert.Contains(t, clean, "two succeeded exit=0 merge=merged files=[two.txt]")
	assert.Contains(t, clean, "clash succeeded exit=0 merge=conflict files=[one.txt]")
	assert.Contains(t, clean, "bad failed exit=3 merge=skipped files=[bad.txt]")
	assert.True(t, strings.HasSuffix(clean, "status="), "the conversation ends clean")

	// The kill hit the scripts: each script's exec either re-attached to
	// its command (one update: runtime processes outlive the worker) or, on
	// a runtime without processes, failed with the worker and ran again
	// under a new update id (two).
	for _, tr := range rep.Tasks {
		accepted := 0
		for _, ev := range history(t, tr.WorkflowID, "").GetEvents() {
			if id := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetMeta().GetUpdateId(); strings.Contains(id, "/exec/") {
				accepted++
			}
		}
		assert.Contains(t, []int{1, 2}, accepted, "%s: exec updates in the task session", tr.TaskID)
	}
}
