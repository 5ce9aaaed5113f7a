package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// A retry sends only what the previous attempt did not deliver, in order;
// indexes out of range or repeated in the recorded progress are ignored.
func TestPendingSignalsSkipDelivered(t *testing.T) {
	assert.Equal(t, []int{0, 1, 2}, pendingSignals(3, nil))
	assert.Equal(t, []int{1, 3}, pendingSignals(4, []int{2, 0, 0, -1, 9}))
	assert.Empty(t, pendingSignals(2, []int{1, 0}))
	assert.Empty(t, pendingSignals(0, []int{0}))
}

// The progress a previous attempt heartbeated comes back, cleaned (in range,
// each once); a first attempt has none.
func TestPreviousSignalProgressFromHeartbeat(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	run := func(details any) []int {
		env := s.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(func(ctx context.Context) ([]int, error) {
			return previousSignalProgress(ctx, 5), nil
		}, activity.RegisterOptions{Name: "progress"})
		if details != nil {
			env.SetHeartbeatDetails(details)
		}
		v, err := env.ExecuteActivity("progress")
		require.NoError(t, err)
		var out []int
		require.NoError(t, v.Get(&out))
		return out
	}
	assert.Empty(t, run(nil))
	assert.Equal(t, []int{0, 3, 4}, run(signalProgress{Delivered: []int{0, 3, 3, 7, 4, -2}}))
	assert.Empty(t, run("not progress"), "unreadable details: everything is sent again")
}

// Only a cancellation whose cause is a transient failure of a heartbeat
// call leaves the signals running; a requested cancellation, an attempt the
// server no longer knows, a pause and the activity's own deadline stop them.
func TestHeartbeatCallFailedOnlyForTransientCauses(t *testing.T) {
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, cause := range []error{context.DeadlineExceeded, serviceerror.NewDeadlineExceeded("late"),
		serviceerror.NewUnavailable("down"), serviceerror.NewResourceExhausted(0, "busy")} {
		assert.True(t, heartbeatCallFailed(cancelled(cause)), "%T", cause)
	}
	for _, cause := range []error{temporal.NewCanceledError(), serviceerror.NewNotFound("no such task"),
		activity.ErrActivityPaused, context.Canceled, errors.New("worker stopping")} {
		assert.False(t, heartbeatCallFailed(cancelled(cause)), "%T %v", cause, cause)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	assert.False(t, heartbeatCallFailed(ctx), "the activity's own deadline")
}

// The signals' context outlives a cancellation by a failed heartbeat call
// and ends, with the cause, at any other; stop releases it.
func TestSignalContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sctx, stop := signalContext(ctx)
	cancel(serviceerror.NewUnavailable("heartbeat"))
	time.Sleep(10 * time.Millisecond) // the AfterFunc has run
	assert.NoError(t, sctx.Err())
	stop()
	assert.Error(t, sctx.Err())

	ctx, cancel = context.WithCancelCause(context.Background())
	sctx, stop = signalContext(ctx)
	defer stop()
	cancel(temporal.NewCanceledError())
	<-sctx.Done()
	var c *temporal.CanceledError
	assert.ErrorAs(t, context.Cause(sctx), &c)
}
