package sandbox

import (
	"context"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BranchMerger is the optional merge capability of a WorkspaceProvider
// (implemented by the local worktree manager). Merge brings req.Branches into
// ws's branch in order; it needs a writable workspace on a branch and a clean
// work tree (or req.CheckpointMessage). It is idempotent: a branch already
// contained in HEAD is reported merged without a new commit, and a merge
// interrupted by a crash is rolled back on the next call. Errors:
// ErrInvalidArgument (request), ErrCommandRejected (read-only or detached),
// ErrWorkspaceDirty (dirty without a checkpoint message, or a merge, rebase or
// cherry-pick started by someone else is in progress), ErrWorkspaceNotFound,
// ErrRepoLocked, ErrInsufficientDisk, ErrWorkspaceUnavailable. With
// req.DryRun nothing changes (docs/API.md "Merge preview"); req.Workspaces
// must already be resolved into req.Branches by the caller.
type BranchMerger interface {
	Merge(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.MergeRequest) (sandboxapi.MergeResult, error)
}
