package e2b

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/api"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Max instance length. E2B lets a sandbox run at most its team's max
// instance length (1 h Hobby, 24 h Pro) from its start — a create, or a
// resume, which starts a new instance: a timeout that would reach past
// that is silently shortened, and once it has passed a timeout is refused
// (400 "Max instance length exceeded"); at its end the sandbox is paused
// (autoPause) like any sandbox whose timeout passed
// (packages/api/internal/orchestrator/keep_alive.go:19-80 and
// packages/api/internal/sandbox/store.go:80-84 of e2b-dev/infra).
//
// So that no command is paused mid-run, the runtime knows the length
// (Options.MaxInstanceLength) and the start of the current instance (its
// own clock when it created or resumed the sandbox, else E2B's startedAt),
// never asks for a timeout past the instance's end, and runs a command only
// in an instance that has room for the command's whole timeout plus the
// collection of its result (Provider.collect), less a guard for the clocks
// (Provider.guard). A command that does not fit waits for the commands
// running in the sandbox (each fits, by the same rule) and then the sandbox
// is paused and resumed at once — a new instance, the whole length ahead —
// before it runs: what runs in the background is paused for that moment,
// as it would be at the instance's end anyway. A command whose timeout
// cannot fit even a new instance is refused (sandboxapi.ErrInvalidArgument)
// before anything runs.

// errInstanceOver: E2B said the sandbox's instance has reached its max
// length (the estimate of its start was late); a new instance is needed.
var errInstanceOver = errors.New("the sandbox's instance reached its max length")

// instanceOver tells E2B's answer to a timeout once the max instance length
// has passed: 400 "Max instance length exceeded" (keep_alive.go:31-33, 54-55).
func instanceOver(err error) bool {
	return sandboxapi.KindOf(err) == sandboxapi.ErrInvalidArgument && strings.Contains(sandboxapi.Message(err), "Max instance length exceeded")
}

// startedInstance records that this handle started an instance of the
// sandbox (a create, or a connect that resumed it) at sent, the time its
// request left: no later than E2B's own start time of it.
func (r *Runtime) startedInstance(sent time.Time) {
	r.mu.Lock()
	r.instStart = sent
	r.mu.Unlock()
}

// noteStart takes E2B's start time of the running sandbox's instance (a
// GET's startedAt) when the handle knows none or E2B's is later than the
// guard allows for (the sandbox was resumed by someone else meanwhile).
func (r *Runtime) noteStart(det *api.SandboxDetail) {
	if det == nil || det.State != api.Running || det.StartedAt.IsZero() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.instStart.IsZero() || det.StartedAt.After(r.instStart.Add(r.p.guard)) {
		r.instStart = det.StartedAt
	}
}

// instanceEnd is when the current instance must be over (its start, the
// max instance length, less the guard); zero when its start is unknown.
func (r *Runtime) instanceEnd() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.instStart.IsZero() {
		return time.Time{}
	}
	return r.instStart.Add(r.p.opts.MaxInstanceLength - r.p.guard)
}

// knowStart makes sure the handle knows the start of sbID's instance,
// asking E2B when it does not. Errors: getSandbox's.
func (r *Runtime) knowStart(ctx context.Context, sbID string) error {
	if !r.instanceEnd().IsZero() {
		return nil
	}
	det, err := r.p.getSandbox(ctx, sbID)
	if err != nil {
		return err
	}
	r.noteStart(det)
	if r.instanceEnd().IsZero() {
		// Not running (or no start given): count from now, which no start
		// of a later resume precedes.
		r.startedInstance(time.Now())
	}
	return nil
}

// fits reports whether a command needing need (its timeout and
// Provider.collect) can run in a new instance at all.
func (p *Provider) fits(need time.Duration) bool {
	return need <= p.opts.MaxInstanceLength-2*p.guard
}

// admit lets a command needing need run in the current instance: true when
// the instance has room for it (the command then counts as running until
// release); false when it has not, the caller then being the one to cycle
// the instance (cycling is set). It waits while another command cycles.
func (r *Runtime) admit(ctx context.Context, need time.Duration) (bool, error) {
	for {
		r.instMu.Lock()
		if !r.cycling {
			break
		}
		r.instMu.Unlock()
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return false, ctxErr(ctx, "wait for the sandbox's new instance")
		}
	}
	defer r.instMu.Unlock()
	if end := r.instanceEnd(); !end.IsZero() && time.Until(end) >= need {
		r.running++
		return true, nil
	}
	r.cycling = true
	return false, nil
}

// release ends the admission of a command.
func (r *Runtime) release() {
	r.instMu.Lock()
	r.running--
	r.instMu.Unlock()
}

