package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// Push pushes the workspace branch to the branch of the same name on the
// repository (update "push"); forceWithLease replaces a diverged remote
// branch only while it is still where this workspace last pushed it. The
// worker resolves the credential itself: none is ever sent from here.
// Errors: ErrCommandRejected (analysis workspace), ErrRepoAuthFailed,
// ErrConflict (diverged, or a stale lease), ErrRefNotFound.
func (s *Session) Push(ctx context.Context, forceWithLease bool) (sandbox.PushResult, error) {
	var out sandbox.PushResult
	return out, s.update(ctx, workflows.UpdatePush, sandbox.PushRequest{ForceWithLease: forceWithLease}, &out)
}

// CreatePullRequest opens a pull request from the workspace branch (update
// "create_pull_request"); the branch must be pushed first. Errors:
// ErrCommandRejected (analysis workspace, no code host configured),
// ErrWorkspaceDirty ("push first"), ErrRepoAuthFailed, ErrNotFound,
// ErrConflict (one exists for the branch), ErrInvalidArgument,
// ErrRateLimited (the reset is too far away to wait for).
func (s *Session) CreatePullRequest(ctx context.Context, in workflows.PullRequestInput) (sandbox.PullRequest, error) {
	var out sandbox.PullRequest
	return out, s.update(ctx, workflows.UpdateCreatePullRequest, in, &out)
}
