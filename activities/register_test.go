package activities

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/sandboxcore/sandboxcore/workflows"
)

// Every activity the operation table names is registered by Register: an
// operation cannot be declared and bound without its activity existing.
func TestEveryOperationsActivityIsRegistered(t *testing.T) {
	names := Names()
	for _, op := range workflows.Operations() {
		if op.Activity == "" {
			continue
		}
		if !slices.Contains(names, op.Activity) {
			t.Errorf("operation %s names activity %s, which Register does not register", op.Name, op.Activity)
		}
	}
}

// The session activities' names are recorded in every workflow history that
// called them: Register (by method set) registers exactly these, so a
// renamed, removed or accidentally exported method fails here before a
// deploy strands a history. A new activity is added to the list.
func TestRegisteredActivityNamesAreTheRecordedOnes(t *testing.T) {
	recorded := []string{
		"sandbox.Acquire", "sandbox.Checkpoint", "sandbox.Checkpoints", "sandbox.CleanupList",
		"sandbox.Commit", "sandbox.CreatePullRequest", "sandbox.Destroy", "sandbox.DestroyRuntime",
		"sandbox.Diff", "sandbox.EditFile", "sandbox.Exec", "sandbox.ExecCancel", "sandbox.ExecStart",
		"sandbox.ForkPrepare", "sandbox.Hibernate", "sandbox.ListDir", "sandbox.Locate", "sandbox.Log",
		"sandbox.MergeBranches", "sandbox.Overlaps", "sandbox.PreviewURL", "sandbox.ProcessList",
		"sandbox.ProcessRead", "sandbox.ProcessResize", "sandbox.ProcessSignal", "sandbox.ProcessStart",
		"sandbox.ProcessWrite", "sandbox.Push", "sandbox.ReadFile", "sandbox.ReadOutput",
		"sandbox.RestoreDestroyed", "sandbox.RestorePreparedTree", "sandbox.Rollback",
		"sandbox.SavePreparedTree", "sandbox.Search", "sandbox.Status", "sandbox.WriteFile",
	}
	if got := Names(); !slices.Equal(got, recorded) {
		t.Errorf("registered activities:\n got %q\nwant %q", got, recorded)
	}
	// And the SDK takes every one of them (a method that is not an
	// activity would make Register panic).
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	Register(env, &Activities{})
}
