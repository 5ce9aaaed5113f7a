package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictWorkspace evicts one workspace; its SessionWorkflow calls it under
// the mutating lock, on the workspace's host. It re-checks the rules first
// (skipped: not ready, pinned, used within MinIdle, unsaved work the tier
// does not allow), destroys the runtime (never the workspace), checks that
// every entry of the worktree can be deleted, saves unsaved work (backup ref
// + patch + manifest, verified), and only then removes the worktree (the
// branch stays) and marks the row evicted. When the check or the backup
// fails the outcome is "blocked" and the workspace stays intact. If removal
// fails after the work was saved, the row is marked evicted anyway (the next
// acquire restores the saved work over whatever is left); without saved work
// the outcome is "failed". Errors are reserved for store failures.
func (e *EvictionActivities) EvictWorkspace(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	return whileHeartbeating(ctx, func() (sandboxapi.EvictResult, error) { return e.evictWorkspace(ctx, in) })
}

func (e *EvictionActivities) evictWorkspace(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	now := e.now()
	res := sandboxapi.EvictResult{RequestID: in.Request.RequestID, Action: eviction.ActionEvictWorkspace, Tier: in.Request.Tier,
		ID: in.WorkspaceID, WorkspaceID: in.WorkspaceID, At: now}
	outcome := func(o, reason string) (sandboxapi.EvictResult, error) {
		res.Outcome, res.Reason = o, reason
		e.log().Info("eviction", "workspace", in.WorkspaceID, "outcome", o, "reason", res.Reason)
		return res, nil
	}
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return res, err
	}
	ws, err := e.Store.GetWorkspace(ctx, in.WorkspaceID)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return outcome(sandboxapi.OutcomeSkipped, "no such workspace")
	}
	if err != nil {
		return res, err
	}
	if o, reason := workspaceEvictionRefusal(ws, in.Request, e.HostID, now); o != "" {
		return outcome(o, reason)
	}
	o, reason, err := e.saveAndRemove(ctx, ws, in.Request, &res)
	if err != nil {
		return res, err
	}
	return outcome(o, reason)
}

// workspaceEvictionRefusal is the outcome and reason of a workspace the
// request may not evict at now, re-checked before any work (docs/DESIGN.md
// "Eviction policy"): failed when it lives on another host; skipped when it
// is not ready, pinned, or used within the request's MinIdle. "" when it
// may go on.
func workspaceEvictionRefusal(ws sandboxapi.Workspace, req sandboxapi.EvictRequest, hostID string, now time.Time) (outcome, reason string) {
	switch {
	case ws.HostID != hostID:
		return sandboxapi.OutcomeFailed, fmt.Sprintf("workspace lives on host %s, not %s", ws.HostID, hostID)
	case ws.State != sandboxapi.WorkspaceReady:
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("workspace is %s", ws.State)
	case ws.PinnedUntil != nil && ws.PinnedUntil.After(now):
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("pinned until %s", ws.PinnedUntil.UTC().Format(time.RFC3339))
	}
	if idle := eviction.Idle(ws.LastUsedAt, now); idle < req.MinIdle {
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("used %s ago (rule needs %s)", idle.Round(time.Second), req.MinIdle)
	}
	return "", ""
}

