package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestSessionUnderAForeignWorkflowIDServesNothing: a SessionWorkflow whose
// workflow id is not the one its workspace id derives (a second session of
// an existing workspace, started by update-with-start under another id)
// refuses its acquire and every other update with SandboxConflict, runs no
// activity, handles no signal, and fails; its message names the caller's
// workflow id only.
func TestSessionUnderAForeignWorkflowIDServesNothing(t *testing.T) {
	for _, id := range []string{"evil", "sandbox-session/000000000000000000000000", sandboxapi.StreamWorkflowIDPrefix + "x"} {
		env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id, TaskQueue: wire.HostTaskQueue(testHost)})
		req := *in.Request
		var acq, ex updateResult
		update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
		update(env, 10*time.Millisecond, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(sandboxapi.SignalEvict, sandboxapi.EvictRequest{})
			env.SignalWorkflow(sandboxapi.SignalPin, sandboxapi.PinRequest{})
		}, 5*time.Millisecond)
		env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)

		require.True(t, env.IsWorkflowCompleted())
		for name, err := range map[string]error{"acquire": acq.rejected, "exec": ex.rejected, "run": env.GetWorkflowError()} {
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "%s under %q: %v", name, id, err)
			assert.Equal(t, sandboxapi.ErrConflict.Type, app.Type(), name)
			assert.NotContains(t, app.Error(), in.WorkspaceID, "the message names the caller's id, not the workspace's")
		}
		assert.Zero(t, f.acquires.Load(), "no acquire ran")
		assert.Zero(t, f.execs.Load()+f.starts.Load(), "no exec ran")
		assert.Zero(t, f.hibernate.Load()+f.destroy.Load())
	}
}

// TestStreamWorkflowUnderAForeignWorkflowIDReadsNothing: the same for the
// stream workflow (sandboxapi.StreamWorkflowID).
func TestStreamWorkflowUnderAForeignWorkflowIDReadsNothing(t *testing.T) {
	env, reads := newStreamEnv(t, true, 10)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "sandbox-stream/evil", TaskQueue: sandboxapi.DefaultTaskQueue})
	var read updateResult
	update(env, 0, sandboxapi.UpdateProcessRead, &read, sandboxapi.ProcessReadInput{ProcessID: "exec-1"})
	env.ExecuteWorkflow(sandboxapi.ProcessStreamWorkflowType, sandboxapi.StreamInput{WorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c")})
	require.True(t, env.IsWorkflowCompleted())
	var app *temporal.ApplicationError
	require.True(t, errors.As(read.rejected, &app), "%v", read.rejected)
	assert.Equal(t, sandboxapi.ErrConflict.Type, app.Type())
	assert.Empty(t, *reads)
}
