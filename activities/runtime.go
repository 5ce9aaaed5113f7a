package activities

import (
	"context"
	"errors"
	"maps"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// AgentGitIdentity is the author and committer identity given to commands in a
// runtime, so `git commit` inside a workspace works (the worker's own git
// configuration is never visible there).
var AgentGitIdentity = map[string]string{
	"GIT_AUTHOR_NAME":     "sandboxcore agent",
	"GIT_AUTHOR_EMAIL":    "agent@sandboxcore.invalid",
	"GIT_COMMITTER_NAME":  "sandboxcore agent",
	"GIT_COMMITTER_EMAIL": "agent@sandboxcore.invalid",
}

// runtimeSpecFor builds the runtime spec of a workspace: its worktree is
// mounted at /workspace, writable iff the workspace is, and its repo cache's
// bare repository (<repo>/.bare beside <repo>/worktrees/<name>, DESIGN.md
// "The three things") read-only at its own host path, because the worktree's
// ".git" file points into it: git works inside an isolated runtime while the
// cache stays unchangeable from there. The environment holds
// nothing from the worker, only AgentGitIdentity (fork manifest "Security Rules").
// createRuntime adds the dependency cache.
func (a *Activities) runtimeSpecFor(ws sandboxapi.Workspace) sandbox.RuntimeSpec {
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

// createRuntime creates (or finds) the runtime of ws from runtimeSpecFor,
// in the repository's image where the worker allows it (runtimeImage),
// with the repository environment's variables under the worker's
// (docs/RUNTIMES.md "Repository environment"), the workspace's dependency cache mounted read-write at its own host
// path and the package managers' variables pointing into it
// (depcache.Env), when the host keeps caches and the provider mounts host
// directories. Errors: the cache's (sandboxapi.ErrInsufficientDisk,
// sandboxapi.ErrRuntimeUnavailable) and the provider's Create's.
func (a *Activities) createRuntime(ctx context.Context, ws sandboxapi.Workspace) (sandbox.Runtime, error) {
	spec := a.runtimeSpecFor(ws)
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
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: dir, Target: dir, Writable: true, Shared: a.DepCaches.Shared()})
		maps.Copy(spec.Env, depcache.Env(dir))
	}
	return a.Runtimes.Create(ctx, spec)
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

// Hibernate stops the workspace's runtime (the workspace is untouched). A
// runtime that does not exist is already stopped; one this worker does not
// know but the store records as running (left by a worker that restarted)
// is taken over first and then stopped.
func (a *Activities) Hibernate(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.HibernateResult{}, err
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
		return sandboxapi.HibernateResult{}, err
	}
	if err := rt.Stop(ctx); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	a.recordRuntime(ctx, ws, id, sandbox.RuntimeStopped)
	return sandboxapi.HibernateResult{RuntimeID: id, Stopped: true}, nil
}

// DestroyRuntime removes the workspace's runtime and its row; never the
// workspace. A missing runtime is success.
func (a *Activities) DestroyRuntime(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	id := sandboxapi.RuntimeIDFor(in.WorkspaceID)
	if err := a.Runtimes.Destroy(ctx, id); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	if err := a.Store.DeleteRuntime(ctx, id); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	return sandboxapi.HibernateResult{RuntimeID: id, Stopped: true}, nil
}