// saveAndRemove evicts ready workspace ws (EvictWorkspace from its unsaved
// work check on) and returns the outcome and its reason, setting res's
// BackupRef, PatchPath and FreedBytes. The error is a store failure's.
func (e *EvictionActivities) saveAndRemove(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.EvictRequest, res *sandboxapi.EvictResult) (outcome, reason string, err error) {
	markEvicted := func(dirty bool) error {
		ws.State, ws.Dirty, ws.SizeBytes, ws.UpdatedAt = sandboxapi.WorkspaceEvicted, dirty, 0, e.now()
		return e.Store.UpdateWorkspace(ctx, ws)
	}
	exists, err := e.Workspaces.Exists(ctx, ws)
	if err != nil {
		return sandboxapi.OutcomeFailed, sandboxapi.Message(err), nil
	}
	if !exists {
		if err := markEvicted(false); err != nil {
			return "", "", err
		}
		return sandboxapi.OutcomeDone, "the worktree was already gone", nil
	}
	if e.Backups == nil {
		return sandboxapi.OutcomeBlocked, "this host cannot save work (no backup provider)", nil
	}
	un, err := e.Backups.UnsavedWork(ctx, ws)
	if err != nil {
		return sandboxapi.OutcomeBlocked, "cannot inspect the worktree: " + sandboxapi.Message(err), nil
	}
	if un.Any() && !req.AllowUnsaved {
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("has unsaved work (dirty=%t, unpushed commits=%d) that rule %s does not evict", un.Dirty, un.UnpushedCommits, req.Tier), nil
	}
	size, _ := e.Workspaces.SizeBytes(ctx, ws)
	// The runtime goes first: nothing may run in (or hold) the worktree while it is saved and removed.
	rid := sandboxapi.RuntimeIDFor(ws.ID)
	if err := e.Runtimes.Destroy(ctx, rid); err != nil {
		return sandboxapi.OutcomeBlocked, fmt.Sprintf("destroy runtime %s: %s", rid, sandboxapi.Message(err)), nil
	}
	if err := e.Store.DeleteRuntime(ctx, rid); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
		e.log().Warn("eviction: delete runtime row", "runtime", rid, "error", err)
	}
	if err := e.Backups.CheckRemovable(ctx, ws); err != nil {
		return sandboxapi.OutcomeBlocked, sandboxapi.Message(err), nil
	}
	saved := false
	if un.NeedsBackup() {
		man, err := e.Backups.Backup(ctx, ws)
		if err != nil {
			return sandboxapi.OutcomeBlocked, "saving the work failed, the workspace stays: " + sandboxapi.Message(err), nil
		}
		saved, res.BackupRef, res.PatchPath = true, man.Ref, man.PatchPath
	}
	if err := e.Workspaces.Remove(ctx, ws); err != nil {
		if !saved {
			return sandboxapi.OutcomeFailed, "remove worktree: " + sandboxapi.Message(err), nil
		}
		if merr := markEvicted(un.Dirty); merr != nil {
			return "", "", merr
		}
		res.FreedBytes = 0
		return sandboxapi.OutcomeDone, fmt.Sprintf("the worktree was only partly removed (%s); its work is saved and the next acquire restores it", sandboxapi.Message(err)), nil
	}
	if err := markEvicted(un.Dirty); err != nil {
		return "", "", err
	}
	if e.Outputs != nil { // kept command output goes with the worktree
		if err := e.Outputs.RemoveWorkspace(ws.ID); err != nil {
			e.log().Warn("eviction: remove kept output", "workspace", ws.ID, "error", err)
		}
	}
	res.FreedBytes = size
	if saved {
		return sandboxapi.OutcomeDone, fmt.Sprintf("work saved to %s and %s", res.BackupRef, res.PatchPath), nil
	}
	return sandboxapi.OutcomeDone, "clean", nil
}

// EvictRuntime stops (stop_runtime) or destroys (destroy_runtime) one
// workspace's runtime; its SessionWorkflow calls it under the mutating lock,
// on the workspace's host. The workspace is never touched. Re-checks: a stop
// needs the runtime unused for MinIdle; a destroy needs it not running and in
// its state for MinIdle (else skipped). A runtime the backend no longer has
// is recorded as such.
func (e *EvictionActivities) EvictRuntime(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	now := e.now()
	rid := sandboxapi.RuntimeIDFor(in.WorkspaceID)
	res := sandboxapi.EvictResult{RequestID: in.Request.RequestID, Action: in.Request.Action, Tier: in.Request.Tier, ID: rid, WorkspaceID: in.WorkspaceID, At: now}
	outcome := func(o, format string, args ...any) (sandboxapi.EvictResult, error) {
		res.Outcome, res.Reason = o, fmt.Sprintf(format, args...)
		return res, nil
	}
	rec, err := e.Store.GetRuntime(ctx, rid)
	found := err == nil
	if err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
		return res, err
	}
	switch in.Request.Action {
	case eviction.ActionStopRuntime:
		if !found {
			return outcome(sandboxapi.OutcomeSkipped, "no runtime")
		}
		if rec.State != sandbox.RuntimeRunning && rec.State != sandbox.RuntimeStarting {
			return outcome(sandboxapi.OutcomeSkipped, "runtime is %s", rec.State)
		}
		if idle := eviction.Idle(rec.LastUsedAt, now); idle < in.Request.MinIdle {
			return outcome(sandboxapi.OutcomeSkipped, "used %s ago (rule needs %s)", idle.Round(time.Second), in.Request.MinIdle)
		}
		rt, err := e.Runtimes.Get(ctx, rid)
		switch {
		case errors.Is(err, sandboxapi.ErrNotFound):
			rec.State = sandbox.RuntimeMissing
		case err != nil:
			return outcome(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
		default:
			if err := rt.Stop(ctx); err != nil {
				return outcome(sandboxapi.OutcomeFailed, "stop: %s", sandboxapi.Message(err))
			}
			rec.State = sandbox.RuntimeStopped
		}
		rec.UpdatedAt = now
		if err := e.Store.UpsertRuntime(ctx, rec); err != nil {
			return res, err
		}
		return outcome(sandboxapi.OutcomeDone, "idle since %s", rec.LastUsedAt.UTC().Format(time.RFC3339))
	case eviction.ActionDestroyRuntime:
		if found {
			if rec.State == sandbox.RuntimeRunning || rec.State == sandbox.RuntimeStarting {
				return outcome(sandboxapi.OutcomeSkipped, "runtime is running again")
			}
			if since := eviction.Idle(rec.UpdatedAt, now); since < in.Request.MinIdle {
				return outcome(sandboxapi.OutcomeSkipped, "%s for only %s (rule needs %s)", rec.State, since.Round(time.Second), in.Request.MinIdle)
			}
		}
		if err := e.Runtimes.Destroy(ctx, rid); err != nil {
			return outcome(sandboxapi.OutcomeFailed, "destroy: %s", sandboxapi.Message(err))
		}
		if err := e.Store.DeleteRuntime(ctx, rid); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
			return res, err
		}
		return outcome(sandboxapi.OutcomeDone, "destroyed")
	}
	return outcome(sandboxapi.OutcomeFailed, "unknown action %q", in.Request.Action)
}

