package workflows

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

const fakeHead = "abcdef0123456789abcdef0123456789abcdef01"

// fakeLifecycle stands in for the lifecycle activities of a session.
type fakeLifecycle struct {
	mu          sync.Mutex
	calls       []string
	destroyIn   []wire.DestroyActivityInput
	prepareIn   []wire.ForkPrepareInput
	acquireFork []wire.ForkAcquireInput
	locate      wire.LocateResult
	acquireIn   []wire.AcquireActivityInput
}

func (l *fakeLifecycle) record(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, name)
}

func (l *fakeLifecycle) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(_ context.Context, in wire.CheckpointActivityInput) (sandboxapi.Checkpoint, error) {
		l.record("checkpoint:" + in.Label)
		return sandboxapi.Checkpoint{ID: 1, Label: in.Label, Head: fakeHead}, nil
	}, wire.OpActivity(sandboxapi.UpdateCheckpoint))
	reg(func(context.Context, wire.WorkspaceActivityInput) (sandboxapi.CheckpointList, error) {
		l.record("checkpoints")
		return sandboxapi.CheckpointList{Checkpoints: []sandboxapi.Checkpoint{{ID: 1}}}, nil
	}, wire.OpActivity(sandboxapi.UpdateCheckpoints))
	reg(func(_ context.Context, in wire.RollbackActivityInput) (sandboxapi.RollbackResult, error) {
		l.record("rollback")
		return sandboxapi.RollbackResult{Checkpoint: sandboxapi.Checkpoint{ID: in.Checkpoint}, Undo: sandboxapi.Checkpoint{ID: in.Checkpoint + 1}}, nil
	}, wire.OpActivity(sandboxapi.UpdateRollback))
	reg(func(_ context.Context, in wire.ForkPrepareInput) (wire.ForkPrepareResult, error) {
		l.mu.Lock()
		l.prepareIn = append(l.prepareIn, in)
		l.mu.Unlock()
		l.record("fork-prepare")
		return wire.ForkPrepareResult{Checkpoint: sandboxapi.Checkpoint{ID: 3, Head: fakeHead}}, nil
	}, wire.ActivityForkPrepare)
	reg(func(_ context.Context, in wire.ForkAcquireInput) (sandboxapi.Handle, error) {
		l.mu.Lock()
		l.acquireFork = append(l.acquireFork, in)
		l.mu.Unlock()
		l.record("fork-acquire")
		return sandboxapi.Handle{WorkspaceID: sandboxapi.WorkspaceIDForKey(in.Request.Key()), HostID: in.HostID, ForkedFrom: in.SourceID, BaseCommit: in.Request.BaseRef}, nil
	}, wire.ActivityForkAcquire)
	reg(func(_ context.Context, in wire.DestroyActivityInput) (sandboxapi.DestroyResult, error) {
		l.mu.Lock()
		l.destroyIn = append(l.destroyIn, in)
		l.mu.Unlock()
		l.record("destroy")
		return sandboxapi.DestroyResult{WorkspaceID: in.WorkspaceID, Existed: true, Discarded: in.Discard, Message: "destroyed"}, nil
	}, wire.ActivityDestroy)
	reg(func(_ context.Context, in wire.WorkspaceActivityInput) (sandboxapi.Handle, error) {
		l.record("restore")
		return sandboxapi.Handle{WorkspaceID: in.WorkspaceID, RestoredFrom: sandboxapi.DestroyedRef(in.WorkspaceID), BaseCommit: fakeHead}, nil
	}, wire.ActivityRestoreDestroyed)
}

// newLifecycleEnv is newEnv with the lifecycle activities registered too.
func newLifecycleEnv(t *testing.T, mode sandboxapi.WorkspaceMode) (*testsuite.TestWorkflowEnvironment, *fakeActivities, *fakeLifecycle, sandboxapi.SessionInput) {
	env, f, in := newEnv(t, mode, wire.HostTaskQueue(testHost))
	l := &fakeLifecycle{}
	l.register(env)
	return env, f, l, in
}

func requireType(t *testing.T, err error, kind *sandboxapi.Kind) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	assert.Equal(t, kind.Type, app.Type())
}

