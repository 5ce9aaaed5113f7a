package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Store outages (docs/API.md "Errors": SandboxUnavailable; README
// "Configuration"). A database that cannot be reached must neither hang an
// operation nor show its address, role or name to API clients, and must not
// be hammered while it is down:
//
//   - a call that fails for a transient reason (the connection refused,
//     reset or timed out, the server shutting down or out of connections, a
//     locked SQLite file) is retried with backoff for at most
//     Resilience.RetryFor, each attempt bounded by AttemptTimeout;
//   - a call that still fails marks the store down and returns
//     sandboxapi.ErrRuntimeUnavailable (type SandboxUnavailable, retryable)
//     whose message names the operation, the record and the kind of failure
//     (Dialect.Describe: "connection refused", "SQLSTATE 57P01", …) and
//     never the driver's text, which holds the connection's host, port,
//     role and database; the driver's text goes to the worker's log;
//   - while the store is down every call fails at once with the same error,
//     except one probe every ProbeEvery, whose success marks it up again.
//
// Misses, uniqueness violations and invalid values are answers, not
// failures: they keep their kinds (ErrNotFound, ErrConflict,
// ErrInvalidArgument) and are never retried.

// Defaults of Resilience.
const (
	DefaultRetryFor       = 2 * time.Second
	DefaultAttemptTimeout = 5 * time.Second
	DefaultProbeEvery     = time.Second
)

// Resilience bounds how an SQLStore rides out an outage of its database.
// The zero value means the defaults.
type Resilience struct {
	// RetryFor is how long transient failures of one call are retried;
	// 0 means DefaultRetryFor, negative never retries.
	RetryFor time.Duration
	// AttemptTimeout bounds each attempt of a call (the caller's ctx still
	// applies); 0 means the dialect's (Dialect.AttemptTimeout), else
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// ProbeEvery: while the store is down, calls fail at once except one
	// every ProbeEvery; 0 means DefaultProbeEvery.
	ProbeEvery time.Duration
	// Logger receives the driver's error text when the store goes down or a
	// call fails (never sent to clients); nil means slog.Default().
	Logger *slog.Logger
}

// health is an SQLStore's view of its database.
type health struct {
	mu        sync.Mutex
	down      bool
	since     time.Time
	nextProbe time.Time
}

// SetResilience replaces the outage policy (normally right after Open).
func (s *SQLStore) SetResilience(r Resilience) {
	if r.RetryFor == 0 {
		r.RetryFor = DefaultRetryFor
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = s.d.AttemptTimeout
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = DefaultAttemptTimeout
	}
	if r.ProbeEvery <= 0 {
		r.ProbeEvery = DefaultProbeEvery
	}
	s.mu.Lock()
	s.res = r
	s.mu.Unlock()
}

func (s *SQLStore) resilience() Resilience {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

func (r Resilience) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// answer reports whether err is the database's answer to a well-formed
// call (no row, a uniqueness violation, an invalid value): the caller maps
// it onto its kind.
func (s *SQLStore) answer(err error) bool {
	return s.d.IsNoRows(err) || s.d.IsUniqueViolation(err) || (s.d.IsInvalidValue != nil && s.d.IsInvalidValue(err))
}

// do runs one statement through fn under the outage policy. It returns nil,
// the database's answer (see answer) unchanged, the caller's ctx error, or
// sandboxapi.ErrRuntimeUnavailable naming op and what (never the driver's text).
func (s *SQLStore) do(ctx context.Context, op, what string, fn func(ctx context.Context) error) error {
	r := s.resilience()
	now := time.Now()
	s.h.mu.Lock()
	probe := false
	if s.h.down {
		if now.Before(s.h.nextProbe) {
			since := s.h.since
			s.h.mu.Unlock()
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "metadata store unavailable (since %s): %s %s not attempted; retry later",
				since.UTC().Format(time.RFC3339), op, what)
		}
		probe = true
		s.h.nextProbe = now.Add(r.ProbeEvery)
	}
	s.h.mu.Unlock()

	deadline := now.Add(r.RetryFor)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
		err := fn(actx)
		attemptTimedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil || s.answer(err) {
			s.up(r)
			return err
		}
		if ctx.Err() != nil {
			return sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "%s: %s %s", s.d.Name, op, what)
		}
		transient := attemptTimedOut || s.transient(err)
		if !transient {
			r.log().Error("metadata store: call failed", "store", s.d.Name, "op", op, "record", what, "error", err)
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "metadata store: %s %s failed (%s)", op, what, s.describe(err, attemptTimedOut))
		}
		if probe || r.RetryFor < 0 || time.Now().Add(backoff).After(deadline) {
			s.markDown(r, err)
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "metadata store unavailable: %s %s failed (%s) after %d attempt(s); retry later",
				op, what, s.describe(err, attemptTimedOut), attempt)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "%s: %s %s", s.d.Name, op, what)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (s *SQLStore) up(r Resilience) {
	s.h.mu.Lock()
	was, since := s.h.down, s.h.since
	s.h.down = false
	s.h.mu.Unlock()
	if was {
		r.log().Warn("metadata store: reachable again", "store", s.d.Name, "down_for", time.Since(since).Round(time.Millisecond))
	}
}

func (s *SQLStore) markDown(r Resilience, err error) {
	s.h.mu.Lock()
	was := s.h.down
	if !was {
		s.h.down, s.h.since = true, time.Now()
	}
	s.h.nextProbe = time.Now().Add(r.ProbeEvery)
	s.h.mu.Unlock()
	if !was {
		r.log().Error("metadata store: unreachable; operations that need it fail with SandboxUnavailable until it answers again",
			"store", s.d.Name, "error", err, "probe_every", r.ProbeEvery)
	}
}

// Down reports whether the last call found the database unreachable (and
// since when).
func (s *SQLStore) Down() (bool, time.Time) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.h.down, s.h.since
}

func (s *SQLStore) transient(err error) bool {
	if s.d.IsTransient != nil && s.d.IsTransient(err) {
		return true
	}
	return NetworkFailure(err) != ""
}

func (s *SQLStore) describe(err error, timedOut bool) string {
	if timedOut {
		return "no answer within the attempt timeout"
	}
	if s.d.Describe != nil {
		if d := s.d.Describe(err); d != "" {
			return d
		}
	}
	if d := NetworkFailure(err); d != "" {
		return d
	}
	return "driver error; details in the worker log"
}

// NetworkFailure names the kind of a network failure in err ("connection
// refused", "connection reset", "timed out", "host not found", "connection
// closed", "network unreachable"), or "" when err is none. The name never
// holds an address.
func NetworkFailure(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable"
	case errors.As(err, &dns):
		return "host not found"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case strings.Contains(err.Error(), "broken pipe"):
		return "connection reset"
	}
	return ""
}
