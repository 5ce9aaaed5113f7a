package workflows

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// registerRemote adds fakes of the push and create-pull-request activities.
func registerRemote(env *testsuite.TestWorkflowEnvironment, pushes, prs *atomic.Int32) {
	env.RegisterActivityWithOptions(func(_ context.Context, in wire.OpInput[sandboxapi.PushRequest]) (sandboxapi.PushResult, error) {
		pushes.Add(1)
		status := sandboxapi.PushCreated
		if in.Request.ForceWithLease {
			status = sandboxapi.PushForced
		}
		return sandboxapi.PushResult{Branch: "agent/edits-c", Commit: "c1", Status: status}, nil
	}, activity.RegisterOptions{Name: wire.OpActivity(sandboxapi.UpdatePush)})
	env.RegisterActivityWithOptions(func(_ context.Context, in wire.OpInput[sandboxapi.PullRequestInput]) (sandboxapi.PullRequest, error) {
		prs.Add(1)
		return sandboxapi.PullRequest{Number: 7, URL: "https://example.com/o/r/pull/7", State: "open", Head: "agent/edits-c", Base: "main", Created: true}, nil
	}, activity.RegisterOptions{Name: wire.OpActivity(sandboxapi.UpdateCreatePullRequest)})
}

func TestSessionPushAndPullRequest(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	var pushes, prs atomic.Int32
	registerRemote(env, &pushes, &prs)
	req := *in.Request
	var acq, push, pr, noTitle updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdatePush, &push, sandboxapi.PushRequest{ForceWithLease: true})
	update(env, 2*time.Second, sandboxapi.UpdateCreatePullRequest, &pr, sandboxapi.PullRequestInput{Title: "t", Reviewers: []string{"bob"}})
	update(env, 3*time.Second, sandboxapi.UpdateCreatePullRequest, &noTitle, sandboxapi.PullRequestInput{Title: " "})
	update(env, 4*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)
	require.NoError(t, push.rejected)
	require.NoError(t, push.err)
	assert.Equal(t, sandboxapi.PushForced, push.value.(sandboxapi.PushResult).Status)
	require.NoError(t, pr.err)
	assert.Equal(t, 7, pr.value.(sandboxapi.PullRequest).Number)
	var app *temporal.ApplicationError
	require.True(t, errors.As(noTitle.rejected, &app), "%v", noTitle.rejected)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
	assert.Equal(t, int32(1), pushes.Load())
	assert.Equal(t, int32(1), prs.Load())
}

func TestSessionRejectsPushOnAnalysisWorkspaces(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeAnalysis, wire.HostTaskQueue(testHost))
	var pushes, prs atomic.Int32
	registerRemote(env, &pushes, &prs)
	req := *in.Request
	var acq, push, pr updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdatePush, &push, sandboxapi.PushRequest{})
	update(env, 2*time.Second, sandboxapi.UpdateCreatePullRequest, &pr, sandboxapi.PullRequestInput{Title: "t"})
	update(env, 3*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)
	for _, r := range []updateResult{push, pr} {
		var app *temporal.ApplicationError
		require.True(t, errors.As(r.rejected, &app), "%v", r.rejected)
		assert.Equal(t, sandboxapi.ErrCommandRejected.Type, app.Type())
	}
	assert.Zero(t, pushes.Load())
	assert.Zero(t, prs.Load())
}
