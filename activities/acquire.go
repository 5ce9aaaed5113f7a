package activities

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Locate reports whether a workspace exists and on which host; it reads only
// the store, so any worker can run it (shared task queue).
func (a *Activities) Locate(ctx context.Context, in wire.WorkspaceActivityInput) (wire.LocateResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return wire.LocateResult{}, err
	}
	// A row this host remembers serves while the store is unreachable
	// (store.Remembering).
	ws, err := a.Store.GetWorkspace(store.AllowRemembered(ctx), in.WorkspaceID)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return wire.LocateResult{}, nil
	}
	if err != nil {
		return wire.LocateResult{}, err
	}
	if ws.State == sandboxapi.WorkspaceRemoved {
		// A destroyed workspace's tombstone: what the destroy kept lives on its host.
		return wire.LocateResult{HostID: ws.HostID, Removed: true, HostWait: a.Settings.HostWait}, nil
	}
	return wire.LocateResult{HostID: ws.HostID, Exists: true, HostWait: a.Settings.HostWait}, nil
}

// Acquire gets or creates the workspace: validates the request, resolves the
// credential (never returned or logged), ensures the repo cache (cloned once,
// fetched outside its freshness window) and the worktree, and records both rows.
// An existing workspace whose worktree is present is returned without git work.
// Errors: ErrInvalidArgument, ErrRepoAuthFailed, ErrRepoCacheUnavailable,
// ErrRefNotFound, ErrConflict (another repository under the same key),
// ErrWorkspaceNotFound (resume of an unknown id), ErrWorkspaceUnavailable
// (the workspace lives on another host), ErrCommandRejected (a network
// policy above SANDBOX_NETWORK_MAX). A request that names a network policy
// replaces the stored one (activities/network.go).
func (a *Activities) Acquire(ctx context.Context, in wire.AcquireActivityInput) (wire.AcquireActivityResult, error) {
	res, err := a.acquire(ctx, in)
	if err == nil {
		res.Workspace.Environment = a.workspaceEnvironment(ctx, res.Workspace)
	}
	return res, err
}

func (a *Activities) acquire(ctx context.Context, in wire.AcquireActivityInput) (wire.AcquireActivityResult, error) {
	started := time.Now()
	p, err := a.resolveAcquire(ctx, in)
	if err != nil {
		return wire.AcquireActivityResult{}, err
	}
	if p.found && p.existing.State == sandboxapi.WorkspaceReady {
		res, ok, err := a.reuseReady(ctx, in, p)
		if err != nil || ok {
			return res, err
		}
		a.log().Warn("workspace directory missing; repairing", "workspace", p.existing.ID, "path", p.existing.LocalPath)
	}
	// A destroyed workspace's tombstone: the key starts fresh (docs/API.md
	// "Destroy"); restore brings back what the destroy kept.
	fresh := !p.found || p.existing.State == sandboxapi.WorkspaceRemoved
	// Keep the originally recorded base: a repaired or resumed workspace keeps its branch and base.
	if p.found && !fresh && p.req.BaseRef == "" {
		p.req.BaseRef = p.existing.BaseRef
	}
	if fresh {
		if err := a.checkBranchFree(ctx, p); err != nil {
			return wire.AcquireActivityResult{}, err
		}
	}
	cred, err := a.Credentials.Credential(ctx, sandbox.AuthScope{UserID: p.req.UserID, Repo: p.repo})
	if err != nil {
		return wire.AcquireActivityResult{}, err
	}
	// A destroyed workspace being restored starts where its destroy backup
	// did (destroyedStart), whatever the upstream holds under the base ref
	// today; its row keeps the base ref it was created with.
	asked := p.req
	if fresh && in.Restore {
		if start := a.destroyedStart(ctx, p.existing.ID); start != "" {
			p.req.BaseRef, p.req.FromBranch = start, ""
		}
	}
	ws, err := a.ensureWorktree(ctx, p, cred, started)
	p.req = asked
	if err != nil {
		return wire.AcquireActivityResult{}, err
	}
	// Submodules and Git LFS content, through the repo cache with the
	// user's credential (content.go); best effort, reported.
	uninitialized := a.completeContent(ctx, ws, p.repo, cred)
	restoredFrom, err := a.restoreEvicted(ctx, p.found, p.existing, ws)
	if err != nil {
		return wire.AcquireActivityResult{}, err
	}
	var forkedFrom, restorable string
	if fresh {
		// A fork's target gets the source's files (docs/API.md "Fork"); a
		// destroyed key's saved work comes back only when asked for.
		if forkedFrom, err = a.applyFork(ctx, &ws); err != nil {
			return wire.AcquireActivityResult{}, err
		}
		if in.Restore && forkedFrom == "" {
			if restoredFrom, err = a.restoreDestroyed(ctx, &ws); err != nil {
				return wire.AcquireActivityResult{}, err
			}
		} else {
			restorable = a.restorableRef(ctx, ws)
		}
	}
	ws = a.recordedRow(ws, p, fresh, a.now())
	if err := a.recordWorkspace(ctx, ws, p.found); err != nil {
		return wire.AcquireActivityResult{}, err
	}
	ws.UninitializedSubmodules = uninitialized
	a.log().Info("workspace ready", "workspace", ws.ID, "repo", p.repo.Key(), "mode", ws.Mode, "branch", ws.BranchName, "path", ws.LocalPath, "network", ws.Network)
	return wire.AcquireActivityResult{Workspace: ws, Settings: a.settingsFor(ws), Created: fresh, RestoredFrom: restoredFrom,
		Restorable: restorable, ForkedFrom: forkedFrom, RuntimeReplica: a.runtimeReplica(ws)}, nil
}

