package workflows

import "go.temporal.io/sdk/workflow"

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
	aborted := func() bool { return abort != nil && abort() }
	if exclusive {
		l.writersWaiting++
		err := workflow.Await(ctx, func() bool { return (l.writers == 0 && l.readers == 0) || aborted() })
		l.writersWaiting--
		if err != nil {
			return false, err
		}
		if l.writers != 0 || l.readers != 0 || aborted() {
			return false, nil
		}
		l.writers++
		return true, nil
	}
	if err := workflow.Await(ctx, func() bool { return (l.writers == 0 && l.writersWaiting == 0) || aborted() }); err != nil {
		return false, err
	}
	if l.writers != 0 || l.writersWaiting != 0 || aborted() {
		return false, nil
	}
	l.readers++
	return true, nil
}

// release gives back what acquire took.
func (l *rwLock) release(exclusive bool) {
	if exclusive {
		l.writers--
	} else {
		l.readers--
	}
}
