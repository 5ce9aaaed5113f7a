package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestTransient(t *testing.T) {
	require.False(t, Transient(nil))
	require.True(t, Transient(errors.New("connection reset")))
	require.True(t, Transient(sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "502")))
	require.False(t, Transient(sandboxapi.Errorf(sandboxapi.ErrNotFound, "gone")))
	require.False(t, Transient(sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "quota")))
	require.False(t, Transient(fmt.Errorf("call: %w", context.Canceled)))
	require.False(t, Transient(sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, context.DeadlineExceeded, "slow")))
}

func testRetrier() Retrier {
	return Retrier{Kind: "test", Log: slog.Default(), CallTimeout: time.Minute,
		Ended: func(ctx context.Context, what string) error { return fmt.Errorf("ended %s: %w", what, ctx.Err()) }}
}

func TestRetrierRetriesTransientThreeTimes(t *testing.T) {
	calls := 0
	err := testRetrier().Do(context.Background(), "x", func(ctx context.Context) error {
		calls++
		_, ok := ctx.Deadline()
		require.True(t, ok, "each try has its own timeout")
		return errors.New("cut")
	})
	require.EqualError(t, err, "cut")
	require.Equal(t, 3, calls)
}

func TestRetrierTakesATransientFailuresHint(t *testing.T) {
	calls := 0
	start := time.Now()
	err := testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		if calls == 1 {
			return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "changing state"), 300*time.Millisecond)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the hint, longer than the 100 ms backoff")
}

func TestRetrierStopsOnDecisionAndSuccess(t *testing.T) {
	calls := 0
	err := testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "taken")
	})
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	require.Equal(t, 1, calls)
	calls = 0
	err = testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		if calls < 2 {
			return errors.New("cut")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
}

func TestRetrierEndedBetweenTries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := testRetrier().Do(ctx, "get", func(context.Context) error {
		calls++
		cancel()
		return errors.New("cut")
	})
	// The context ended during the first try: its error is returned as is.
	require.EqualError(t, err, "cut")
	require.Equal(t, 1, calls)
}

func TestScrub(t *testing.T) {
	require.Equal(t, "key <redacted> and <redacted>", Scrub("key sk-12345 and sk-12345", "sk-12345"))
	require.Equal(t, "abc", Scrub("abc", "ab"))
	require.Equal(t, "abc", Scrub("abc", ""))
}

func TestRetrierWaitsOutARateLimit(t *testing.T) {
	// The delay the backend names is waited, then the call is tried again.
	calls := 0
	start := time.Now()
	err := testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		if calls == 1 {
			return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "slow down"), 300*time.Millisecond)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	// Still limited after every try: the last refusal, with its delay.
	calls = 0
	err = testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "slow down"), time.Millisecond)
	})
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	require.Equal(t, retryTries, calls)
	d, ok := sandbox.RetryAfter(err)
	require.True(t, ok)
	require.Equal(t, time.Millisecond, d)
}

func TestRetrierLeavesLongRateLimitsToTheCaller(t *testing.T) {
	// Beyond MaxRateLimitWait: returned at once, the delay kept for the caller.
	calls := 0
	start := time.Now()
	err := testRetrier().Do(context.Background(), "x", func(context.Context) error {
		calls++
		return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "slow down"), MaxRateLimitWait+time.Second)
	})
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	require.Equal(t, 1, calls)
	require.Less(t, time.Since(start), time.Second)
	d, _ := sandbox.RetryAfter(err)
	require.Equal(t, MaxRateLimitWait+time.Second, d)

	// A wait that would outlast the caller's deadline is not begun.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	calls = 0
	err = testRetrier().Do(ctx, "x", func(context.Context) error {
		calls++
		return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "slow down"), 5*time.Second)
	})
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	require.Equal(t, 1, calls)
}