// destroy ends the session for good: the run completes (no continue-as-new
// into a dormant run), its state is destroyed, the runtime state is gone,
// and an update still waiting for the lock is refused as SessionReleased.
func TestSessionDestroyCompletesTheSession(t *testing.T) {
	env, f, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	req := *in.Request
	var acq, ex, cp, list, dst, after updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	update(env, 2*time.Second, sandboxapi.UpdateCheckpoint, &cp, sandboxapi.CheckpointInput{Label: "before"})
	update(env, 3*time.Second, sandboxapi.UpdateCheckpoints, &list)
	update(env, 4*time.Second, sandboxapi.UpdateDestroy, &dst, sandboxapi.DestroyInput{Discard: true})
	update(env, 4*time.Second, sandboxapi.UpdateWriteFile, &after, sandboxapi.WriteFileInput{Path: "a.txt", Content: []byte("x")}) // waits for the lock destroy holds
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the run completes: destroy does not continue into a dormant run")
	for _, u := range []updateResult{acq, ex, cp, list, dst} {
		require.NoError(t, u.rejected)
		require.NoError(t, u.err)
	}
	res, ok := dst.value.(sandboxapi.DestroyResult)
	require.True(t, ok, "%T", dst.value)
	assert.True(t, res.Existed && res.Discarded)
	require.Len(t, l.destroyIn, 1)
	assert.True(t, l.destroyIn[0].Discard)
	assert.Equal(t, []string{"checkpoint:before", "checkpoints", "destroy"}, l.calls)
	assert.Equal(t, int32(1), f.execs.Load())
	assert.Equal(t, int32(0), f.writes.Load(), "nothing runs after destroy")
	if after.rejected == nil {
		requireType(t, after.err, sandboxapi.ErrSessionReleased)
	} else {
		requireType(t, after.rejected, sandboxapi.ErrSessionReleased)
	}

	var d sandboxapi.SessionDescription
	v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateDestroyed, d.State)
	assert.False(t, d.RuntimeRunning)
}

// A dormant session is destroyed without being woken: no acquire runs.
func TestSessionDestroyOfADormantSessionDoesNotResumeIt(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	var acquires atomic.Int32
	env.RegisterActivityWithOptions(func(_ context.Context, ain wire.AcquireActivityInput) (wire.AcquireActivityResult, error) {
		acquires.Add(1)
		return wire.AcquireActivityResult{}, errors.New("a dormant destroy must not resume the workspace")
	}, activity.RegisterOptions{Name: wire.ActivityAcquire})
	ws := sandboxapi.Workspace{ID: in.WorkspaceID, Mode: sandboxapi.ModeEdit, HostID: testHost, State: sandboxapi.WorkspaceEvicted,
		Capabilities: sandboxapi.CapabilitiesFromMode(sandboxapi.ModeEdit, false)}
	run := wire.SessionRunInput{WorkspaceID: in.WorkspaceID, Carry: &wire.SessionCarry{Workspace: ws, Dormant: true, State: sandboxapi.StateEvicted,
		Settings: wire.SessionSettings{IdleStop: time.Minute, IdleClose: time.Hour}}}
	var dst updateResult
	update(env, time.Second, sandboxapi.UpdateDestroy, &dst, sandboxapi.DestroyInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, run)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, dst.err)
	assert.Equal(t, int32(0), acquires.Load())
	assert.Equal(t, []string{"destroy"}, l.calls)
}

// Every lifecycle operation that would change an analysis workspace is
// refused by its validator (no activity runs); checkpoints and destroy are not.
func TestSessionLifecycleOnAnalysisWorkspace(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeAnalysis)
	in.Request.ConversationID = ""
	req := *in.Request
	var acq, cp, rb, fk, rs, list, dst updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateCheckpoint, &cp, sandboxapi.CheckpointInput{})
	update(env, 2*time.Second, sandboxapi.UpdateRollback, &rb, sandboxapi.RollbackInput{Checkpoint: 1})
	update(env, 3*time.Second, sandboxapi.UpdateFork, &fk, sandboxapi.ForkInput{TaskID: "t"})
	update(env, 4*time.Second, sandboxapi.UpdateRestore, &rs)
	update(env, 5*time.Second, sandboxapi.UpdateCheckpoints, &list)
	update(env, 6*time.Second, sandboxapi.UpdateDestroy, &dst, sandboxapi.DestroyInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, acq.err)
	for name, u := range map[string]updateResult{"checkpoint": cp, "rollback": rb, "fork": fk, "restore": rs} {
		require.Error(t, u.rejected, name)
		requireType(t, u.rejected, sandboxapi.ErrCommandRejected)
	}
	require.NoError(t, list.err)
	require.NoError(t, dst.err)
	assert.Equal(t, []string{"checkpoints", "destroy"}, l.calls)
}

