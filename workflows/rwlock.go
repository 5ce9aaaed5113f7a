package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// rwLock orders one session's operations (docs/API.md "Updates": mutating
// updates run one at a time, read-only ones together when nothing mutating
// runs or waits). A waiting writer blocks new readers, so a stream of reads
// cannot starve a write. It is workflow state: deterministic, no goroutines.
type rwLock struct {
	writers        int
	writersWaiting int
	readers        int
}

// acquireUnless blocks until the lock is held (exclusively when exclusive,
// shared otherwise) and returns true, or gives up, returning false without
// the lock, as soon as abort (nil: never) holds while it waits. It fails
// only when the workflow context is cancelled.
func (l *rwLock) acquireUnless(ctx workflow.Context, exclusive bool, abort func() bool) (bool, error) {
	ok, _, err := l.acquireWithin(ctx, exclusive, abort, 0)
	return ok, err
}

// acquireWithin is acquireUnless that also gives up once it waited
// timeout (0: never), returning timedOut. A lock free at once costs no
// command; a wait with a timeout is one timer (started, then fired or
// cancelled).
func (l *rwLock) acquireWithin(ctx workflow.Context, exclusive bool, abort func() bool, timeout time.Duration) (ok, timedOut bool, err error) {
	aborted := func() bool { return abort != nil && abort() }
	free := func() bool { return l.writers == 0 && l.writersWaiting == 0 }
	if exclusive {
		free = func() bool { return l.writers == 0 && l.readers == 0 }
		l.writersWaiting++
	}
	met, err := awaitWithin(ctx, timeout, func() bool { return free() || aborted() })
	if exclusive {
		l.writersWaiting--
	}
	if err != nil {
		return false, false, err
	}
	if !met {
		return false, true, nil
	}
	if !free() || aborted() {
		return false, false, nil
	}
	if exclusive {
		l.writers++
	} else {
		l.readers++
	}
	return true, false, nil
}

// awaitWithin is workflow.Await, bounded by timeout when it is positive and
// cond does not hold yet (met false: timed out).
func awaitWithin(ctx workflow.Context, timeout time.Duration, cond func() bool) (met bool, err error) {
	if timeout <= 0 {
		return true, workflow.Await(ctx, cond)
	}
	if cond() {
		return true, nil
	}
	return workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: timeout,
		TimerOptions: workflow.TimerOptions{Summary: "waiting for the workspace's lock"}}, cond)
}

// release gives back what acquire took.
func (l *rwLock) release(exclusive bool) {
	if exclusive {
		l.writers--
	} else {
		l.readers--
	}
}