// acquirePlan is what resolveAcquire decided: the request (given, or the
// stored workspace's), its repository, the stored row (found) and the
// network policy the workspace gets.
type acquirePlan struct {
	req          sandboxapi.WorkspaceRequest
	repo         sandboxapi.RepoIdentity
	existing     sandboxapi.Workspace
	found        bool
	network      sandboxapi.Network
	networkAllow []string
}

// resolveAcquire validates an acquire against the stored row, changing
// nothing: the id, the request (in.Request, or the stored workspace's for a
// resume), that the request's key is the id's and its repository the
// stored one's, that the workspace lives on this host, the network policy
// (the request's, else the stored one, else the worker's default; never
// above its maximum: docs/SECURITY.md "Network modes"), and the user's read
// access (the repo cache is shared by every user of the repository).
// Errors: as Acquire's, but the git ones.
func (a *Activities) resolveAcquire(ctx context.Context, in wire.AcquireActivityInput) (acquirePlan, error) {
	var p acquirePlan
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return p, err
	}
	existing, err := a.Store.GetWorkspace(store.AllowRemembered(ctx), in.WorkspaceID)
	p.existing, p.found = existing, err == nil
	if err != nil && !errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return p, err
	}
	if in.Request != nil {
		p.req = *in.Request
		if p.repo, err = p.req.Validate(a.URLs); err != nil {
			return p, err
		}
		if id := sandboxapi.WorkspaceIDForKey(p.req.Key()); id != in.WorkspaceID {
			return p, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "the request's key belongs to workspace %s, not %s", id, in.WorkspaceID)
		}
		if p.found && existing.Repo.Key() != p.repo.Key() {
			return p, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s belongs to repository %s, not %s", in.WorkspaceID, existing.Repo.Key(), p.repo.Key())
		}
	} else {
		if !p.found {
			return p, sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s does not exist", in.WorkspaceID)
		}
		p.req = RequestFor(existing)
		if p.repo, err = p.req.Validate(a.URLs); err != nil {
			return p, err
		}
	}
	if p.found && existing.HostID != "" && existing.HostID != a.HostID && existing.State != sandboxapi.WorkspaceRemoved {
		return p, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s lives on host %s, not %s", in.WorkspaceID, existing.HostID, a.HostID)
	}
	var curNet sandboxapi.Network
	var curAllow []string
	if p.found && existing.State != sandboxapi.WorkspaceRemoved {
		curNet, curAllow = existing.Network, existing.NetworkAllow
	}
	if p.network, p.networkAllow, err = a.resolvePolicy(p.req, curNet, curAllow); err != nil {
		return p, err
	}
	return p, a.verifyAccess(ctx, p.req.UserID, p.repo)
}

