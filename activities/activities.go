// Package activities holds the thin activity shims of sandboxcore: each
// validates its input, loads the workspace row, calls the ports, translates
// errors into Temporal application errors with the stable sandbox error types,
// and heartbeats while it waits. Every activity is idempotent: names derive
// from ids, create-conflict means reuse, delete-not-found means success.
package activities

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Store is the metadata store the activities need (docs/DESIGN.md "Ports",
// "Storage model"): the rows of sandbox.Store, and the host registry's
// listing, from which EvictionHosts plans for every registered host.
// *sqlite.Store, *postgres.Store and *store.Remembering implement it.
type Store interface {
	sandbox.Store
	// ListHosts returns every registered worker host ordered by host id, as
	// a non-nil slice (store.HostRegistry). Errors: the store's.
	ListHosts(ctx context.Context) ([]store.Host, error)
}

var _ Store = (*store.Remembering)(nil)

// Activities are registered once per worker; every field is required but
// Logger and Now.
type Activities struct {
	Store       Store
	Repos       sandbox.RepoCacheProvider
	Workspaces  sandbox.WorkspaceProvider
	Runtimes    sandbox.RuntimeProvider
	Credentials sandbox.CredentialProvider
	// Remote pushes and reads remote tips (push, create_pull_request); nil
	// rejects those updates.
	Remote sandbox.RemoteGit
	// Access checks a user's read access before cached content is served on
	// acquire; nil skips the check.
	Access sandbox.AccessVerifier
	// CodeHost opens pull requests; nil rejects create_pull_request.
	CodeHost sandbox.CodeHost
	// Backups saves an evicted workspace's work and restores it when the
	// workspace is acquired again (eviction.go); nil: workspaces with
	// unsaved work are never evicted.
	Backups sandbox.WorkspaceBackupProvider
	// Outputs keeps the whole output of cut exec results (keep_output,
	// docs/API.md "Kept output"); nil: nothing is kept and read_output is
	// SandboxCommandRejected.
	Outputs *execoutput.Store
	// HostID is this worker host's id (SANDBOX_HOST_ID).
	HostID string
	// URLs is the repository URL policy (SANDBOX_ALLOW_FILE_URLS, SANDBOX_ALLOW_HTTP_URLS).
	URLs sandboxapi.URLPolicy
	// Settings are handed to every session this host serves.
	Settings wire.SessionSettings
	// RuntimeImage fills every RuntimeSpec.
	RuntimeImage string
	// RuntimeNetwork is the network policy of a workspace whose request
	// names none (SANDBOX_RUNTIME_NETWORK; "" = limited), NetworkMax the
	// widest a request may ask for (SANDBOX_NETWORK_MAX; "" = the wider of
	// limited and RuntimeNetwork), NetworkAllow the worker's allow-list of
	// the limited network (SANDBOX_NETWORK_ALLOW, canonical entries),
	// which each workspace's own entries extend (docs/SECURITY.md "Network
	// modes").
	RuntimeNetwork sandboxapi.Network
	NetworkMax     sandboxapi.Network
	NetworkAllow   []string
	// HostAddrs lists the worker host's addresses, which a workspace's own
	// allow-list entries may not cover (checkWorkspaceAllow); nil = the
	// host's interface addresses (egress.HostAddrs).
	HostAddrs func() []netip.Addr
	// RuntimeResources, when not nil, are the resource hints of every
	// RuntimeSpec (a copy each).
	RuntimeResources *sandbox.ResourceHints
	// DepCaches, when not nil, are this host's dependency caches
	// (SANDBOX_CACHE_SCOPE, docs/RUNTIMES.md "Dependency caches"),
	// mounted into every runtime whose provider reports HostMounts.
	DepCaches *depcache.Caches
	// NoSetup: repositories' setup commands are never run (SANDBOX_SETUP=off;
	// docs/RUNTIMES.md "Setup"): the environment lists them with a problem.
	NoSetup bool
	// RepoImages are the patterns (path.Match) of the repository-named
	// images a runtime with images runs instead of RuntimeImage
	// (SANDBOX_REPO_IMAGES; environment.go runtimeImage).
	RepoImages []string
	Logger     *slog.Logger
	Now        func() time.Time

	// SkipSubmodules leaves submodules uninitialised, reported in the
	// handle and status (SANDBOX_SUBMODULES=off; content.go).
	SkipSubmodules bool

	touchMu sync.Mutex
	touched map[string]time.Time

	// changes keeps the change summaries of overlaps (overlaps.go).
	changes changeCache
	// repoEnvs keeps the workspaces' repository environments (environment.go).
	repoEnvs repoEnvCache

	// execMu guards execs: each workspace's host-side exec lock (execlock.go).
	execMu sync.Mutex
	execs  map[string]*execState
}

// touchEvery throttles last_used_at writes per workspace.
const touchEvery = 30 * time.Second

// touchedRecently reports whether a last use written at last may stand at
// now: less than touchEvery before it. A last use after now (a clock that
// jumped back, a bad row) never stands: it is overwritten with now, or the
// row would look used in the future and escape eviction (docs/DESIGN.md
// "Eviction policy").
func touchedRecently(last, now time.Time) bool {
	d := now.Sub(last)
	return d >= 0 && d < touchEvery
}

// heartbeatEvery is how often long activities heartbeat (their HeartbeatTimeout is 15 s or more).
const heartbeatEvery = 3 * time.Second

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// Registerer is what Register needs of a worker.
type Registerer interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}

