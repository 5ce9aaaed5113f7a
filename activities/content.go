package activities

import (
	"context"
	"errors"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Repository content a plain worktree lacks (docs/API.md "Submodules",
// "Git LFS"): the acquire activity checks the workspace's submodules out
// through the repo cache and fetches its Git LFS content, each with the
// user's credential for that repository, resolved here per call. Both are
// optional capabilities of the ports, asserted here (their consumer); both
// are best effort: what could not be had is reported (the handle's and
// status's uninitialized_submodules, lfs_pointers and lfs_pointer), never
// an acquire failure.

// SubmoduleCheckout is the optional capability of a WorkspaceProvider that
// lists a workspace's submodules and checks one out from a repo cache
// (workspace.Manager).
type SubmoduleCheckout interface {
	// Submodules lists the workspace's gitlinks and whether each is checked out.
	Submodules(ctx context.Context, ws sandboxapi.Workspace) ([]sandbox.Submodule, error)
	// CheckoutSubmodule checks sub.Commit out at sub.Path from mirror (a
	// repo cache's bare repository). Errors: ErrRefNotFound (the mirror
	// lacks the commit), ErrConflict (the directory is not empty), …
	CheckoutSubmodule(ctx context.Context, ws sandboxapi.Workspace, sub sandbox.Submodule, mirror string) error
	// UninitializedSubmodules lists the gitlinks not checked out.
	UninitializedSubmodules(ctx context.Context, ws sandboxapi.Workspace) ([]string, error)
}

// LFSFetcher is the optional capability of a WorkspaceProvider that
// replaces Git LFS pointers with their content (workspace.Manager).
type LFSFetcher interface {
	// FetchLFS fetches and checks out the workspace's LFS content with cred
	// and returns the paths still pointers.
	FetchLFS(ctx context.Context, ws sandboxapi.Workspace, repo sandboxapi.RepoIdentity, cred *sandbox.Credential) ([]string, error)
}

// CommitFetcher is the optional capability of a RepoCacheProvider that
// fetches one commit no branch or tag names (repocache.Cache): a submodule
// may record such a commit.
type CommitFetcher interface {
	FetchCommit(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, commit string) error
}

// completeContent checks out ws's submodules (unless a.SkipSubmodules) and
// fetches its LFS content, logging what could not be done, and returns
// the submodules left uninitialised: from the one listing of the index,
// less those checked out here (fetching LFS content adds or moves no
// gitlink), or listed again when the first listing failed or was skipped.
func (a *Activities) completeContent(ctx context.Context, ws sandboxapi.Workspace, repo sandboxapi.RepoIdentity, cred *sandbox.Credential) []string {
	var left []string
	listed := false
	if sc, ok := a.Workspaces.(SubmoduleCheckout); ok && !a.SkipSubmodules {
		subs, err := sc.Submodules(ctx, ws)
		if err != nil {
			a.log().Warn("list submodules", "workspace", ws.ID, "error", sandboxapi.Message(err))
		}
		listed = err == nil
		for _, s := range subs {
			if s.CheckedOut {
				continue
			}
			if err := a.checkoutSubmodule(ctx, sc, ws, repo, s); err != nil {
				a.log().Warn("submodule not checked out; reported as uninitialized", "workspace", ws.ID, "path", s.Path, "error", sandboxapi.Message(err))
				left = append(left, s.Path)
			}
		}
	}
	if lf, ok := a.Workspaces.(LFSFetcher); ok {
		if _, err := whileHeartbeating(ctx, func() ([]string, error) { return lf.FetchLFS(ctx, ws, repo, cred) }); err != nil {
			a.log().Warn("Git LFS content not fetched; pointers are reported", "workspace", ws.ID, "error", sandboxapi.Message(err))
		}
	}
	if listed {
		return left
	}
	return a.uninitializedSubmodules(ctx, ws)
}

// uninitializedSubmodules lists ws's gitlinks not checked out (nil when the
// provider cannot tell).
func (a *Activities) uninitializedSubmodules(ctx context.Context, ws sandboxapi.Workspace) []string {
	sc, ok := a.Workspaces.(SubmoduleCheckout)
	if !ok {
		return nil
	}
	paths, err := sc.UninitializedSubmodules(ctx, ws)
	if err != nil {
		a.log().Warn("list submodules", "workspace", ws.ID, "error", sandboxapi.Message(err))
		return nil
	}
	return paths
}

// checkoutSubmodule resolves s's URL against the superproject's (relative
// URLs as git does), checks it with this host's URL policy (a URL the
// worker would refuse for a workspace is refused here too), verifies the
// user's read access to that repository with the user's own credential
// for it (the repo cache is shared), ensures its repo cache (fetching it
// again, then the commit by id, when the commit is missing) and checks the
// recorded commit out.
func (a *Activities) checkoutSubmodule(ctx context.Context, sc SubmoduleCheckout, ws sandboxapi.Workspace, super sandboxapi.RepoIdentity, s sandbox.Submodule) error {
	u, err := sandbox.ResolveSubmoduleURL(super.URL, s.URL)
	if err != nil {
		return err
	}
	id, err := sandboxapi.ParseRepoURL(u, a.URLs)
	if err != nil {
		return err
	}
	scope := sandbox.AuthScope{UserID: ws.UserID, Repo: id}
	cred, err := a.Credentials.Credential(ctx, scope)
	if err != nil {
		return err
	}
	if err := a.verifyAccess(ctx, ws.UserID, id); err != nil {
		return err
	}
	ensure := func(force bool) (sandbox.RepoCache, error) {
		c, err := whileHeartbeating(ctx, func() (sandbox.RepoCache, error) { return a.Repos.Ensure(ctx, id, cred, force) })
		if err == nil {
			if uerr := a.Store.UpsertRepoCache(ctx, c); uerr != nil {
				a.log().Warn("record the submodule's repo cache", "repo", id.Key(), "error", sandboxapi.Message(uerr))
			}
		}
		return c, err
	}
	cache, err := ensure(false)
	if err != nil {
		return err
	}
	err = sc.CheckoutSubmodule(ctx, ws, s, cache.LocalPath)
	if errors.Is(err, sandboxapi.ErrRefNotFound) {
		if cache, err = ensure(true); err != nil {
			return err
		}
		err = sc.CheckoutSubmodule(ctx, ws, s, cache.LocalPath)
	}
	if cf, ok := a.Repos.(CommitFetcher); ok && errors.Is(err, sandboxapi.ErrRefNotFound) {
		if _, ferr := whileHeartbeating(ctx, func() (struct{}, error) { return struct{}{}, cf.FetchCommit(ctx, id, cred, s.Commit) }); ferr != nil {
			return ferr
		}
		err = sc.CheckoutSubmodule(ctx, ws, s, cache.LocalPath)
	}
	if err == nil {
		a.log().Info("submodule checked out", "workspace", ws.ID, "path", s.Path, "repo", id.Key(), "commit", s.Commit)
	}
	return err
}
