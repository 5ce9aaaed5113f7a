package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Status returns the workspace's git state.
func (s *Session) Status(ctx context.Context) (sandboxapi.WorkspaceStatus, error) {
	return Call(ctx, s, sandboxapi.OpStatus, sandboxapi.None{})
}

// Diff returns the agent's change against the recorded base commit.
func (s *Session) Diff(ctx context.Context) (sandboxapi.Diff, error) {
	return Call(ctx, s, sandboxapi.OpDiff, sandboxapi.None{})
}

// Commit commits the workspace's changes onto its branch.
func (s *Session) Commit(ctx context.Context, req sandboxapi.CommitRequest) (sandboxapi.CommitResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", req.Paths...); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "commit message", req.Message, req.AuthorName, req.AuthorEmail); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpCommit, req)
}

// Log lists the newest commits reachable from HEAD (limit 0 = 20, at most
// sandboxapi.MaxLogCommits). Errors: ErrInvalidArgument (limit).
func (s *Session) Log(ctx context.Context, limit int) (sandboxapi.LogResult, error) {
	return Call(ctx, s, sandboxapi.OpLog, sandboxapi.LogRequest{Limit: limit})
}

// Push pushes the workspace branch to the branch of the same name on the
// repository (update "push"); forceWithLease replaces a diverged remote
// branch only while it is still where this workspace last pushed it. The
// worker resolves the credential itself: none is ever sent from here.
// Errors: ErrCommandRejected (analysis workspace), ErrRepoAuthFailed,
// ErrConflict (diverged, or a stale lease), ErrRefNotFound.
func (s *Session) Push(ctx context.Context, forceWithLease bool) (sandboxapi.PushResult, error) {
	var out sandboxapi.PushResult
	return out, s.update(ctx, sandboxapi.UpdatePush, sandboxapi.PushRequest{ForceWithLease: forceWithLease}, &out)
}

// CreatePullRequest opens a pull request from the workspace branch (update
// "create_pull_request"); the branch must be pushed first. Errors:
// ErrCommandRejected (analysis workspace, no code host configured),
// ErrWorkspaceDirty ("push first"), ErrRepoAuthFailed, ErrNotFound,
// ErrConflict (one exists for the branch), ErrInvalidArgument,
// ErrRateLimited (the reset is too far away to wait for).
func (s *Session) CreatePullRequest(ctx context.Context, in sandboxapi.PullRequestInput) (sandboxapi.PullRequest, error) {
	var out sandboxapi.PullRequest
	return out, s.update(ctx, sandboxapi.UpdateCreatePullRequest, in, &out)
}

// MergeBranches sends merge_branches: the local branches are merged into the
// session's workspace branch in order, each conflicting branch left out with
// the workspace restored (sandboxapi.MergeRequest, sandboxapi.BranchMerger).
// Errors: ErrInvalidArgument, ErrCommandRejected (read-only workspace or
// detached HEAD), ErrWorkspaceDirty, ErrRepoLocked, ErrWorkspaceUnavailable.
func (s *Session) MergeBranches(ctx context.Context, req sandboxapi.MergeRequest) (sandboxapi.MergeResult, error) {
	var out sandboxapi.MergeResult
	return out, s.update(ctx, sandboxapi.UpdateMergeBranches, req, &out)
}

// PreviewMerge sends merge_branches with dry_run (docs/API.md "Merge
// preview"): what merging req's branches and workspaces would do, each
// conflicting source with the files that would conflict, computed outside
// the worktree; nothing changes. Errors: those of MergeBranches except
// ErrWorkspaceDirty for uncommitted changes (the preview includes them and
// says so: MergeResult.Dirty).
func (s *Session) PreviewMerge(ctx context.Context, req sandboxapi.MergeRequest) (sandboxapi.MergeResult, error) {
	req.DryRun = true
	return s.MergeBranches(ctx, req)
}