// ByName returns every session activity by its wire name (wire.Activity*):
// the activity half of the operation table (workflows/ops.go names the
// activity of each operation; a test checks that each is here).
func (a *Activities) ByName() map[string]any {
	return map[string]any{
		wire.ActivityLocate:              a.Locate,
		wire.ActivityAcquire:             a.Acquire,
		wire.ActivityExec:                a.Exec,
		wire.ActivityReadFile:            a.ReadFile,
		wire.ActivityWriteFile:           a.WriteFile,
		wire.ActivityEditFile:            a.EditFile,
		wire.ActivityListDir:             a.ListDir,
		wire.ActivitySearch:              a.Search,
		wire.ActivityStatus:              a.Status,
		wire.ActivityDiff:                a.Diff,
		wire.ActivityLog:                 a.Log,
		wire.ActivityReadOutput:          a.ReadOutput,
		wire.ActivityCommit:              a.Commit,
		wire.ActivityHibernate:           a.Hibernate,
		wire.ActivityDestroyRuntime:      a.DestroyRuntime,
		wire.ActivityMergeBranches:       a.MergeBranches,
		wire.ActivityPush:                a.Push,
		wire.ActivityCreatePullRequest:   a.CreatePullRequest,
		wire.ActivityExecStart:           a.ExecStart,
		wire.ActivityExecCancel:          a.ExecCancel,
		wire.ActivityProcessStart:        a.ProcessStart,
		wire.ActivityProcessRead:         a.ProcessRead,
		wire.ActivityProcessWrite:        a.ProcessWrite,
		wire.ActivityProcessSignal:       a.ProcessSignal,
		wire.ActivityProcessResize:       a.ProcessResize,
		wire.ActivityProcessList:         a.ProcessList,
		wire.ActivityCheckpoint:          a.Checkpoint,
		wire.ActivityCheckpoints:         a.Checkpoints,
		wire.ActivityRollback:            a.Rollback,
		wire.ActivityForkPrepare:         a.ForkPrepare,
		wire.ActivityDestroy:             a.Destroy,
		wire.ActivityRestoreDestroyed:    a.RestoreDestroyed,
		wire.ActivityCleanupList:         a.CleanupList,
		wire.ActivityPreviewURL:          a.PreviewURL,
		wire.ActivityOverlaps:            a.Overlaps,
		wire.ActivityRestorePreparedTree: a.RestorePreparedTree,
		wire.ActivitySavePreparedTree:    a.SavePreparedTree,
	}
}