// RemoveRepoCaches removes the planned repo caches of this host in order,
// while the usage (measured once, minus what was freed) stays above
// in.LowBytes. Each removal is decided under the repository lock
// (repocache.Cache.RemoveUnused): no registered worktree, no workspace row on
// this host referencing the cache, no commits only it holds, unused for the
// action's MinIdle; a cache failing a check is skipped. The row is then
// marked evicted. Errors are reserved for store failures.
func (e *EvictionActivities) RemoveRepoCaches(ctx context.Context, in wire.RemoveRepoCachesInput) (wire.RemoveRepoCachesResult, error) {
	return whileHeartbeating(ctx, func() (wire.RemoveRepoCachesResult, error) { return e.removeRepoCaches(ctx, in) })
}

func (e *EvictionActivities) removeRepoCaches(ctx context.Context, in wire.RemoveRepoCachesInput) (wire.RemoveRepoCachesResult, error) {
	out := wire.RemoveRepoCachesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "repo caches of host %s asked of host %s", in.HostID, e.HostID)
	}
	used, _, _, _, err := e.measure(ctx, nil)
	if err != nil {
		return out, err
	}
	remover, canRemove := e.Repos.(RepoCacheRemover)
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: eviction.ActionRemoveRepoCache, Tier: a.Tier, ID: a.ID, At: e.now()}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			out.Results = append(out.Results, r)
		}
		if in.LowBytes > 0 && used <= in.LowBytes {
			done(sandboxapi.OutcomeSkipped, "pressure relieved (%d bytes used, low water %d)", used, in.LowBytes)
			continue
		}
		if !canRemove {
			done(sandboxapi.OutcomeSkipped, "the repo cache provider cannot remove a cache safely")
			continue
		}
		row, err := e.Store.GetRepoCache(ctx, a.ID)
		if errors.Is(err, sandboxapi.ErrNotFound) {
			done(sandboxapi.OutcomeSkipped, "no such repo cache")
			continue
		}
		if err != nil {
			return out, err
		}
		repo, err := sandboxapi.ParseRepoURL(row.RepoURL, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
		if err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		var freed int64
		err = remover.RemoveUnused(ctx, repo, func(bare string) error {
			if err := e.checkRepoCacheRemovable(ctx, row, a.MinIdle, bare); err != nil {
				return err
			}
			freed = regularFileBytes(bare)
			return nil
		})
		switch {
		case errors.Is(err, sandboxapi.ErrConflict):
			done(sandboxapi.OutcomeSkipped, "%s", sandboxapi.Message(err))
			continue
		case err != nil:
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		row.State, row.SizeBytes, row.UpdatedAt = sandbox.RepoCacheEvicted, 0, e.now()
		if err := e.Store.UpsertRepoCache(ctx, row); err != nil {
			return out, err
		}
		used -= freed
		r.FreedBytes = freed
		done(sandboxapi.OutcomeDone, "removed (%d bytes)", freed)
	}
	return out, nil
}