func TestSessionLifecycleValidators(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	req := *in.Request
	var acq, label, zero, both, self, none updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateCheckpoint, &label, sandboxapi.CheckpointInput{Label: "a\nb"})
	update(env, 2*time.Second, sandboxapi.UpdateRollback, &zero, sandboxapi.RollbackInput{})
	update(env, 3*time.Second, sandboxapi.UpdateFork, &both, sandboxapi.ForkInput{TaskID: "t", ConversationID: "c2"})
	update(env, 4*time.Second, sandboxapi.UpdateFork, &self, sandboxapi.ForkInput{ConversationID: req.ConversationID})
	update(env, 5*time.Second, sandboxapi.UpdateFork, &none, sandboxapi.ForkInput{})
	update(env, 6*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	for name, u := range map[string]updateResult{"label": label, "zero": zero, "both": both, "self": self, "none": none} {
		require.Error(t, u.rejected, name)
		requireType(t, u.rejected, sandboxapi.ErrInvalidArgument)
	}
	assert.Empty(t, l.calls)
}

// fork checkpoints the source (under its lock) and acquires the target on
// the source's host, its branch from the checkpoint's head.
func TestSessionFork(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	req := *in.Request
	var acq, fk, rb updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateFork, &fk, sandboxapi.ForkInput{TaskID: "t9"})
	update(env, 2*time.Second, sandboxapi.UpdateRollback, &rb, sandboxapi.RollbackInput{Checkpoint: 3})
	update(env, 3*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, fk.rejected)
	require.NoError(t, fk.err)
	res, ok := fk.value.(sandboxapi.ForkResult)
	require.True(t, ok, "%T", fk.value)
	target := sandboxapi.WorkspaceIDForKey("task|u|p|t9")
	assert.Equal(t, target, res.Handle.WorkspaceID)
	assert.Equal(t, in.WorkspaceID, res.Handle.ForkedFrom)
	assert.Equal(t, 3, res.Checkpoint.ID)
	require.Len(t, l.prepareIn, 1)
	assert.Equal(t, sandbox.ForkTarget{ID: target, Branch: tbUP + "task-t9", OpID: l.prepareIn[0].Target.OpID}, l.prepareIn[0].Target)
	assert.NotEmpty(t, l.prepareIn[0].Target.OpID, "the fork update's id")
	require.Len(t, l.acquireFork, 1)
	a := l.acquireFork[0]
	assert.Equal(t, testHost, a.HostID)
	assert.Equal(t, fakeHead, a.Request.BaseRef)
	assert.Equal(t, sandboxapi.ModeTask, a.Request.Mode)
	assert.Equal(t, "u", a.Request.UserID)
	assert.Equal(t, l.prepareIn[0].Target.OpID, a.OpID)
	assert.Equal(t, []string{"fork-prepare", "fork-acquire", "rollback"}, l.calls)
	require.NoError(t, rb.err)
}