// reuseReady serves an acquire of a ready workspace whose worktree is
// present without git work (ok): touched, its network policy updated when
// the request changes it, and, with in.Restore, what its destroy kept
// restored. ok is false when the worktree is missing (acquire repairs it).
func (a *Activities) reuseReady(ctx context.Context, in wire.AcquireActivityInput, p acquirePlan) (wire.AcquireActivityResult, bool, error) {
	existing := p.existing
	ok, err := a.Workspaces.Exists(ctx, existing)
	if err != nil || !ok {
		return wire.AcquireActivityResult{}, false, err
	}
	a.touch(ctx, existing.ID, true)
	if p.network != existing.Network || !slices.Equal(p.networkAllow, existing.NetworkAllow) {
		existing.Network, existing.NetworkAllow, existing.UpdatedAt = p.network, p.networkAllow, a.now()
		if err := a.Store.UpdateWorkspace(ctx, existing); err != nil {
			return wire.AcquireActivityResult{}, false, err
		}
		a.log().Info("workspace network policy set", "workspace", existing.ID, "network", p.network, "network_allow", len(p.networkAllow))
	}
	existing.UninitializedSubmodules = a.uninitializedSubmodules(ctx, existing)
	res := wire.AcquireActivityResult{Workspace: existing, Settings: a.settingsFor(existing), RuntimeReplica: a.runtimeReplica(existing)}
	if !in.Restore {
		res.Restorable = a.restorableRef(ctx, existing)
		return res, true, nil
	}
	if res.RestoredFrom, err = a.restoreDestroyed(ctx, &res.Workspace); err != nil {
		return wire.AcquireActivityResult{}, false, err
	}
	if res.RestoredFrom != "" {
		if err := a.Store.UpdateWorkspace(ctx, res.Workspace); err != nil {
			return wire.AcquireActivityResult{}, false, err
		}
	}
	return res, true, nil
}

// ensureWorktree ensures the repo cache (cloned once, fetched outside its
// freshness window) and the workspace's worktree, recording the cache's
// row. A ref the request names that the cache lacks is fetched once before
// ErrRefNotFound, unless a fetch started during this acquire (at started)
// already: the ref may be newer than the cache's last fetch.
func (a *Activities) ensureWorktree(ctx context.Context, p acquirePlan, cred *sandbox.Credential, started time.Time) (sandboxapi.Workspace, error) {
	ensureCache := func(force bool) (sandbox.RepoCache, error) {
		cache, err := whileHeartbeating(ctx, func() (sandbox.RepoCache, error) { return a.Repos.Ensure(ctx, p.repo, cred, force) })
		if err != nil {
			return cache, err
		}
		return cache, a.Store.UpsertRepoCache(ctx, cache)
	}
	cache, err := ensureCache(p.req.Refresh)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	// An existing workspace keeps the branch and directory its row records
	// (docs/API.md "Identity"); a destroyed key's tombstone starts afresh.
	var stored *sandboxapi.Workspace
	if p.found && p.existing.State != sandboxapi.WorkspaceRemoved {
		stored = &p.existing
	}
	ws, err := whileHeartbeating(ctx, func() (sandboxapi.Workspace, error) { return a.Workspaces.Ensure(ctx, cache, p.req, stored) })
	if errors.Is(err, sandboxapi.ErrRefNotFound) && cache.LastFetchedAt.Before(started) {
		// LastFetchedAt is when the fetch started.
		if cache, err = ensureCache(true); err != nil {
			return sandboxapi.Workspace{}, err
		}
		ws, err = whileHeartbeating(ctx, func() (sandboxapi.Workspace, error) { return a.Workspaces.Ensure(ctx, cache, p.req, stored) })
	}
	return ws, err
}

// HostLister is the optional capability of a store that registers the
// worker hosts (store.HostRegistry): checkBranchFree asks it for every
// host's repo cache of a repository.
type HostLister interface {
	ListHosts(ctx context.Context) ([]store.Host, error)
}

