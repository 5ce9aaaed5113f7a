package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func newStreamEnv(t *testing.T, exists bool, chunk int) (*testsuite.TestWorkflowEnvironment, *[]wire.ProcessReadActivityInput) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ProcessStreamWorkflow, workflow.RegisterOptions{Name: sandboxapi.ProcessStreamWorkflowType})
	env.RegisterActivityWithOptions(func(context.Context, wire.WorkspaceActivityInput) (wire.LocateResult, error) {
		if !exists {
			return wire.LocateResult{}, nil
		}
		return wire.LocateResult{HostID: testHost, Exists: true}, nil
	}, activity.RegisterOptions{Name: wire.ActivityLocate})
	var reads []wire.ProcessReadActivityInput
	env.RegisterActivityWithOptions(func(_ context.Context, in wire.ProcessReadActivityInput) (sandboxapi.ProcessReadResult, error) {
		reads = append(reads, in)
		return sandboxapi.ProcessReadResult{ProcessID: in.Request.ProcessID, Data: make([]byte, chunk), Offset: in.Request.Offset,
			NextOffset: in.Request.Offset + int64(chunk)}, nil
	}, activity.RegisterOptions{Name: wire.ActivityProcessRead})
	// The workspace's own stream workflow id (checkBinding).
	wfID, _ := sandboxapi.StreamWorkflowID(sandboxapi.WorkspaceIDForKey("edit|u|p|c"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wfID, TaskQueue: sandboxapi.DefaultTaskQueue})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", sandboxapi.SignalProcessUsed, mock.Anything).Return(nil).Maybe()
	return env, &reads
}

// TestStreamWorkflowShedsHistory: reads go to the workspace's host; a run
// that served streamRunBytes continues as new.
func TestStreamWorkflowShedsHistory(t *testing.T) {
	env, reads := newStreamEnv(t, true, 1<<20)
	wsID := sandboxapi.WorkspaceIDForKey("edit|u|p|c")
	out := make([]updateResult, 5)
	for i := range out {
		update(env, time.Duration(i+1)*time.Second, sandboxapi.UpdateProcessRead, &out[i], sandboxapi.ProcessReadInput{ProcessID: "exec-1", Offset: int64(i) << 20, WaitMS: 1000})
	}
	env.ExecuteWorkflow(sandboxapi.ProcessStreamWorkflowType, sandboxapi.StreamInput{WorkspaceID: wsID})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	served := 0
	for _, o := range out {
		if o.err == nil && o.value != nil {
			served++
		}
	}
	assert.Equal(t, 4, served, "four MiB, then the run continued as new")
	require.NotEmpty(t, *reads)
	assert.Equal(t, time.Second, (*reads)[0].Wait)
}

// TestStreamWorkflowEndsWhenIdleAndRefusesUnknownWorkspaces.
func TestStreamWorkflowEndsWhenIdleAndRefusesUnknownWorkspaces(t *testing.T) {
	env, _ := newStreamEnv(t, false, 10)
	wsID := sandboxapi.WorkspaceIDForKey("edit|u|p|c")
	var read, bad updateResult
	update(env, time.Second, sandboxapi.UpdateProcessRead, &read, sandboxapi.ProcessReadInput{ProcessID: "p"})
	update(env, 2*time.Second, sandboxapi.UpdateProcessRead, &bad, sandboxapi.ProcessReadInput{ProcessID: "p", Offset: -1})
	env.ExecuteWorkflow(sandboxapi.ProcessStreamWorkflowType, sandboxapi.StreamInput{WorkspaceID: wsID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "completed after the idle period")
	var app *temporal.ApplicationError
	require.True(t, errors.As(read.err, &app), "%v", read.err)
	assert.Equal(t, sandboxapi.ErrWorkspaceNotFound.Type, app.Type())
	require.True(t, errors.As(bad.rejected, &app), "%v", bad.rejected)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
}