// cycle gives the sandbox sbID a new instance (the caller set cycling, by
// admit): it waits for the commands running in it to end, then pauses it;
// the next ensure resumes it (connect), starting the new instance.
// Errors: the pause's (a sandbox E2B no longer knows is not one: ensure
// then creates it again); the caller's context ending.
func (r *Runtime) cycle(ctx context.Context, sbID string) error {
	defer func() {
		r.instMu.Lock()
		r.cycling = false
		r.instMu.Unlock()
	}()
	for {
		r.instMu.Lock()
		n := r.running
		r.instMu.Unlock()
		if n == 0 {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return ctxErr(ctx, "wait for the commands of the sandbox's instance")
		}
	}
	r.p.log.Info("e2b: the command would outlast the sandbox's instance (E2B's max instance length): pausing and resuming the sandbox first",
		"runtime", r.id, "sandbox", sbID, "max_instance_length", r.p.opts.MaxInstanceLength)
	err := r.pause(ctx, sbID)
	switch sandboxapi.KindOf(err) {
	case nil, sandboxapi.ErrNotFound:
	case sandboxapi.ErrConflict:
		// Already paused (its end came first): the resume follows all the same.
	default:
		return err
	}
	r.mu.Lock()
	r.okAt, r.instStart = time.Time{}, time.Time{}
	r.mu.Unlock()
	return nil
}

// pause pauses sbID keeping its memory (POST /sandboxes/{id}/pause).
func (r *Runtime) pause(ctx context.Context, sbID string) error {
	return r.p.retry(ctx, "pause sandbox "+sbID, func(ctx context.Context) error {
		res, err := r.p.api.PostSandboxesSandboxIDPauseWithResponse(ctx, sbID, api.SandboxPauseRequest{Memory: ptr(true)})
		return r.p.mapResp(ctx, res, err, "pause sandbox %s", sbID)
	})
}

// prepare makes the sandbox ready for a command of timeout: running, in an
// instance with room for the command (admitted, counted until release; a
// new instance when needed), its timeout covering the command. admitted is
// the command's own record of its admission (a pass run again keeps it).
// Errors: sandboxapi.ErrInvalidArgument (a timeout no instance has room
// for); those of ensure, cycle and keepAlive.
func (r *Runtime) prepare(ctx context.Context, timeout time.Duration, admitted *bool) (*envdClient, error) {
	need := timeout + r.p.collect
	if !r.p.fits(need) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
			"e2b: a command's timeout of %v does not fit E2B's max instance length of %v (E2B_MAX_INSTANCE_LENGTH): E2B would pause the sandbox mid-command; give it at most %v",
			timeout, r.p.opts.MaxInstanceLength, (r.p.opts.MaxInstanceLength - 2*r.p.guard - r.p.collect).Truncate(time.Second))
	}
	for attempt := 0; ; attempt++ {
		env, err := r.ensure(ctx)
		if err != nil {
			return nil, err
		}
		sbID := env.rec.SandboxID
		if !*admitted {
			if err := r.knowStart(ctx, sbID); err != nil {
				return nil, err
			}
			ok, err := r.admit(ctx, need)
			if err != nil {
				return nil, err
			}
			if !ok {
				if attempt >= 2 {
					r.instMu.Lock()
					r.cycling = false
					r.instMu.Unlock()
					return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: runtime %s: no instance of its sandbox had room for the command", r.id)
				}
				if err := r.cycle(ctx, sbID); err != nil {
					return nil, err
				}
				continue
			}
			*admitted = true
		}
		err = r.keepAlive(ctx, sbID, timeout+2*time.Minute)
		switch {
		case err == nil:
			return env, nil
		case attempt >= 2:
			return nil, err
		case errors.Is(err, errInstanceOver):
			// E2B counts the instance from earlier than this host knew:
			// its end has come. A new instance, then.
			r.release()
			*admitted = false
			r.mu.Lock()
			r.okAt = time.Time{}
			r.mu.Unlock()
			if err := r.pause(ctx, sbID); err != nil && sandboxapi.KindOf(err) != sandboxapi.ErrNotFound && sandboxapi.KindOf(err) != sandboxapi.ErrConflict {
				return nil, err
			}
		case sandboxapi.KindOf(err) == sandboxapi.ErrNotFound:
			// Paused under the call (a paused sandbox's timeout is 404,
			// keep_alive.go:52-53): resumed by the next ensure.
			r.mu.Lock()
			r.okAt = time.Time{}
			r.mu.Unlock()
		default:
			return nil, err
		}
	}
}

// sleepCtx waits d or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