// checkBranchFree refuses a new workspace whose caller-named branch
// (branch_name) another workspace of the repository holds, on this host or
// any other host the store registers, whoever's it is and whatever its
// state but removed (an evicted workspace keeps its branch for its
// restore): checking it out would show that workspace's commits, later
// work would mix with its, and two hosts pushing the same branch would
// overwrite each other. The refusal names neither the other workspace nor
// its tenant. A derived branch needs no check: it is unique per key
// (docs/API.md "Identity"). Errors: ErrConflict, the store's.
func (a *Activities) checkBranchFree(ctx context.Context, p acquirePlan) error {
	if p.req.BranchName == "" || p.req.Mode == sandboxapi.ModeAnalysis {
		return nil
	}
	self := sandboxapi.WorkspaceIDForKey(p.req.Key())
	hosts := []string{a.HostID}
	if hl, ok := a.Store.(HostLister); ok {
		list, err := hl.ListHosts(ctx)
		if err != nil {
			return err
		}
		for _, h := range list {
			if h.HostID != a.HostID {
				hosts = append(hosts, h.HostID)
			}
		}
	}
	for _, host := range hosts {
		rows, err := a.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{RepoCacheID: sandbox.RepoCacheIDFor(host, p.repo)})
		if err != nil {
			return err
		}
		for _, w := range rows {
			if w.ID != self && w.State != sandboxapi.WorkspaceRemoved && w.BranchName == p.req.BranchName {
				return sandboxapi.Errorf(sandboxapi.ErrConflict, "branch_name %s is held by another workspace of the repository: choose another branch_name", p.req.BranchName)
			}
		}
	}
	return nil
}

// recordedRow is the row acquire records for the worktree ws (at now): this
// host, the plan's network policy, the base ref as requested ("" = the
// default branch: part of the analysis uniqueness key, docs/DESIGN.md
// "Storage model"). A workspace that is not fresh (repaired, resumed,
// restored after eviction) keeps its creation time, its pin, the first
// recorded base commit of its branch (diffs stay against it) and that
// base's fetch time; a re-used tombstone (found, fresh) is a new workspace
// of the key.
func (a *Activities) recordedRow(ws sandboxapi.Workspace, p acquirePlan, fresh bool, now time.Time) sandboxapi.Workspace {
	ws.HostID = a.HostID
	ws.Network, ws.NetworkAllow = p.network, p.networkAllow
	ws.BaseRef = p.req.BaseRef
	ws.LastUsedAt, ws.UpdatedAt = now, now
	existing := p.existing
	switch {
	case p.found && !fresh:
		ws.CreatedAt = existing.CreatedAt
		ws.PinnedUntil = existing.PinnedUntil
		if existing.BaseCommit != "" && existing.BranchName == ws.BranchName && ws.BaseCommit != existing.BaseCommit {
			ws.BaseCommit = existing.BaseCommit
		}
		if ws.BaseCommit == existing.BaseCommit && existing.BaseFetchedAt != nil {
			ws.BaseFetchedAt = existing.BaseFetchedAt
		}
	case p.found:
		ws.CreatedAt = now
	case ws.CreatedAt.IsZero():
		ws.CreatedAt = now
	}
	return ws
}

// recordWorkspace writes the row: an update when one was found, else a
// create (an update when a concurrent attempt, a retry, created it first:
// same id, same worktree).
func (a *Activities) recordWorkspace(ctx context.Context, ws sandboxapi.Workspace, found bool) error {
	if found {
		return a.Store.UpdateWorkspace(ctx, ws)
	}
	err := a.Store.CreateWorkspace(ctx, ws)
	if errors.Is(err, sandboxapi.ErrConflict) {
		err = a.Store.UpdateWorkspace(ctx, ws)
	}
	return err
}

// settingsFor returns the session settings of ws: the host's, with
// CodeHost set when this host's code host serves the repository.
func (a *Activities) settingsFor(ws sandboxapi.Workspace) wire.SessionSettings {
	s := a.Settings
	s.CodeHost = a.CodeHost != nil && a.CodeHost.Serves(ws.Repo)
	if a.Runtimes != nil {
		procs := a.Runtimes.Capabilities().Processes
		s.RuntimeProcesses = &procs
	}
	return s
}

// RequestFor rebuilds the request that created a workspace (resume by id):
// a branch other than the one the request's derivation names today (every
// branch of a workspace created before tenant segments) is its branch_name.
func RequestFor(ws sandboxapi.Workspace) sandboxapi.WorkspaceRequest {
	req := sandboxapi.WorkspaceRequest{
		UserID: ws.UserID, ProjectID: ws.ProjectID, RepoURL: ws.Repo.URL, BaseRef: ws.BaseRef,
		Mode: ws.Mode, ConversationID: ws.ConversationID, TaskID: ws.TaskID,
	}
	if ws.Mode != sandboxapi.ModeAnalysis && ws.BranchName != req.Branch() {
		req.BranchName = ws.BranchName
	}
	return req
}