// Register registers every activity of ByName on w under its wire name.
func (a *Activities) Register(w Registerer) {
	for name, fn := range a.ByName() {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// ToApplicationError maps an error onto a Temporal application error whose
// Type is the sandbox Kind's stable type string and whose detail is its
// sandboxapi.ErrorDetails (docs/API.md "Errors"); kinds that are not
// Retryable are non-retryable. Unknown errors become type "SandboxError",
// non-retryable. Context errors and application errors pass through unchanged.
func ToApplicationError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	if sandboxapi.KindOf(err) == nil {
		return sandboxapi.NewApplicationError(err, true)
	}
	return sandboxapi.NewApplicationError(err, false)
}

// whileHeartbeating runs fn, heartbeating every heartbeatEvery until it returns.
func whileHeartbeating[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	if !activity.IsActivity(ctx) {
		return fn()
	}
	defer startHeartbeats(ctx, heartbeatEvery, nil)()
	return fn()
}

// startHeartbeats records a heartbeat of the activity of ctx every interval
// (with details() as its details when details is not nil) until ctx ends or
// stop is called; stop returns once no heartbeat is being recorded.
func startHeartbeats(ctx context.Context, every time.Duration, details func() any) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if details != nil {
					activity.RecordHeartbeat(ctx, details())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}

// Locate reports whether a workspace exists and on which host; it reads only
// the store, so any worker can run it (shared task queue).
func (a *Activities) Locate(ctx context.Context, in wire.WorkspaceActivityInput) (wire.LocateResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return wire.LocateResult{}, ToApplicationError(err)
	}
	// A row this host remembers serves while the store is unreachable
	// (store.Remembering).
	ws, err := a.Store.GetWorkspace(store.AllowRemembered(ctx), in.WorkspaceID)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return wire.LocateResult{}, nil
	}
	if err != nil {
		return wire.LocateResult{}, ToApplicationError(err)
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
	return res, ToApplicationError(err)
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

// workspace loads a ready workspace that lives on this host.
func (a *Activities) workspace(ctx context.Context, id string) (sandboxapi.Workspace, error) {
	if err := sandboxapi.ValidateWorkspaceID(id); err != nil {
		return sandboxapi.Workspace{}, err
	}
	// Every operation loads its row: one this host remembers serves while
	// the store is unreachable, so operations that need nothing else from
	// the store keep working (store.Remembering).
	a.changes.mark(id, a.now())
	ws, err := a.Store.GetWorkspace(store.AllowRemembered(ctx), id)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	if ws.HostID != a.HostID {
		return sandboxapi.Workspace{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s lives on host %s, not %s", id, ws.HostID, a.HostID)
	}
	if ws.State != sandboxapi.WorkspaceReady {
		return sandboxapi.Workspace{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s is %s", id, ws.State)
	}
	a.repairMetadata(ctx, ws)
	return ws, nil
}

// MetadataRepairer is the optional capability of a WorkspaceProvider that
// detects and repairs a worktree's own git metadata — its .git file, its
// registration in the repo cache — without touching its files
// (workspace.Manager.RepairMetadata): an agent's `rm .git` or a `git
// worktree prune` never strands a workspace.
type MetadataRepairer interface {
	RepairMetadata(ctx context.Context, ws sandboxapi.Workspace) error
}

// repairMetadata repairs ws's worktree metadata before an operation runs
// (commands included: the agent's own git needs the .git file); a failure
// is logged and the operation goes on (it fails with its own error if it
// needs what could not be repaired).
func (a *Activities) repairMetadata(ctx context.Context, ws sandboxapi.Workspace) {
	r, ok := a.Workspaces.(MetadataRepairer)
	if !ok {
		return
	}
	if err := r.RepairMetadata(ctx, ws); err != nil {
		a.log().Warn("workspace metadata could not be repaired", "workspace", ws.ID, "error", err)
	}
}

// touch records use of a workspace at most every touchEvery (force: always),
// and marks it dirty when dirty is set.
func (a *Activities) touch(ctx context.Context, id string, force bool) {
	now := a.now()
	a.changes.mark(id, now)
	a.touchMu.Lock()
	if a.touched == nil {
		a.touched = map[string]time.Time{}
	}
	last := a.touched[id]
	if !force && touchedRecently(last, now) {
		a.touchMu.Unlock()
		return
	}
	a.touched[id] = now
	a.touchMu.Unlock()
	if err := a.Store.TouchWorkspace(ctx, id, now); err != nil {
		a.log().Warn("touch workspace", "workspace", id, "error", err)
	}
}

func (a *Activities) setDirty(ctx context.Context, ws sandboxapi.Workspace, dirty bool) {
	if ws.Dirty == dirty {
		return
	}
	ws.Dirty = dirty
	ws.UpdatedAt = a.now()
	if err := a.Store.UpdateWorkspace(ctx, ws); err != nil {
		a.log().Warn("record dirty state", "workspace", ws.ID, "error", err)
	}
}

// AgentGitIdentity is the author and committer identity given to commands in a
// runtime, so `git commit` inside a workspace works (the worker's own git
// configuration is never visible there).
var AgentGitIdentity = map[string]string{
	"GIT_AUTHOR_NAME":     "sandboxcore agent",
	"GIT_AUTHOR_EMAIL":    "agent@sandboxcore.invalid",
	"GIT_COMMITTER_NAME":  "sandboxcore agent",
	"GIT_COMMITTER_EMAIL": "agent@sandboxcore.invalid",
}

// RuntimeSpecFor builds the runtime spec of a workspace: its worktree is
// mounted at /workspace, writable iff the workspace is, and its repo cache's
// bare repository (<repo>/.bare beside <repo>/worktrees/<name>, DESIGN.md
// "The three things") read-only at its own host path, because the worktree's
// ".git" file points into it: git works inside an isolated runtime while the
// cache stays unchangeable from there. The environment holds
// nothing from the worker, only AgentGitIdentity (fork manifest "Security Rules").
// createRuntime adds the dependency cache.
func (a *Activities) RuntimeSpecFor(ws sandboxapi.Workspace) sandbox.RuntimeSpec {
	rid := sandboxapi.RuntimeIDFor(ws.ID)
	mounts := []sandbox.Mount{{Source: ws.LocalPath, Target: "/workspace", Writable: ws.Capabilities.Writable}}
	if bare := filepath.Join(filepath.Dir(filepath.Dir(ws.LocalPath)), ".bare"); filepath.IsAbs(bare) {
		mounts = append(mounts, sandbox.Mount{Source: bare, Target: bare, Writable: false})
	}
	var res *sandbox.ResourceHints
	if a.RuntimeResources != nil {
		r := *a.RuntimeResources
		res = &r
	}
	return sandbox.RuntimeSpec{
		Resources:    res,
		ID:           rid,
		WorkspaceID:  ws.ID,
		Image:        a.RuntimeImage,
		Workdir:      "/workspace",
		Mounts:       mounts,
		Env:          maps.Clone(AgentGitIdentity),
		Network:      a.effectiveNetwork(ws),
		NetworkAllow: a.runtimeAllow(ws),
		Labels:       map[string]string{"managed-by": "sandboxcore", "sandboxcore.workspace": ws.ID, "sandboxcore.runtime": rid},
	}
}

// createRuntime creates (or finds) the runtime of ws from RuntimeSpecFor,
// in the repository's image where the worker allows it (runtimeImage),
// with the repository environment's variables under the worker's
// (docs/RUNTIMES.md "Repository environment"), the workspace's dependency cache mounted read-write at its own host
// path and the package managers' variables pointing into it
// (depcache.Env), when the host keeps caches and the provider mounts host
// directories. Errors: the cache's (sandboxapi.ErrInsufficientDisk,
// sandboxapi.ErrRuntimeUnavailable) and the provider's Create's.
func (a *Activities) createRuntime(ctx context.Context, ws sandboxapi.Workspace) (sandbox.Runtime, error) {
	spec := a.RuntimeSpecFor(ws)
	spec.Image = a.runtimeImage(ctx, ws)
	if repo := a.repoEnvVars(ctx, ws); repo != nil {
		// The repository's variables first: the worker's own win.
		maps.Copy(repo, spec.Env)
		spec.Env = repo
	}
	if a.DepCaches != nil && a.Runtimes.Capabilities().HostMounts {
		dir, err := a.DepCaches.Prepare(ws)
		if err != nil {
			return nil, err
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: dir, Target: dir, Writable: true})
		maps.Copy(spec.Env, depcache.Env(dir))
	}
	return a.Runtimes.Create(ctx, spec)
}

// Exec runs one command in the workspace's runtime, creating or resuming the
// runtime first, with the network the request asks for (docs/SECURITY.md
// "Network modes"); with in.ProcessID it waits instead for the command
// ExecStart started as that process (process.go), re-attaching to it when
// retried. A non-zero exit or a timeout is a result; on remote runtimes the
// result also carries the replica's state. Errors: ErrInvalidArgument,
// ErrCommandRejected (a network above the workspace's policy, or another
// network on a runtime that has one for all commands),
// ErrRuntimeUnavailable, ErrWorkspaceUnavailable.
func (a *Activities) Exec(ctx context.Context, in wire.ExecActivityInput) (wire.ExecActivityResult, error) {
	res, err := a.exec(ctx, in)
	return res, ToApplicationError(err)
}

func (a *Activities) exec(ctx context.Context, in wire.ExecActivityInput) (wire.ExecActivityResult, error) {
	if in.ProcessID != "" {
		// The command ExecStart started: wait for it (process.go).
		res, err := a.execWait(ctx, in)
		return wire.ExecActivityResult{ExecResult: res}, err
	}
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return wire.ExecActivityResult{}, err
	}
	if err := a.commandNetwork("exec", ws, in.Request.Network); err != nil {
		return wire.ExecActivityResult{}, err
	}
	// One command of the workspace at a time on this host, whatever
	// session sent it, but for one sent to run beside the setup (execlock.go).
	unlock, _, err := a.lockExecUnlessBesideSetup(ctx, ws.ID, in.Request, in.Setup)
	if err != nil {
		return wire.ExecActivityResult{}, err
	}
	defer unlock()
	rt, err := a.createRuntime(ctx, ws)
	if err != nil {
		return wire.ExecActivityResult{}, err
	}
	a.recordRuntime(ctx, ws, rt.ID(), sandbox.RuntimeRunning)
	var keep *execoutput.Keeper
	var sink outputKeeper
	if in.Request.KeepOutput && a.Outputs != nil {
		if keep, err = a.Outputs.Begin(ws.ID, in.Request.OutputCap()); err != nil {
			return wire.ExecActivityResult{}, err
		}
		sink = keep
	}
	res, err := execStreaming(ctx, rt, in.Request, in.UpdateID, sink)
	if keep != nil {
		id, kerr := keep.Finish(err == nil && res.Truncated)
		if kerr != nil {
			a.log().Warn("the cut output of a command could not be kept", "workspace", ws.ID, "error", kerr)
		}
		res.OutputID = id
	}
	if err != nil {
		return wire.ExecActivityResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return wire.ExecActivityResult{ExecResult: res, RuntimeReplica: a.runtimeReplica(ws)}, nil
}

func (a *Activities) recordRuntime(ctx context.Context, ws sandboxapi.Workspace, id string, state sandbox.RuntimeState) {
	now := a.now()
	rec, err := a.Store.GetRuntime(ctx, id)
	if err != nil {
		rec = sandbox.RuntimeRecord{ID: id, WorkspaceID: ws.ID, BackendKind: a.Runtimes.Kind(), BackendRuntimeID: id, Image: a.RuntimeImage, CreatedAt: now}
	}
	if rec.State == state && touchedRecently(rec.LastUsedAt, now) {
		return
	}
	if state == sandbox.RuntimeRunning && rec.State != sandbox.RuntimeRunning {
		rec.LastStartedAt = &now
	}
	rec.State, rec.LastUsedAt, rec.UpdatedAt = state, now, now
	if err := a.Store.UpsertRuntime(ctx, rec); err != nil {
		a.log().Warn("record runtime", "runtime", id, "error", err)
	}
}

// ReadFile returns a file's bytes (at most sandboxapi.MaxFileBytes). Errors:
// ErrInvalidWorkspacePath, ErrResourceLimit.
func (a *Activities) ReadFile(ctx context.Context, in wire.FileActivityInput) (sandboxapi.ReadFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ReadFileResult{}, ToApplicationError(err)
	}
	data, err := a.Workspaces.ReadFile(ctx, ws, in.Path)
	if err != nil {
		return sandboxapi.ReadFileResult{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	_, ptr := sandbox.ParseLFSPointer(data)
	return sandboxapi.ReadFileResult{Path: in.Path, Content: data, Size: int64(len(data)), LFSPointer: ptr, ContentHash: sandboxapi.ContentHash(data)}, nil
}

// WriteFile creates or replaces a file. Errors: ErrCommandRejected (read-only
// workspace), ErrInvalidWorkspacePath, ErrResourceLimit.
func (a *Activities) WriteFile(ctx context.Context, in wire.FileActivityInput) (sandboxapi.WriteFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.WriteFileResult{}, ToApplicationError(err)
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.WriteFileResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode))
	}
	written := sandboxapi.ContentHash(in.Content)
	if in.IfMatch != "" {
		// Under the session's exclusive lock: no other operation of the
		// workspace runs between this read and the write.
		if err := sandboxapi.ValidateIfMatch(in.IfMatch); err != nil {
			return sandboxapi.WriteFileResult{}, ToApplicationError(err)
		}
		cur, err := a.Workspaces.ReadFile(ctx, ws, in.Path)
		switch {
		case err == nil && sandboxapi.ContentHash(cur) == in.IfMatch:
		case err == nil && sandboxapi.ContentHash(cur) == written:
			// A retried activity whose first attempt wrote: done already.
			a.touch(ctx, ws.ID, false)
			return sandboxapi.WriteFileResult{Path: in.Path, Bytes: int64(len(in.Content)), ContentHash: written}, nil
		case err == nil:
			return sandboxapi.WriteFileResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrConflict,
				"write_file %q: the file changed since it was read (if_match %s, now %s); read it again and reapply the change", in.Path, in.IfMatch, sandboxapi.ContentHash(cur)))
		case errors.Is(err, sandboxapi.ErrFileNotFound):
			return sandboxapi.WriteFileResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrConflict,
				"write_file %q: the file was removed since it was read (if_match %s)", in.Path, in.IfMatch))
		default:
			return sandboxapi.WriteFileResult{}, ToApplicationError(err)
		}
	}
	if err := a.Workspaces.WriteFile(ctx, ws, in.Path, in.Content, in.Mode); err != nil {
		return sandboxapi.WriteFileResult{}, ToApplicationError(err)
	}
	a.setDirty(ctx, ws, true)
	a.touch(ctx, ws.ID, false)
	return sandboxapi.WriteFileResult{Path: in.Path, Bytes: int64(len(in.Content)), ContentHash: written}, nil
}