// RemoveDependencyCaches removes the planned dependency caches of this host
// in order, while the usage (measured once, minus what was freed) stays
// above in.LowBytes; a cache given to a runtime within the action's
// MinIdle since the plan is skipped, a missing one is done. A command using
// a cache while it is removed downloads what it needs again: a cache holds
// nothing that cannot be fetched (docs/RUNTIMES.md "Dependency caches").
// Errors: ErrWorkspaceUnavailable when asked of another host.
func (e *EvictionActivities) RemoveDependencyCaches(ctx context.Context, in wire.RemoveDependencyCachesInput) (wire.RemoveDependencyCachesResult, error) {
	return whileHeartbeating(ctx, func() (wire.RemoveDependencyCachesResult, error) { return e.removeDependencyCaches(ctx, in) })
}

func (e *EvictionActivities) removeDependencyCaches(ctx context.Context, in wire.RemoveDependencyCachesInput) (wire.RemoveDependencyCachesResult, error) {
	out := wire.RemoveDependencyCachesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "dependency caches of host %s asked of host %s", in.HostID, e.HostID)
	}
	used, _, _, _, err := e.measure(ctx, nil)
	if err != nil {
		return out, err
	}
	var entries map[string]depcache.Entry
	if e.DepCaches != nil {
		list, err := e.DepCaches.List()
		if err != nil {
			return out, err
		}
		entries = map[string]depcache.Entry{}
		for _, d := range list {
			entries[d.ID()] = d
		}
	}
	now := e.now()
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: eviction.ActionRemoveDependencyCache, Tier: a.Tier, ID: a.ID, At: now}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			out.Results = append(out.Results, r)
		}
		d, found := entries[a.ID]
		switch {
		case a.Kind != eviction.ActionRemoveDependencyCache:
			done(sandboxapi.OutcomeFailed, "not a dependency cache action: %q", a.Kind)
			continue
		case e.DepCaches == nil:
			done(sandboxapi.OutcomeSkipped, "this host keeps no dependency caches")
			continue
		case in.LowBytes > 0 && used <= in.LowBytes:
			done(sandboxapi.OutcomeSkipped, "pressure relieved (%d bytes used, low water %d)", used, in.LowBytes)
			continue
		case !found:
			done(sandboxapi.OutcomeDone, "already gone")
			continue
		case eviction.Idle(d.LastUsedAt, now) < a.MinIdle:
			done(sandboxapi.OutcomeSkipped, "used %s ago (rule needs %s)", eviction.Idle(d.LastUsedAt, now).Round(time.Second), a.MinIdle)
			continue
		}
		if err := e.DepCaches.Remove(a.ID); err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		used -= d.SizeBytes
		r.FreedBytes = d.SizeBytes
		done(sandboxapi.OutcomeDone, "removed (%d bytes)", d.SizeBytes)
	}
	return out, nil
}

// RepoCachePather is the optional capability of a RepoCacheProvider that
// knows where a repository's bare mirror lives on this host (Path: the
// absolute directory, "" when it has none; repocache.Cache): planning
// measures a cache there (the row's local_path otherwise).
type RepoCachePather interface {
	Path(repo sandboxapi.RepoIdentity) string
}

// RepoCacheRemover is the optional capability of a RepoCacheProvider that
// removes a repository's mirror safely (repocache.Cache): RemoveUnused takes
// the repository's lock, refuses (ErrConflict) a mirror that still registers
// a worktree, calls check with the bare directory and removes the mirror
// only when check returns nil (check's error is returned as is); a missing
// mirror is success.
// Without it no repo cache is evicted (docs/DESIGN.md "Eviction policy").
type RepoCacheRemover interface {
	RemoveUnused(ctx context.Context, repo sandboxapi.RepoIdentity, check func(bare string) error) error
}

