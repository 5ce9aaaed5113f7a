package workflows

// phase is where a SessionWorkflow run is in its session's lifecycle
// (docs/API.md "Session states"). The phases exclude each other; whether
// the run still takes operations is session.ending, and whether compute
// runs is session.runtimeRunning. Replacing the run's former flags
// (acquire failed, dormant, destroyed) changed no command the run emits:
// the recorded histories replay (replay_test.go).
type phase int

const (
	// phaseAcquiring: the run has no workspace yet; its first acquire may
	// begin, run or be retried.
	phaseAcquiring phase = iota
	// phaseFailed: the first acquire failed, or none began in time; the
	// run ends failed once drained, unless another acquire begins first
	// (back to phaseAcquiring).
	phaseFailed
	// phaseActive: the workspace is acquired and operations run on it.
	phaseActive
	// phaseDormant: the workspace rests (released, closed or evicted): no
	// runtime, no idle timer; the next operation resumes it first (wake).
	phaseDormant
	// phaseDestroyed: destroy removed the workspace; the run completes and
	// every operation still waiting is refused.
	phaseDestroyed
)

// String names the phase for logs and test failures.
func (p phase) String() string {
	switch p {
	case phaseAcquiring:
		return "acquiring"
	case phaseFailed:
		return "failed"
	case phaseActive:
		return "active"
	case phaseDormant:
		return "dormant"
	case phaseDestroyed:
		return "destroyed"
	}
	return "unknown"
}

// firstAcquire is what a run without a workspace knows of its first
// acquire: it decides how long the run waits for one and how it ends
// (awaitFirstAcquire, finish; changeFailedRun).
type firstAcquire struct {
	// began: an acquire (or restore, or destroy) handler started.
	began bool
	// refused: a first update accepted only to be refused by its handler
	// (changeFailedRun) was; the run ends unless an acquire began.
	refused bool
	// keyDestroyed: the run, started without a request, found its
	// workspace destroyed (a tombstone); it ends destroyed, not failed.
	keyDestroyed bool
	// failure is why the first acquire failed (or the first update was
	// refused): the run fails with it (changeFailedRun).
	failure error
}
