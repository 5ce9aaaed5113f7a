package activities

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
)

// MergeBranches merges local branches into the workspace's branch (the
// merge_branches update) through the workspace provider's
// sandbox.BranchMerger, heartbeating meanwhile, and records the workspace
// clean. Errors: ErrCommandRejected (read-only workspace, or a provider that
// cannot merge), ErrWorkspaceDirty, ErrInvalidArgument, ErrRepoLocked,
// ErrWorkspaceUnavailable (see sandbox.BranchMerger).
func (a *Activities) MergeBranches(ctx context.Context, in wire.MergeActivityInput) (sandbox.MergeResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandbox.MergeResult{}, ToApplicationError(err)
	}
	merger, ok := a.Workspaces.(sandbox.BranchMerger)
	if !ok {
		return sandbox.MergeResult{}, ToApplicationError(sandbox.Errorf(sandbox.ErrCommandRejected, "this host's workspace provider cannot merge branches"))
	}
	if !ws.Capabilities.Writable {
		return sandbox.MergeResult{}, ToApplicationError(sandbox.Errorf(sandbox.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode))
	}
	res, err := whileHeartbeating(ctx, func() (sandbox.MergeResult, error) { return merger.Merge(ctx, ws, in.Request) })
	if err != nil {
		return sandbox.MergeResult{}, ToApplicationError(err)
	}
	a.setDirty(ctx, ws, false)
	a.touch(ctx, ws.ID, true)
	return res, nil
}