// restore as the first operation of a run (the session of a destroyed
// workspace had completed): the acquire activities run with Restore set and
// reach the tombstone's host.
func TestSessionRestoreAsTheFirstOperation(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	l.locate = wire.LocateResult{HostID: testHost, Removed: true}
	env.RegisterActivityWithOptions(func(context.Context, wire.WorkspaceActivityInput) (wire.LocateResult, error) {
		return l.locate, nil
	}, activity.RegisterOptions{Name: wire.ActivityLocate})
	env.RegisterActivityWithOptions(func(_ context.Context, ain wire.AcquireActivityInput) (wire.AcquireActivityResult, error) {
		l.mu.Lock()
		l.acquireIn = append(l.acquireIn, ain)
		l.mu.Unlock()
		ws := sandboxapi.Workspace{ID: ain.WorkspaceID, Mode: sandboxapi.ModeEdit, HostID: testHost, Capabilities: sandboxapi.CapabilitiesFromMode(sandboxapi.ModeEdit, false)}
		return wire.AcquireActivityResult{Workspace: ws, Created: true, RestoredFrom: sandboxapi.DestroyedRef(ain.WorkspaceID),
			Settings: wire.SessionSettings{IdleStop: time.Minute, IdleClose: time.Hour}}, nil
	}, activity.RegisterOptions{Name: wire.ActivityAcquire})
	run := sandboxapi.SessionInput{WorkspaceID: in.WorkspaceID}
	var rs updateResult
	update(env, 0, sandboxapi.UpdateRestore, &rs)
	update(env, time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, run)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, rs.rejected)
	require.NoError(t, rs.err)
	h, ok := rs.value.(sandboxapi.Handle)
	require.True(t, ok, "%T", rs.value)
	assert.Equal(t, sandboxapi.DestroyedRef(in.WorkspaceID), h.RestoredFrom)
	require.Len(t, l.acquireIn, 1)
	assert.True(t, l.acquireIn[0].Restore)
	assert.Nil(t, l.acquireIn[0].Request)
}

// A restore of a workspace nothing is kept of ends its run as failed.
func TestSessionRestoreOfNothingFails(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	run := sandboxapi.SessionInput{WorkspaceID: in.WorkspaceID}
	var rs updateResult
	update(env, 0, sandboxapi.UpdateRestore, &rs)
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, run)
	require.True(t, env.IsWorkflowCompleted())
	requireType(t, env.GetWorkflowError(), sandboxapi.ErrWorkspaceNotFound) // the run fails with it
	requireType(t, rs.err, sandboxapi.ErrWorkspaceNotFound)
	assert.Empty(t, l.calls)
}

// In an active session, restore runs the restore activity (a fresh
// workspace gets its key's destroy backup).
func TestSessionRestoreInAnActiveSession(t *testing.T) {
	env, _, l, in := newLifecycleEnv(t, sandboxapi.ModeEdit)
	req := *in.Request
	var acq, rs updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateRestore, &rs)
	update(env, 2*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	carry := requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, rs.err)
	assert.Equal(t, []string{"restore"}, l.calls)
	assert.Equal(t, fakeHead, carry.Workspace.BaseCommit, "the restored base commit is carried")
}

// fakeCleanup stands in for the cleanup's activities.
type fakeCleanup struct {
	mu        sync.Mutex
	destroyed []string
	opIDs     []string
	cur, max  int
	failing   map[string]bool
}

func (c *fakeCleanup) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context) (wire.EvictionHostsResult, error) {
		return wire.EvictionHostsResult{Hosts: []string{"h2", "h1", "h3"}}, nil
	}, wire.ActivityEvictionHosts)
	reg(func(_ context.Context, in wire.CleanupSessionsInput) (wire.CleanupCandidates, error) {
		if in.Query != "SandboxUser = 'alice' AND SandboxProject = 'p1'" {
			return wire.CleanupCandidates{}, errors.New("unexpected query " + in.Query)
		}
		return wire.CleanupCandidates{Workspaces: []wire.CleanupCandidate{
			{WorkspaceID: "ws-000000000000000000000003", HostID: "h1", Mode: "edit", State: "active"},
			{WorkspaceID: "ws-000000000000000000000001", HostID: "h2", Mode: "task", State: "idle"},
		}}, nil
	}, wire.ActivityCleanupSessions)
	reg(func(_ context.Context, in wire.CleanupListInput) (wire.CleanupCandidates, error) {
		switch in.HostID {
		case "h1":
			return wire.CleanupCandidates{Workspaces: []wire.CleanupCandidate{
				{WorkspaceID: "ws-000000000000000000000003", HostID: "h1", Mode: "edit", ProjectID: "p1", State: "ready"},
				{WorkspaceID: "ws-000000000000000000000002", HostID: "h1", Mode: "analysis", ProjectID: "p1", State: "evicted"},
			}}, nil
		case "h2":
			return wire.CleanupCandidates{Workspaces: []wire.CleanupCandidate{
				{WorkspaceID: "ws-000000000000000000000004", HostID: "h2", Mode: "task", ProjectID: "p1", State: "ready"},
			}}, nil
		}
		return wire.CleanupCandidates{}, temporal.NewNonRetryableApplicationError("host h3 is broken", "SandboxError", nil)
	}, wire.ActivityCleanupList)
	reg(func(_ context.Context, in wire.CleanupDestroyInput) (sandboxapi.DestroyResult, error) {
		c.mu.Lock()
		c.cur++
		c.max = max(c.max, c.cur)
		c.destroyed = append(c.destroyed, in.WorkspaceID)
		c.opIDs = append(c.opIDs, in.OpID)
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		c.cur--
		c.mu.Unlock()
		if c.failing[in.WorkspaceID] {
			return sandboxapi.DestroyResult{}, temporal.NewNonRetryableApplicationError("host down", sandboxapi.ErrWorkspaceUnavailable.Type, nil)
		}
		if in.WorkspaceID == "ws-000000000000000000000004" {
			return sandboxapi.DestroyResult{WorkspaceID: in.WorkspaceID, Message: "no such workspace"}, nil
		}
		return sandboxapi.DestroyResult{WorkspaceID: in.WorkspaceID, Existed: true, BackupRef: "refs/sandbox/destroyed/" + in.WorkspaceID, Message: "destroyed"}, nil
	}, wire.ActivityCleanupDestroy)
}

