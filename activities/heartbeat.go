package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// HeartbeatShield returns the worker interceptor that keeps every activity
// running when the SDK cancels its context only because one heartbeat call
// failed in time. The SDK gives a heartbeat call the worker's heartbeat
// throttle interval as its deadline (one second on a host worker, whose
// running execs publish their output that often) and cancels the activity
// when the call fails with a transient error, although the attempt is still
// running and its heartbeat timeout (15 s or more) far away. On a loaded
// host that cancelled acquires mid-checkout and every evict signal after
// the first late heartbeat (docs/BENCHMARKS.md "Scale"). Every other end of
// the context (cancellation asked for, the attempt timed out or unknown to
// the server, a pause or reset, the worker stopping, the deadline) reaches
// the activity as before, but for one the SDK reports after a shielded
// cancel (it cancels once): such an attempt runs on to its deadline, which
// idempotent activities allow. Installed on both workers by
// internal/hostworker.
func HeartbeatShield() interceptor.WorkerInterceptor {
	return withActivityContext(withoutHeartbeatCancel)
}

// withoutHeartbeatCancel returns a context carrying ctx's values and
// deadline that is not cancelled when ctx is cancelled only because a
// heartbeat call failed in time (heartbeatCallFailed), and is cancelled,
// with ctx's cause, by every other end of ctx. stop releases it.
func withoutHeartbeatCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var cancelDeadline context.CancelFunc = func() {}
	if d, ok := ctx.Deadline(); ok {
		sctx, cancelDeadline = context.WithDeadline(sctx, d)
	}
	after := context.AfterFunc(ctx, func() {
		if !heartbeatCallFailed(ctx) {
			cancel(context.Cause(ctx))
		}
	})
	return sctx, func() { after(); cancelDeadline(); cancel(context.Canceled) }
}

// heartbeatCallFailed reports whether ctx (an activity's context, done) was
// cancelled by the SDK because a heartbeat call failed with a transient
// error (its deadline, the server unavailable or overloaded).
func heartbeatCallFailed(ctx context.Context) bool {
	if !errors.Is(ctx.Err(), context.Canceled) {
		return false // the activity's own deadline
	}
	cause := context.Cause(ctx)
	var (
		deadline    *serviceerror.DeadlineExceeded
		unavailable *serviceerror.Unavailable
		exhausted   *serviceerror.ResourceExhausted
	)
	return errors.Is(cause, context.DeadlineExceeded) || errors.As(cause, &deadline) ||
		errors.As(cause, &unavailable) || errors.As(cause, &exhausted)
}

// heartbeatEvery is how often long activities heartbeat (their HeartbeatTimeout is 15 s or more).
const heartbeatEvery = 3 * time.Second

// whileHeartbeating runs fn, heartbeating every heartbeatEvery until it returns.
func whileHeartbeating[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	if !activity.IsActivity(ctx) {
		return fn()
	}
	defer startHeartbeats(ctx, heartbeatEvery, nil)()
	return fn()
}

// startHeartbeats records a heartbeat of the activity of ctx every interval
// (with details() as its details when details is not nil) until ctx ends or
// stop is called; stop returns once no heartbeat is being recorded.
func startHeartbeats(ctx context.Context, every time.Duration, details func() any) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if details != nil {
					activity.RecordHeartbeat(ctx, details())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}
