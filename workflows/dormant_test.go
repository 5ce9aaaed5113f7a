package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func appType(t *testing.T, err error) string {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	return app.Type()
}

// A dormant run (the continuation of a released session) holds no runtime
// and no timer; the first operation resumes the workspace (the acquire
// activities run again), then runs; hibernate and release on a dormant run
// do not resume it.
func TestDormantSessionWakesOnTheNextOperation(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	f.exists = true
	ws := sandboxapi.Workspace{ID: in.WorkspaceID, Mode: sandboxapi.ModeEdit, HostID: testHost, BranchName: "agent/edits-c",
		Capabilities: sandboxapi.CapabilitiesFromMode(sandboxapi.ModeEdit, false), Repo: sandboxapi.RepoIdentity{Host: "example.com", Owner: "o", Name: "r"}}
	carry := wire.SessionRunInput{WorkspaceID: in.WorkspaceID, Carry: &wire.SessionCarry{Workspace: ws, Dormant: true,
		State: sandboxapi.StateReleased, Settings: wire.SessionSettings{IdleStop: time.Minute, IdleClose: time.Hour, RuntimeKind: "local"}}}
	var desc sandboxapi.SessionDescription
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&desc))
	}, time.Second)
	var rel, read, ex updateResult
	update(env, 2*time.Second, sandboxapi.UpdateRelease, &rel, sandboxapi.ReleaseInput{})
	update(env, 3*time.Second, sandboxapi.UpdateReadFile, &read, sandboxapi.ReadFileInput{Path: "a.txt"})
	update(env, 4*time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, carry)

	assert.Equal(t, sandboxapi.StateReleased, desc.State, "dormant: the state it ended in")
	assert.True(t, desc.IdleCloseAt.IsZero(), "no idle timer while dormant")
	require.NoError(t, rel.err)
	assert.Equal(t, "not running", rel.value.(sandboxapi.ReleaseResult).Runtime)
	require.NoError(t, read.err)
	require.NoError(t, ex.err)
	assert.Equal(t, int32(1), f.acquires.Load(), "woken once, by the first operation")
	assert.Equal(t, int32(1), f.execs.Load())
	// After the wake the session is active again: it idles (hibernate) and
	// closes (destroy), then goes dormant again. The release on the dormant
	// run stopped the runtime once more without waking it.
	requireDormant(t, env, sandboxapi.StateClosed)
	assert.Equal(t, int32(2), f.hibernate.Load(), "release while dormant, then the idle stop")
	assert.Equal(t, int32(1), f.destroy.Load(), "the idle close")
}

// A run whose first acquire never comes (a rejected update-with-start)
// ends within acquireBeginWait as failed.
func TestRunWithoutAnAcquireEndsQuickly(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, sandboxapi.DefaultTaskQueue)
	start := env.Now()
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	// The run fails (the Web UI's Failures view counts it), saying why.
	assert.Equal(t, sandboxapi.ErrWorkspaceNotFound.Type, appType(t, env.GetWorkflowError()))
	assert.LessOrEqual(t, env.Now().Sub(start), acquireBeginWait+time.Second)
	assert.Equal(t, int32(0), f.acquires.Load())
	v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	var d sandboxapi.SessionDescription
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateFailed, d.State)
}

// Arguments are decoded strictly: an unknown field or a wrongly typed
// value is InvalidArgument naming it, and nothing runs.
func TestUpdateArgumentsAreDecodedStrictly(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	req := *in.Request
	var acq, rel, unknown, wrongType updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &unknown, map[string]any{"cmd": []string{"true"}, "timeoutS": 1})
	update(env, time.Second, sandboxapi.UpdateExec, &wrongType, map[string]any{"cmd": "true"})
	update(env, 2*time.Second, sandboxapi.UpdateRelease, &rel, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)
	require.NoError(t, rel.err)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, appType(t, unknown.rejected))
	assert.Contains(t, unknown.rejected.Error(), "timeoutS")
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, appType(t, wrongType.rejected))
	assert.Equal(t, int32(0), f.execs.Load())
}

// While a run is ending (released or idle-closed, before its dormant
// continuation), new updates are refused with the retryable
// SessionReleased, whose details name its kind: never a message to match.
func TestEndingRunRefusesWithSessionReleased(t *testing.T) {
	s := &session{wsID: "ws-000000000000000000000000", ending: true}
	err := s.admitting(sandboxapi.UpdateReadFile)
	assert.Equal(t, sandboxapi.ErrSessionReleased.Type, appType(t, err))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	var d sandboxapi.ErrorDetails
	require.NoError(t, app.Details(&d))
	assert.Equal(t, sandboxapi.ErrorDetails{Family: "workspace", Kind: "WorkspaceUnavailable", SubKind: "SessionReleased", Retryable: true}, d)
	assert.True(t, sandboxapi.IsWorkspaceUnavailable(sandboxapi.FromTemporal(err)) && sandboxapi.IsSessionReleased(sandboxapi.FromTemporal(err)))
	s.ending = false
	assert.NoError(t, s.admitting(sandboxapi.UpdateReadFile))
}

// An undecodable workflow argument fails the run with InvalidArgument and
// refuses the update that came with it.
func TestUndecodableWorkflowArgumentFailsTheRun(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, sandboxapi.DefaultTaskQueue)
	var acq updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, map[string]any{"workspace_id": in.WorkspaceID, "requets": map[string]any{}})
	require.True(t, env.IsWorkflowCompleted())
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, appType(t, env.GetWorkflowError()))
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, appType(t, acq.rejected))
}