func TestCleanupDestroysEveryWorkspaceFoundAndReportsEach(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
	c := &fakeCleanup{failing: map[string]bool{"ws-000000000000000000000002": true}}
	c.register(env)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: sandboxapi.CleanupWorkflowIDPrefix + "alice/p1/1"})
	env.ExecuteWorkflow(sandboxapi.CleanupWorkflowType, sandboxapi.CleanupInput{UserID: "alice", ProjectID: "p1", MaxParallel: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var rep sandboxapi.CleanupReport
	require.NoError(t, env.GetWorkflowResult(&rep))

	assert.True(t, rep.Done)
	got := map[string]string{}
	var ids []string
	for _, o := range rep.Workspaces {
		got[o.WorkspaceID] = o.Outcome
		ids = append(ids, o.WorkspaceID)
	}
	assert.True(t, sort.StringsAreSorted(ids), "reported in workspace id order")
	assert.Equal(t, map[string]string{
		"ws-000000000000000000000001": sandboxapi.CleanupDestroyed, // a session only
		"ws-000000000000000000000002": sandboxapi.CleanupFailed,    // a row only (evicted), whose destroy failed
		"ws-000000000000000000000003": sandboxapi.CleanupDestroyed, // both: listed once
		"ws-000000000000000000000004": sandboxapi.CleanupGone,
	}, got)
	assert.Equal(t, sandboxapi.CleanupSummary{Found: 4, Destroyed: 2, Gone: 1, Failed: 1, Backups: 2}, rep.Summary)
	assert.Len(t, c.destroyed, 4, "each destroyed once")
	assert.LessOrEqual(t, c.max, 2, "at most MaxParallel destroys at once")
	for i, id := range c.destroyed {
		assert.True(t, strings.HasPrefix(c.opIDs[i], sandboxapi.CleanupWorkflowIDPrefix+"alice/p1/1/") && strings.HasSuffix(c.opIDs[i], "/"+id+"/destroy"), c.opIDs[i])
	}
	hosts := map[string]sandboxapi.CleanupHost{}
	for _, h := range rep.Hosts {
		hosts[h.HostID] = h
	}
	assert.Equal(t, 2, hosts["h1"].Workspaces)
	assert.Contains(t, hosts["h3"].Error, "host h3 is broken")
	for _, o := range rep.Workspaces {
		if o.WorkspaceID == "ws-000000000000000000000002" {
			assert.Equal(t, "h1", o.HostID)
			assert.Equal(t, "analysis", o.Mode)
			assert.Contains(t, o.Message, "host down")
		}
	}
}

func TestCleanupDryRunDestroysNothing(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
	c := &fakeCleanup{}
	c.register(env)
	env.ExecuteWorkflow(sandboxapi.CleanupWorkflowType, sandboxapi.CleanupInput{UserID: "alice", ProjectID: "p1", DryRun: true})
	require.NoError(t, env.GetWorkflowError())
	var rep sandboxapi.CleanupReport
	require.NoError(t, env.GetWorkflowResult(&rep))
	assert.Empty(t, c.destroyed)
	require.Len(t, rep.Workspaces, 4)
	for _, o := range rep.Workspaces {
		assert.Equal(t, sandboxapi.CleanupWouldDestroy, o.Outcome)
	}
}

func TestCleanupRejectsBadInput(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
	c := &fakeCleanup{}
	c.register(env)
	env.ExecuteWorkflow(sandboxapi.CleanupWorkflowType, sandboxapi.CleanupInput{UserID: "al'ice"})
	require.True(t, env.IsWorkflowCompleted())
	requireType(t, env.GetWorkflowError(), sandboxapi.ErrInvalidArgument)
	assert.Empty(t, c.destroyed)
}

// With FromFork the fan-out commits nothing and makes each task by the
// conversation session's fork update; no child session is started for it.
func TestFanoutFromForkForksEachTask(t *testing.T) {
	f := &fakeFanout{}
	env := newFanoutEnv(f)
	var prepared []wire.FanoutPrepareInput
	var forked []wire.FanoutForkTaskInput
	var mu sync.Mutex
	env.RegisterActivityWithOptions(func(_ context.Context, in wire.FanoutPrepareInput) (wire.FanoutPrepareResult, error) {
		mu.Lock()
		prepared = append(prepared, in)
		mu.Unlock()
		return wire.FanoutPrepareResult{StartCommit: fakeStart, Handle: sandboxapi.Handle{WorkspaceID: in.WorkspaceID, HostID: testHost, Branch: "agent/edits-c",
			Mode: sandboxapi.ModeEdit, UserID: "u", ProjectID: "p", Repo: sandboxapi.RepoIdentity{URL: "https://example.com/o/r.git"}}}, nil
	}, activity.RegisterOptions{Name: wire.ActivityFanoutPrepare})
	env.RegisterActivityWithOptions(func(_ context.Context, in wire.FanoutForkTaskInput) (sandboxapi.Handle, error) {
		mu.Lock()
		forked = append(forked, in)
		mu.Unlock()
		id := sandboxapi.WorkspaceIDForKey("task|u|p|" + in.TaskID)
		wf, _ := sandboxapi.SessionWorkflowID(id)
		return sandboxapi.Handle{WorkspaceID: id, WorkflowID: wf, Branch: tbUP + "task-" + in.TaskID, BaseCommit: fakeStart, HostID: in.HostID, ForkedFrom: in.WorkspaceID}, nil
	}, activity.RegisterOptions{Name: wire.ActivityFanoutForkTask})
	conv := sandboxapi.WorkspaceIDForKey("edit|u|p|c")
	in := sandboxapi.FanoutInput{ConversationWorkspaceID: conv, FromFork: true,
		Tasks: []sandboxapi.TaskSpec{{TaskID: "k1", Script: "exit=0"}, {TaskID: "k2", Script: "exit=1"}}}
	env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r sandboxapi.FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))
	require.Len(t, prepared, 1)
	assert.True(t, prepared[0].Fork, "nothing is committed first")
	assert.True(t, r.FromFork)
	require.Len(t, forked, 2)
	for _, fi := range forked {
		assert.Equal(t, conv, fi.WorkspaceID)
		assert.Equal(t, testHost, fi.HostID)
		assert.True(t, strings.HasPrefix(fi.OpID, fanoutUP+"/"), fi.OpID)
	}
	assert.Empty(t, f.children, "the fork starts the task's session, not the fan-out")
	tasks := byID(r)
	assert.Equal(t, [2]string{sandboxapi.TaskSucceeded, sandboxapi.TaskMergeMerged}, [2]string{tasks["k1"].Status, tasks["k1"].Merge})
	assert.Equal(t, [2]string{sandboxapi.TaskFailed, sandboxapi.TaskMergeSkipped}, [2]string{tasks["k2"].Status, tasks["k2"].Merge})
	assert.Equal(t, [][]string{{tbUP + "task-k1"}}, f.merged)
}

// TestCleanupReplayRecordedHistories replays the cleanup histories recorded
// by the end-to-end tests (tests/lifecycle_test.go,
// SANDBOXCORE_UPDATE_HISTORIES=1) against the current workflow code.
func TestCleanupReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cleanup-histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded cleanup histories")
	for _, f := range files {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}
