package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// validateMergeBranches rejects a malformed request, a read-only workspace
// and a released session before anything is written to history.
func (s *session) validateMergeBranches(req sandbox.MergeRequest) error {
	if err := req.Validate(); err != nil {
		return appError(err)
	}
	if err := s.writable(); err != nil {
		return err
	}
	return s.validateNothing()
}

// mergeBranches is the merge_branches update (issue 7): it merges local
// branches into the workspace's branch under the exclusive lock, so it never
// races the agent's own commands (sandbox.BranchMerger; the activity runs on
// the workspace's host and is retried after a crash: the merge rolls back an
// interrupted attempt and skips branches already merged).
func (s *session) mergeBranches(ctx workflow.Context, req sandbox.MergeRequest) (sandbox.MergeResult, error) {
	return writeOp[MergeActivityInput, sandbox.MergeResult](s, ctx, opGit, ActivityMergeBranches, MergeActivityInput{WorkspaceID: s.wsID, Request: req})
}
