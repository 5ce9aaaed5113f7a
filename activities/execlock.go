package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The host-side lock of a workspace's commands (docs/SECURITY.md "Tenant
// isolation", "Concurrency"): the session runs one exec of its workspace
// at a time, and this holds it on the host even if a second session of
// the workspace existed (a run under another workflow id, which the
// session workflow refuses; a bug): an exec starts only once no other exec
// of the workspace runs on this host. It is in-process: one worker process
// per host serves the host's queue (docs/PRODUCTION.md "Scaling out").

// execLockMargin is how long before its deadline an exec start stops
// waiting for another exec of its workspace and is refused.
const execLockMargin = 5 * time.Second

// execState is one workspace's: sem (capacity one) is held while an exec
// starts, or for the whole of an exec that runs as one activity; running
// is the process id of the exec ExecStart last started there.
type execState struct {
	sem     chan struct{}
	running string
	// setup is set while the exec holding sem is the workspace's setup run
	// (sandboxapi.ExecRequest.BesideSetup).
	setup bool
}

// execOf returns the workspace's execState, made on first use.
func (a *Activities) execOf(wsID string) *execState {
	a.execMu.Lock()
	defer a.execMu.Unlock()
	if a.execs == nil {
		a.execs = map[string]*execState{}
	}
	e := a.execs[wsID]
	if e == nil {
		e = &execState{sem: make(chan struct{}, 1)}
		a.execs[wsID] = e
	}
	return e
}

// lockExec takes the workspace's exec lock, waiting (heartbeating) until
// it is free or ctx ends; unlock is idempotent. Errors: ErrConflict when
// ctx would end first (another exec of the workspace still runs), ctx's.
func (a *Activities) lockExec(ctx context.Context, wsID string) (unlock func(), _ error) {
	e := a.execOf(wsID)
	select {
	case e.sem <- struct{}{}:
	default:
		defer heartbeating(ctx)()
		wctx, cancel := beforeDeadline(ctx)
		defer cancel()
		select {
		case e.sem <- struct{}{}:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, busyError()
		}
	}
	return e.unlocker(), nil
}

// unlocker returns the idempotent release of sem, which the caller holds.
func (e *execState) unlocker() func() {
	var once bool
	return func() {
		if !once {
			once = true
			<-e.sem
		}
	}
}

// heartbeating heartbeats the activity of ctx until the returned stop is
// called (nothing outside an activity).
func heartbeating(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	return startHeartbeats(ctx, heartbeatEvery, nil)
}

// lockExecUnlessBesideSetup is lockExec, except for a command sent to run
// beside the workspace's setup (req.BesideSetup) while the setup run holds
// the lock (docs/RUNTIMES.md "Setup"): it runs at once, next to it, without
// the lock, on a runtime on this host (HostMounts; a replica's runtime syncs
// per command and runs one at a time); beside says so. A beside request
// when the setup does not hold the lock takes it, but never waits for it:
// ErrConflict when another command holds it. setup marks the caller as the
// setup run itself (wire.ExecActivityInput.Setup).
func (a *Activities) lockExecUnlessBesideSetup(ctx context.Context, wsID string, req sandboxapi.ExecRequest, setup bool) (unlock func(), beside bool, _ error) {
	e := a.execOf(wsID)
	if req.BesideSetup && !setup {
		a.execMu.Lock()
		holds := e.setup
		a.execMu.Unlock()
		if holds && a.Runtimes.Capabilities().HostMounts {
			return func() {}, true, nil
		}
		select {
		case e.sem <- struct{}{}:
		default:
			return nil, false, busyError()
		}
		return e.unlocker(), false, nil
	}
	release, err := a.lockExec(ctx, wsID)
	if err != nil || !setup {
		return release, false, err
	}
	a.execMu.Lock()
	e.setup = true
	a.execMu.Unlock()
	return func() {
		a.execMu.Lock()
		e.setup = false
		a.execMu.Unlock()
		release()
	}, false, nil
}

// busyError is the refusal of an exec that another exec of its workspace
// kept from starting until its deadline.
func busyError() error {
	return sandboxapi.Errorf(sandboxapi.ErrConflict, "another command of this workspace is still running: its commands run one at a time")
}

// beforeDeadline is ctx ending execLockMargin before ctx's deadline.
func beforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-execLockMargin))
	}
	return context.WithCancel(ctx)
}

// awaitOtherExec waits, with the workspace's exec lock held, until the exec
// process ExecStart last started in the workspace (other than own) has
// ended, heartbeating. A process the runtime no longer knows has ended.
// Errors: ErrConflict when it still runs close to ctx's deadline, ctx's.
func (a *Activities) awaitOtherExec(ctx context.Context, pr sandbox.ProcessRuntime, wsID, own string) error {
	e := a.execOf(wsID)
	other := e.running
	if other == "" || other == own {
		return nil
	}
	defer heartbeating(ctx)()
	wctx, cancel := beforeDeadline(ctx)
	defer cancel()
	for {
		info, err := pr.WaitProcess(wctx, other, execWaitStep)
		switch {
		case errors.Is(err, sandboxapi.ErrNotFound), err == nil && info.Exited && !info.Lingering:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return busyError()
		case err != nil:
			return err
		}
	}
}

// startedExec records own as the workspace's running exec (lock held).
func (a *Activities) startedExec(wsID, own string) {
	a.execOf(wsID).running = own
}