// checkRepoCacheRemovable decides, under the repository's lock, whether
// repo cache row (its mirror at bare) may be removed (docs/DESIGN.md
// "Eviction policy"): ErrConflict when it was used within minIdle, a
// workspace row on this host that is not removed references it, there are
// no Backups to check it for unsaved work, or it holds commits on no remote
// branch; other errors are the store's or the check's.
func (e *EvictionActivities) checkRepoCacheRemovable(ctx context.Context, row sandbox.RepoCache, minIdle time.Duration, bare string) error {
	if idle := eviction.Idle(row.LastUsedAt, e.now()); idle < minIdle {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "used %s ago", idle.Round(time.Second))
	}
	wss, err := e.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{RepoCacheID: row.ID, HostID: e.HostID})
	if err != nil {
		return err
	}
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceRemoved {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "used by workspace %s (%s)", w.ID, w.State)
		}
	}
	if e.Backups == nil {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "cannot check it for unsaved work")
	}
	local := row
	local.LocalPath = bare
	holds, err := e.Backups.RepoCacheHoldsUnsavedWork(ctx, local)
	if err != nil {
		return err
	}
	if holds {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "holds commits on no remote branch")
	}
	return nil
}

// regularFileBytes is the total size in bytes of the regular files under
// dir (symlinks not followed; unreadable entries skipped).
func regularFileBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// OrphanCollector is the optional capability of remote runtime providers
// whose runtimes outlive the worker (docs/API.md "Eviction": orphans):
// Orphans lists this host's runtimes whose workspace no longer exists
// (exists decides, per workspace id), DeleteOrphan deletes one (a missing
// one is success). Implemented by the Daytona provider.
type OrphanCollector interface {
	Orphans(ctx context.Context, exists func(ctx context.Context, workspaceID string) (bool, error)) ([]sandbox.RuntimeSummary, error)
	DeleteOrphan(ctx context.Context, runtimeID string) error
}

// workspaceExists reports whether a workspace row exists and is not
// removed (an evicted workspace exists: the next acquire restores it).
func (e *EvictionActivities) workspaceExists(ctx context.Context, id string) (bool, error) {
	if sandboxapi.ValidateWorkspaceID(id) != nil {
		return false, nil // no workspace can have that id
	}
	ws, err := e.Store.GetWorkspace(ctx, id)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ws.State != sandboxapi.WorkspaceRemoved, nil
}

// DeleteOrphanRuntimes deletes the planned orphan runtimes of this host,
// each only after checking again that its workspace does not exist (an
// acquire may have created it meanwhile: then it is skipped), and drops
// their runtime rows. Outcomes per action; errors are reserved for asking
// the wrong host.
func (e *EvictionActivities) DeleteOrphanRuntimes(ctx context.Context, in wire.DeleteOrphanRuntimesInput) (wire.DeleteOrphanRuntimesResult, error) {
	return whileHeartbeating(ctx, func() (wire.DeleteOrphanRuntimesResult, error) { return e.deleteOrphanRuntimes(ctx, in) })
}

func (e *EvictionActivities) deleteOrphanRuntimes(ctx context.Context, in wire.DeleteOrphanRuntimesInput) (wire.DeleteOrphanRuntimesResult, error) {
	out := wire.DeleteOrphanRuntimesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "orphan runtimes of host %s asked of host %s", in.HostID, e.HostID)
	}
	oc, canDelete := e.Runtimes.(OrphanCollector)
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID, At: e.now()}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			e.log().Info("eviction: orphan runtime", "runtime", a.ID, "workspace", a.WorkspaceID, "outcome", o, "reason", r.Reason)
			out.Results = append(out.Results, r)
		}
		switch {
		case a.Kind != sandboxapi.EvictionDeleteOrphanRuntime:
			done(sandboxapi.OutcomeFailed, "not an orphan runtime action (%s)", a.Kind)
			continue
		case !canDelete:
			done(sandboxapi.OutcomeSkipped, "the %s runtime provider has no orphan runtimes", e.Runtimes.Kind())
			continue
		}
		exists, err := e.workspaceExists(ctx, a.WorkspaceID)
		if err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		if exists {
			done(sandboxapi.OutcomeSkipped, "workspace %s exists again", a.WorkspaceID)
			continue
		}
		if err := oc.DeleteOrphan(ctx, a.ID); err != nil {
			done(sandboxapi.OutcomeFailed, "delete: %s", sandboxapi.Message(err))
			continue
		}
		if err := e.Store.DeleteRuntime(ctx, a.ID); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
			e.log().Warn("eviction: delete the runtime row of an orphan", "runtime", a.ID, "error", err)
		}
		done(sandboxapi.OutcomeDone, "deleted: workspace %s no longer exists", a.WorkspaceID)
	}
	return out, nil
}