// ListDir lists a directory without following symlinks (to a depth, and
// without hidden or ignored entries when asked: ListTree).
func (a *Activities) ListDir(ctx context.Context, in wire.FileActivityInput) (sandboxapi.ListDirResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ListDirResult{}, ToApplicationError(err)
	}
	if in.Depth > 1 || in.SkipHidden || in.SkipIgnored {
		res, err := a.Workspaces.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: in.Path, Depth: in.Depth, SkipHidden: in.SkipHidden, SkipIgnored: in.SkipIgnored})
		if err != nil {
			return sandboxapi.ListDirResult{}, ToApplicationError(err)
		}
		a.touch(ctx, ws.ID, false)
		return res, nil
	}
	entries, err := a.Workspaces.ListDir(ctx, ws, in.Path)
	if err != nil {
		return sandboxapi.ListDirResult{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return sandboxapi.ListDirResult{Path: in.Path, Entries: entries}, nil
}

// Search finds matching lines under the workspace root.
func (a *Activities) Search(ctx context.Context, in wire.OpInput[sandboxapi.SearchRequest]) (sandboxapi.SearchResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.SearchResult{}, ToApplicationError(err)
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.SearchResult, error) { return a.Workspaces.Search(ctx, ws, in.Request) })
	if err != nil {
		return sandboxapi.SearchResult{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}

// Status reports the workspace's git state and records its dirty flag.
func (a *Activities) Status(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.WorkspaceStatus, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, ToApplicationError(err)
	}
	st, err := a.Workspaces.Status(ctx, ws)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, ToApplicationError(err)
	}
	a.setDirty(ctx, ws, st.Dirty)
	a.touch(ctx, ws.ID, false)
	return st, nil
}

