package workflows

import "go.temporal.io/sdk/workflow"

// retiredChanges are the GetVersion changes whose DefaultVersion branches
// are gone (docs/DESIGN.md "Retiring a change"): no open run predates them
// (sandbox-worker check-replay found none), and a recorded history that
// took each one's branch is kept (TestRetiredChangesKeepARecordedHistory).
var retiredChanges = []string{
	changeAcquireWait, changeIdleTimer, changeLocateLocal, changeSetup,
	changeDormant, changeDirtyAttr, changeExecProcess, changeExecRawResult,
}

// retired asks for change, whose DefaultVersion branch was retired, where
// its GetVersion was: every run still records the marker, so a worker of
// the previous release replays this one's histories (a rollback stays
// possible), while a history that passed this point without the marker —
// a run older than the change — fails its replay with a non-determinism
// error instead of running code it never ran.
func retired(ctx workflow.Context, change string) {
	workflow.GetVersion(ctx, change, 1, 1)
}
