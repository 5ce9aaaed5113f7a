package activities

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// MaxRateLimitWait is the longest code-host rate-limit reset the
// create-pull-request activity waits for: a reset within it makes the failure
// retryable with NextRetryDelay = the time left (Temporal retries right
// after the reset); a later reset fails the update with SandboxRateLimited
// at once, its message naming the reset time.
const MaxRateLimitWait = 5 * time.Minute

// verifyAccess resolves the user's credential for repo and, when an
// AccessVerifier is wired, checks that the remote lets that credential read
// the repository (before cached content is served). Errors:
// ErrRepoAuthFailed, ErrRepoCacheUnavailable, ErrTimeout.
func (a *Activities) verifyAccess(ctx context.Context, userID string, repo sandboxapi.RepoIdentity) error {
	if a.Access == nil {
		return nil
	}
	scope := sandbox.AuthScope{UserID: userID, Repo: repo}
	cred, err := a.Credentials.Credential(ctx, scope)
	if err != nil {
		return err
	}
	_, err = whileHeartbeating(ctx, func() (struct{}, error) { return struct{}{}, a.Access.VerifyAccess(ctx, scope, cred) })
	return err
}

// remoteWorkspace loads a writable workspace with a branch and its repo
// cache's bare repository for the remote operations.
func (a *Activities) remoteWorkspace(ctx context.Context, id, op string) (sandboxapi.Workspace, sandbox.RepoCache, error) {
	ws, err := a.workspace(ctx, id)
	if err != nil {
		return ws, sandbox.RepoCache{}, err
	}
	if !ws.Capabilities.Writable || ws.BranchName == "" {
		return ws, sandbox.RepoCache{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: workspace %s is a read-only %s workspace", op, ws.ID, ws.Mode)
	}
	if a.Remote == nil {
		return ws, sandbox.RepoCache{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: this worker has no remote git configured", op)
	}
	cache, err := a.Store.GetRepoCache(store.AllowRemembered(ctx), ws.RepoCacheID)
	if err != nil {
		return ws, sandbox.RepoCache{}, err
	}
	if p := cache.LocalPath; p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || filepath.Base(p) != ".bare" {
		return ws, sandbox.RepoCache{}, sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "%s: repo cache %s has no usable local path", op, cache.ID)
	}
	return ws, cache, nil
}

// Push pushes the workspace branch to the branch of the same name on the
// repository's URL (given to git explicitly; never a configured remote), with
// the user's credential per call, and records the pushed commit in the repo
// cache as sandbox.PushedRef(workspace id), which clears the workspace's
// unpushed state. ForceWithLease replaces a diverged remote branch only while
// it is still at the recorded commit (or absent when nothing was recorded).
// Errors: ErrCommandRejected (analysis workspace, remote declined, or a
// repository config that could redirect the push), ErrRepoAuthFailed,
// ErrConflict (diverged without a lease, or a stale lease), ErrRefNotFound,
// ErrRepoCacheUnavailable, ErrWorkspaceUnavailable.
func (a *Activities) Push(ctx context.Context, in wire.OpInput[sandboxapi.PushRequest]) (sandboxapi.PushResult, error) {
	ws, cache, err := a.remoteWorkspace(ctx, in.WorkspaceID, "push")
	if err != nil {
		return sandboxapi.PushResult{}, err
	}
	cred, err := a.Credentials.Credential(ctx, sandbox.AuthScope{UserID: ws.UserID, Repo: ws.Repo})
	if err != nil {
		return sandboxapi.PushResult{}, err
	}
	spec := sandbox.PushSpec{GitDir: cache.LocalPath, Repo: ws.Repo, Branch: ws.BranchName, RecordRef: sandbox.PushedRef(ws.ID)}
	if in.Request.ForceWithLease {
		last, err := a.Remote.LocalRef(ctx, cache.LocalPath, spec.RecordRef)
		if err != nil {
			return sandboxapi.PushResult{}, err
		}
		spec.Lease = &last
	}
	start := a.now()
	res, err := whileHeartbeating(ctx, func() (sandboxapi.PushResult, error) { return a.Remote.Push(ctx, spec, cred) })
	if err != nil {
		a.log().Warn("push failed", "workspace", ws.ID, "repo", ws.Repo.Key(), "branch", ws.BranchName, "error", sandboxapi.Message(err))
		return sandboxapi.PushResult{}, err
	}
	a.log().Info("pushed", "workspace", ws.ID, "repo", ws.Repo.Key(), "branch", res.Branch, "commit", res.Commit,
		"status", res.Status, "force_with_lease", in.Request.ForceWithLease, "duration", a.now().Sub(start))
	a.touch(ctx, ws.ID, true)
	return res, nil
}

// CreatePullRequest opens a pull request from the workspace branch through
// the CodeHost port, with the user's credential. It requires a writable
// workspace whose branch is pushed: the remote branch's tip (git ls-remote)
// must equal the local tip, else ErrWorkspaceDirty ("push first"). The base
// defaults to the repository's default branch (the repo cache's, else the
// code host's). A retried attempt (Temporal attempt > 1) that finds an open
// pull request with the same head and base returns it (Created false)
// instead of failing with ErrConflict: the earlier attempt opened it. Errors: ErrCommandRejected (analysis workspace, no code host for
// the repository's host), ErrWorkspaceDirty, ErrRepoAuthFailed, ErrNotFound,
// ErrConflict, ErrInvalidArgument, SandboxRateLimited (retryable with
// NextRetryDelay until the reset when it is within MaxRateLimitWait),
// ErrRuntimeUnavailable.
func (a *Activities) CreatePullRequest(ctx context.Context, in wire.OpInput[sandboxapi.PullRequestInput]) (sandboxapi.PullRequest, error) {
	pr, err := a.createPullRequest(ctx, in)
	if err != nil {
		if wait, ok := sandbox.RetryAfter(err); ok && errors.Is(err, sandboxapi.ErrRateLimited) {
			if wait <= MaxRateLimitWait {
				return sandboxapi.PullRequest{}, temporal.NewApplicationErrorWithOptions(sandboxapi.Message(err), sandboxapi.ErrRateLimited.Type,
					temporal.ApplicationErrorOptions{NextRetryDelay: max(wait, time.Second)})
			}
			return sandboxapi.PullRequest{}, temporal.NewApplicationErrorWithOptions(sandboxapi.Message(err), sandboxapi.ErrRateLimited.Type,
				temporal.ApplicationErrorOptions{NonRetryable: true})
		}
	}
	return pr, err
}

func (a *Activities) createPullRequest(ctx context.Context, in wire.OpInput[sandboxapi.PullRequestInput]) (sandboxapi.PullRequest, error) {
	ws, cache, err := a.remoteWorkspace(ctx, in.WorkspaceID, "create_pull_request")
	if err != nil {
		return sandboxapi.PullRequest{}, err
	}
	req := wire.PullRequestFor(in.Request, ws.BranchName)
	if err := req.Validate(); err != nil {
		return sandboxapi.PullRequest{}, err
	}
	if a.CodeHost == nil || !a.CodeHost.Serves(ws.Repo) {
		return sandboxapi.PullRequest{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected,
			"create_pull_request: no code host is configured for %s (SANDBOX_GITHUB_API_URL, SANDBOX_GITHUB_HOST)", ws.Repo.Host)
	}
	cred, err := a.Credentials.Credential(ctx, sandbox.AuthScope{UserID: ws.UserID, Repo: ws.Repo})
	if err != nil {
		return sandboxapi.PullRequest{}, err
	}
	local, err := a.Remote.LocalRef(ctx, cache.LocalPath, "refs/heads/"+ws.BranchName)
	if err != nil {
		return sandboxapi.PullRequest{}, err
	}
	if local == "" {
		return sandboxapi.PullRequest{}, sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "create_pull_request: branch %s does not exist", ws.BranchName)
	}
	remote, err := whileHeartbeating(ctx, func() (string, error) { return a.Remote.BranchTip(ctx, ws.Repo, cred, ws.BranchName) })
	if err != nil {
		return sandboxapi.PullRequest{}, err
	}
	if remote != local {
		state := "does not exist on the remote"
		if remote != "" {
			state = "is at " + short(remote) + " on the remote"
		}
		return sandboxapi.PullRequest{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty,
			"create_pull_request: branch %s is at %s here but %s: push first", ws.BranchName, short(local), state)
	}
	if req.Base == "" {
		req.Base = cache.DefaultBranch
	}
	if req.Base == "" {
		if req.Base, err = a.CodeHost.DefaultBranch(ctx, ws.Repo, cred); err != nil {
			return sandboxapi.PullRequest{}, err
		}
	}
	req.ReuseOpen = activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1
	pr, err := whileHeartbeating(ctx, func() (sandboxapi.PullRequest, error) { return a.CodeHost.CreatePullRequest(ctx, ws.Repo, cred, req) })
	if err != nil {
		a.log().Warn("create pull request failed", "workspace", ws.ID, "repo", ws.Repo.Key(), "head", req.Head, "base", req.Base, "error", sandboxapi.Message(err))
		return sandboxapi.PullRequest{}, err
	}
	a.log().Info("pull request", "workspace", ws.ID, "repo", ws.Repo.Key(), "number", pr.Number, "url", pr.URL,
		"head", pr.Head, "base", pr.Base, "created", pr.Created, "warnings", len(pr.Warnings))
	a.touch(ctx, ws.ID, true)
	return pr, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