// Diff returns the agent's change against the recorded base commit.
func (a *Activities) Diff(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.Diff, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.Diff{}, ToApplicationError(err)
	}
	d, err := whileHeartbeating(ctx, func() (sandboxapi.Diff, error) { return a.Workspaces.Diff(ctx, ws) })
	if err != nil {
		return sandboxapi.Diff{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return d, nil
}

// Commit commits the workspace's changes onto its branch. Errors:
// ErrCommandRejected (read-only), ErrInvalidArgument, ErrRepoLocked.
func (a *Activities) Commit(ctx context.Context, in wire.OpInput[sandboxapi.CommitRequest]) (sandboxapi.CommitResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.CommitResult{}, ToApplicationError(err)
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.CommitResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode))
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.CommitResult, error) { return a.Workspaces.Commit(ctx, ws, in.Request) })
	if err != nil {
		return sandboxapi.CommitResult{}, ToApplicationError(err)
	}
	if st, err := a.Workspaces.Status(ctx, ws); err == nil {
		a.setDirty(ctx, ws, st.Dirty)
	}
	a.touch(ctx, ws.ID, true)
	return res, nil
}

// Hibernate stops the workspace's runtime (the workspace is untouched). A
// runtime that does not exist is already stopped; one this worker does not
// know but the store records as running (left by a worker that restarted)
// is taken over first and then stopped.
func (a *Activities) Hibernate(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	id := sandboxapi.RuntimeIDFor(ws.ID)
	rt, err := a.Runtimes.Get(ctx, id)
	if errors.Is(err, sandboxapi.ErrNotFound) {
		// Unknown to this worker, but recorded running: an earlier worker
		// left it (a restart), and its sandbox may still run. Create takes
		// such a runtime over (a runtime reattaches to what survived), so
		// that Stop ends it instead of leaving it to its idle exit.
		rec, gerr := a.Store.GetRuntime(ctx, id)
		if gerr != nil || (rec.State != sandbox.RuntimeRunning && rec.State != sandbox.RuntimeStarting) {
			return sandboxapi.HibernateResult{RuntimeID: id}, nil
		}
		rt, err = a.createRuntime(ctx, ws)
	}
	if err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	if err := rt.Stop(ctx); err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	a.recordRuntime(ctx, ws, id, sandbox.RuntimeStopped)
	return sandboxapi.HibernateResult{RuntimeID: id, Stopped: true}, nil
}

// DestroyRuntime removes the workspace's runtime and its row; never the
// workspace. A missing runtime is success.
func (a *Activities) DestroyRuntime(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	id := sandboxapi.RuntimeIDFor(in.WorkspaceID)
	if err := a.Runtimes.Destroy(ctx, id); err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	if err := a.Store.DeleteRuntime(ctx, id); err != nil {
		return sandboxapi.HibernateResult{}, ToApplicationError(err)
	}
	return sandboxapi.HibernateResult{RuntimeID: id, Stopped: true}, nil
}
