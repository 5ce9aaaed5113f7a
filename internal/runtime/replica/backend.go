package replica

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Calls of a remote runtime to its backend's API: the retry policy and the
// classification of failures shared by Daytona and E2B (docs/API.md
// "Errors": every backend failure is a sandbox error kind).

// Transient reports whether err is worth one more try right away: a
// failure of kind sandboxapi.ErrRuntimeUnavailable or of no kind (connection
// loss, 5xx, a cut stream), as opposed to a decision of the backend's
// (another kind) or the caller's context ending. A nil err is not.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if k := sandboxapi.KindOf(err); k != nil && k != sandboxapi.ErrRuntimeUnavailable {
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// retryTries is how many times Retrier.Do calls fn at most.
const retryTries = 3

// MaxRateLimitWait is the longest Retrier.Do waits for a backend's rate
// limit to let a call through again (its Retry-After); a longer wait is
// left to the caller (sandboxapi.ErrRateLimited is retryable: the
// activity's own retry policy sends the call again later).
const MaxRateLimitWait = 30 * time.Second

// rateLimitBackoff is the wait before the next try after a rate-limited
// try whose answer named no Retry-After (times the tries so far).
const rateLimitBackoff = time.Second

// Retrier runs one backend call with its own timeout, again while it fails
// transiently or is rate limited.
type Retrier struct {
	// Kind prefixes the debug line of a retry ("daytona", "e2b").
	Kind string
	// Log receives a debug line per retry.
	Log *slog.Logger
	// CallTimeout bounds each try.
	CallTimeout time.Duration
	// Ended is the error returned when ctx ends between tries (what names
	// the call); nil: ContextError(ctx, Kind, what).
	Ended func(ctx context.Context, what string) error
}

// Do calls fn with a context bounded by CallTimeout, up to three tries
// while ctx lasts and fn fails
//
//   - transiently (Transient): after 100 ms × attempt², or the delay the
//     failure names (sandbox.RetryAfter, at most MaxRateLimitWait) when
//     that is longer;
//   - rate limited (sandboxapi.ErrRateLimited): after the delay the backend
//     named (sandbox.RetryAfter; without one, a second × attempt), when
//     that is at most MaxRateLimitWait and ends before ctx's deadline;
//     otherwise the rate-limited error is returned at once, its delay kept.
//
// Errors: fn's last error; Ended's when ctx ends while waiting.
func (r Retrier) Do(ctx context.Context, what string, fn func(context.Context) error) error {
	var err error
	var wait time.Duration
	for attempt := 1; attempt <= retryTries; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				if r.Ended == nil {
					return ContextError(ctx, r.Kind, what)
				}
				return r.Ended(ctx, what)
			case <-time.After(wait):
			}
		}
		cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
		err = fn(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || attempt == retryTries {
			return err
		}
		switch {
		case Transient(err):
			wait = time.Duration(100*attempt*attempt) * time.Millisecond
			if d, ok := sandbox.RetryAfter(err); ok && d > wait {
				wait = min(d, MaxRateLimitWait)
			}
		case sandboxapi.KindOf(err) == sandboxapi.ErrRateLimited:
			var ok bool
			if wait, ok = rateLimitWait(ctx, err, attempt); !ok {
				return err
			}
		default:
			return err
		}
		r.Log.Debug(r.Kind+" call failed; retrying", "call", what, "attempt", attempt, "wait", wait, "error", err)
	}
	return err
}

// rateLimitWait is the wait before trying again a call that err (of kind
// sandboxapi.ErrRateLimited) refused after attempt tries: its Retry-After,
// else rateLimitBackoff × attempt; false when that is beyond
// MaxRateLimitWait or ctx's deadline.
func rateLimitWait(ctx context.Context, err error, attempt int) (time.Duration, bool) {
	wait, ok := sandbox.RetryAfter(err)
	if !ok {
		wait = rateLimitBackoff * time.Duration(attempt)
	}
	if wait > MaxRateLimitWait {
		return 0, false
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

// ContextError is the error of a call cut short because ctx ended (call it
// only then): sandboxapi.ErrTimeout when its deadline passed, else
// sandboxapi.ErrRuntimeUnavailable; either wraps ctx.Err(), its text
// "<kind>: <what>".
func ContextError(ctx context.Context, kind, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "%s: %s", kind, what)
	}
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, ctx.Err(), "%s: %s", kind, what)
}

// Scrub replaces every occurrence of secret in s with "<redacted>" (a
// server may echo a key back in an error); a secret shorter than 4 bytes is
// not searched for (it would redact ordinary text).
func Scrub(s, secret string) string {
	if len(secret) >= 4 {
		s = strings.ReplaceAll(s, secret, "<redacted>")
	}
	return s
}
