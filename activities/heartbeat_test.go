package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

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

// The shielded context outlives a cancellation by a failed heartbeat call
// and ends, with the cause, at any other; it keeps the deadline; stop
// releases it.
func TestWithoutHeartbeatCancel(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sctx, stop := withoutHeartbeatCancel(ctx)
	cancel(serviceerror.NewUnavailable("heartbeat"))
	time.Sleep(10 * time.Millisecond) // the AfterFunc has run
	assert.NoError(t, sctx.Err())
	stop()
	assert.Error(t, sctx.Err())

	ctx, cancel = context.WithCancelCause(context.Background())
	sctx, stop = withoutHeartbeatCancel(ctx)
	defer stop()
	cancel(temporal.NewCanceledError())
	<-sctx.Done()
	var c *temporal.CanceledError
	assert.ErrorAs(t, context.Cause(sctx), &c)

	dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
	defer dcancel()
	want, _ := dctx.Deadline()
	sctx, stop = withoutHeartbeatCancel(dctx)
	defer stop()
	got, ok := sctx.Deadline()
	assert.True(t, ok && got.Equal(want), "deadline %v; want %v", got, want)
}
