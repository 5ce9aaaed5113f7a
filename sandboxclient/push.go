package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
