package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The lifecycle activities (docs/API.md "Checkpoints", "Fork", "Destroy",
// "Cleanup"). The session activities below run on the workspace's host,
// called by its SessionWorkflow under its lock; they use the
// sandbox.LifecycleProvider capability of Backups.

// lifecycle returns the host's LifecycleProvider. Errors: ErrCommandRejected
// when the host has none (no backup provider).
func (a *Activities) lifecycle() (sandbox.LifecycleProvider, error) {
	if lp, ok := a.Backups.(sandbox.LifecycleProvider); ok {
		return lp, nil
	}
	return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "host %s cannot record workspace states (no backup provider)", a.HostID)
}

// writableWorkspace loads a ready, writable workspace of this host. Errors:
// as workspace, ErrCommandRejected (read-only).
func (a *Activities) writableWorkspace(ctx context.Context, id string) (sandboxapi.Workspace, error) {
	ws, err := a.workspace(ctx, id)
	if err != nil {
		return ws, err
	}
	if !ws.Capabilities.Writable {
		return ws, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode)
	}
	return ws, nil
}

// Checkpoint records the workspace's exact state as a new checkpoint
// (sandbox.LifecycleProvider.Checkpoint). Errors: ErrCommandRejected
// (read-only workspace), ErrInvalidArgument, ErrResourceLimit,
// ErrWorkspaceDirty, ErrWorkspaceUnavailable.
func (a *Activities) Checkpoint(ctx context.Context, in wire.CheckpointActivityInput) (sandboxapi.Checkpoint, error) {
	ws, err := a.writableWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.Checkpoint{}, ToApplicationError(err)
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.Checkpoint{}, ToApplicationError(err)
	}
	cp, err := whileHeartbeating(ctx, func() (sandboxapi.Checkpoint, error) { return lp.Checkpoint(ctx, ws, in.Label) })
	if err != nil {
		return sandboxapi.Checkpoint{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return cp, nil
}

// Checkpoints lists the workspace's checkpoints, oldest first.
func (a *Activities) Checkpoints(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.CheckpointList, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.CheckpointList{}, ToApplicationError(err)
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.CheckpointList{}, ToApplicationError(err)
	}
	list, err := lp.Checkpoints(ctx, ws)
	if err != nil {
		return sandboxapi.CheckpointList{}, ToApplicationError(err)
	}
	if list == nil {
		list = []sandboxapi.Checkpoint{}
	}
	a.touch(ctx, ws.ID, false)
	return sandboxapi.CheckpointList{Checkpoints: list}, nil
}

// Rollback brings the workspace back to a checkpoint, checkpointing the
// state it leaves first (sandbox.LifecycleProvider.Rollback), and records
// its dirty flag. Errors: ErrCommandRejected, ErrNotFound, ErrConflict, the
// errors of Checkpoint.
func (a *Activities) Rollback(ctx context.Context, in wire.RollbackActivityInput) (sandboxapi.RollbackResult, error) {
	ws, err := a.writableWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.RollbackResult{}, ToApplicationError(err)
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.RollbackResult{}, ToApplicationError(err)
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.RollbackResult, error) { return lp.Rollback(ctx, ws, in.Checkpoint) })
	if err != nil {
		return sandboxapi.RollbackResult{}, ToApplicationError(err)
	}
	if st, err := a.Workspaces.Status(ctx, ws); err == nil {
		a.setDirty(ctx, ws, st.Dirty)
	}
	a.touch(ctx, ws.ID, true)
	return res, nil
}

// ForkPrepare is the first step of a fork, on the source's host under the
// source's lock: the target must not exist (a destroyed one whose row is a
// tombstone may be reused), then the source is checkpointed and a fork manifest left
// for the target (sandbox.LifecycleProvider.PrepareFork). Errors:
// ErrCommandRejected (read-only source), ErrConflict (the target exists),
// the errors of Checkpoint.
func (a *Activities) ForkPrepare(ctx context.Context, in wire.ForkPrepareInput) (wire.ForkPrepareResult, error) {
	res, err := a.forkPrepare(ctx, in)
	return res, ToApplicationError(err)
}

func (a *Activities) forkPrepare(ctx context.Context, in wire.ForkPrepareInput) (wire.ForkPrepareResult, error) {
	src, err := a.writableWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return wire.ForkPrepareResult{}, err
	}
	if in.Target.ID == src.ID {
		return wire.ForkPrepareResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "a workspace cannot be forked into itself")
	}
	if t, err := a.Store.GetWorkspace(ctx, in.Target.ID); err == nil && t.State != sandboxapi.WorkspaceRemoved {
		return wire.ForkPrepareResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s exists already (%s): fork to a new id", t.ID, t.Key)
	} else if err == nil && t.HostID != a.HostID {
		// A destroyed key's next workspace is made on the host keeping its saved work.
		return wire.ForkPrepareResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s was destroyed on host %s, which keeps its saved work: fork to a new id", t.ID, t.HostID)
	} else if err != nil && !errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return wire.ForkPrepareResult{}, err
	}
	lp, err := a.lifecycle()
	if err != nil {
		return wire.ForkPrepareResult{}, err
	}
	type out struct {
		cp sandboxapi.Checkpoint
		fm sandbox.ForkManifest
	}
	o, err := whileHeartbeating(ctx, func() (out, error) {
		cp, fm, err := lp.PrepareFork(ctx, src, in.Target)
		return out{cp, fm}, err
	})
	if err != nil {
		return wire.ForkPrepareResult{}, err
	}
	a.touch(ctx, src.ID, true)
	return wire.ForkPrepareResult{Checkpoint: o.cp, Manifest: o.fm}, nil
}

// Destroy destroys a workspace of this host for good (docs/API.md
// "Destroy"); its SessionWorkflow calls it under the mutating lock. Steps,
// each idempotent so a retried activity finishes the job: the runtime is
// destroyed; unless in.Discard, the worktree is checked for deletability and
// its unsaved work saved as a destroy backup (an evicted workspace's
// eviction backup is moved there) and the row becomes a tombstone (state
// removed); the worktree is removed and the workspace's branch deleted from
// the repo cache (its commits stay reachable from the backup); with
// Discard, its checkpoints, backups and fork manifest are dropped too. Finally
// the row is deleted, unless something is kept (a backup or checkpoints):
// then the tombstone stays so that a later acquire of the key finds the host
// holding it. A workspace that does not exist is {Existed: false}. Errors:
// ErrWorkspaceUnavailable (another host; a worktree that cannot be deleted,
// nothing removed), ErrConflict (an unrestored earlier destroy backup and new
// work to save), the backup's errors; store errors.
func (a *Activities) Destroy(ctx context.Context, in wire.DestroyActivityInput) (sandboxapi.DestroyResult, error) {
	res, err := whileHeartbeating(ctx, func() (sandboxapi.DestroyResult, error) { return a.destroy(ctx, in) })
	return res, ToApplicationError(err)
}

func (a *Activities) destroy(ctx context.Context, in wire.DestroyActivityInput) (sandboxapi.DestroyResult, error) {
	res := sandboxapi.DestroyResult{WorkspaceID: in.WorkspaceID, Discarded: in.Discard}
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return res, err
	}
	ws, err := a.Store.GetWorkspace(ctx, in.WorkspaceID)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		res.Message = "no such workspace: nothing to destroy"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	if ws.HostID != a.HostID {
		return res, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s lives on host %s, not %s", ws.ID, ws.HostID, a.HostID)
	}
	res.Existed, res.HostID = true, ws.HostID
	lp, err := a.lifecycle()
	if err != nil {
		return res, err
	}
	rid := sandboxapi.RuntimeIDFor(ws.ID)
	if err := a.Runtimes.Destroy(ctx, rid); err != nil {
		return res, err
	}
	if err := a.Store.DeleteRuntime(ctx, rid); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
		return res, err
	}
	var notes []string
	if !in.Discard && ws.State != sandboxapi.WorkspaceRemoved { // a tombstone was saved already
		note, err := a.saveForDestroy(ctx, lp, &ws, &res)
		if err != nil {
			return res, err
		}
		notes = append(notes, note...)
	}
	note, err := a.removeWorktreeAndBranch(ctx, lp, ws, &res)
	if err != nil {
		return res, err
	}
	notes = append(notes, note...)
	if note, err = a.keepOrDeleteRow(ctx, lp, ws, in.Discard, &res); err != nil {
		return res, err
	}
	res.Message = destroyMessage(in.Discard, append(notes, note...))
	a.log().Info("workspace destroyed", "workspace", ws.ID, "discard", in.Discard, "backup", res.BackupRef, "checkpoints_kept", res.CheckpointsKept)
	return res, nil
}

// saveForDestroy saves the unsaved work of ws before its destroy (after
// checking that a present worktree can be deleted at all), records the
// backup in res, and marks the row removed so that a retry does not save
// again (ws is updated). It returns the note of what was saved, if anything.
func (a *Activities) saveForDestroy(ctx context.Context, lp sandbox.LifecycleProvider, ws *sandboxapi.Workspace, res *sandboxapi.DestroyResult) ([]string, error) {
	if ws.State == sandboxapi.WorkspaceReady {
		if ok, err := a.Workspaces.Exists(ctx, *ws); err != nil {
			return nil, err
		} else if ok {
			if err := a.Backups.CheckRemovable(ctx, *ws); err != nil {
				return nil, err
			}
		}
	}
	man, saved, err := lp.SaveForDestroy(ctx, *ws)
	if err != nil {
		return nil, err
	}
	var notes []string
	if saved {
		res.BackupRef, res.PatchPath = man.Ref, man.PatchPath
		notes = append(notes, fmt.Sprintf("work saved to %s and %s", man.Ref, man.PatchPath))
	}
	// From here on a retry must not save again: the row says it was destroyed.
	ws.State, ws.UpdatedAt = sandboxapi.WorkspaceRemoved, a.now()
	return notes, a.Store.UpdateWorkspace(ctx, *ws)
}

// removeWorktreeAndBranch removes the worktree, the workspace's branch (a
// branch that cannot be deleted safely, ErrConflict, is kept with a note)
// and its fork manifest, recording the deleted branch in res.
func (a *Activities) removeWorktreeAndBranch(ctx context.Context, lp sandbox.LifecycleProvider, ws sandboxapi.Workspace, res *sandboxapi.DestroyResult) ([]string, error) {
	if err := a.Workspaces.Remove(ctx, ws); err != nil {
		return nil, err
	}
	if a.DepCaches != nil { // a cache of its own goes with it; a shared one stays
		if err := a.DepCaches.RemoveWorkspace(ws); err != nil {
			a.log().Warn("destroy: remove the dependency cache", "workspace", ws.ID, "error", err)
		}
	}
	var notes []string
	if err := lp.DeleteBranch(ctx, ws); err != nil {
		if !errors.Is(err, sandboxapi.ErrConflict) {
			return nil, err
		}
		notes = append(notes, "branch kept: "+sandboxapi.Message(err))
	} else if ws.BranchName != "" {
		res.BranchDeleted = ws.BranchName
	}
	return notes, lp.DropForkManifest(ctx, ws.ID)
}

// keepOrDeleteRow ends the row: with discard, the saved work and
// checkpoints are discarded and the row deleted; otherwise the checkpoints
// are counted into res (and a pending backup of an earlier destroy
// reported), and the row stays as a tombstone when anything was kept
// (docs/API.md "Destroy"), else is deleted. It returns the note of the kept
// checkpoints, if any.
func (a *Activities) keepOrDeleteRow(ctx context.Context, lp sandbox.LifecycleProvider, ws sandboxapi.Workspace, discard bool, res *sandboxapi.DestroyResult) ([]string, error) {
	if discard {
		if err := lp.Discard(ctx, ws); err != nil {
			return nil, err
		}
	} else {
		list, err := lp.Checkpoints(ctx, ws)
		if err != nil {
			return nil, err
		}
		res.CheckpointsKept = len(list)
		if res.BackupRef == "" {
			if man, ok, err := lp.PendingDestroyed(ctx, ws); err == nil && ok {
				res.BackupRef, res.PatchPath = man.Ref, man.PatchPath
			}
		}
	}
	if discard || (res.BackupRef == "" && res.CheckpointsKept == 0) {
		return nil, a.Store.DeleteWorkspace(ctx, ws.ID)
	}
	ws.State, ws.Dirty, ws.SizeBytes, ws.PinnedUntil, ws.UpdatedAt = sandboxapi.WorkspaceRemoved, false, 0, nil, a.now()
	if err := a.Store.UpdateWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	if res.CheckpointsKept > 0 {
		return []string{fmt.Sprintf("%d checkpoints kept", res.CheckpointsKept)}, nil
	}
	return nil, nil
}

// destroyMessage is DestroyResult.Message: what happened first, then the notes.
func destroyMessage(discard bool, notes []string) string {
	switch {
	case discard:
		notes = append([]string{"destroyed; unsaved work, checkpoints and backups discarded"}, notes...)
	case len(notes) == 0:
		notes = []string{"destroyed; nothing was unsaved"}
	default:
		notes = append([]string{"destroyed"}, notes...)
	}
	return strings.Join(notes, "; ")
}

// RestoreDestroyed brings a destroy backup back into the session's fresh
// workspace (sandbox.LifecycleProvider.RestoreDestroyed) and returns the
// handle; RestoredFrom is "" when no backup was pending. Errors:
// ErrCommandRejected (read-only), ErrWorkspaceDirty (not fresh),
// ErrConflict, ErrWorkspaceUnavailable.
func (a *Activities) RestoreDestroyed(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.Handle, error) {
	h, err := a.restoreDestroyedActivity(ctx, in)
	return h, ToApplicationError(err)
}

func (a *Activities) restoreDestroyedActivity(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.Handle, error) {
	ws, err := a.writableWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.Handle{}, err
	}
	from, err := a.restoreDestroyed(ctx, &ws)
	if err != nil {
		return sandboxapi.Handle{}, err
	}
	if from != "" {
		if err := a.Store.UpdateWorkspace(ctx, ws); err != nil {
			return sandboxapi.Handle{}, err
		}
	}
	h := wire.HandleFor(ws, a.Settings, false)
	h.RestoredFrom = from
	return h, nil
}

// restoreDestroyed restores ws's pending destroy backup into its worktree
// and updates *ws (base commit, dirty) for the caller to store; it returns
// the backup ref, "" when none was pending (or the host has no provider).
func (a *Activities) restoreDestroyed(ctx context.Context, ws *sandboxapi.Workspace) (string, error) {
	lp, err := a.lifecycle()
	if err != nil {
		return "", nil
	}
	type out struct {
		man sandbox.WorkspaceBackup
		ok  bool
	}
	o, err := whileHeartbeating(ctx, func() (out, error) {
		m, ok, err := lp.RestoreDestroyed(ctx, *ws)
		return out{m, ok}, err
	})
	if err != nil || !o.ok {
		return "", err
	}
	if isHexID(o.man.BaseCommit) {
		ws.BaseCommit = o.man.BaseCommit
	}
	ws.Dirty, ws.UpdatedAt = true, a.now()
	a.log().Info("destroyed workspace restored", "workspace", ws.ID, "ref", o.man.Ref, "files", o.man.Files)
	return o.man.Ref, nil
}

// destroyedStart is the commit the re-created worktree of workspace id
// starts from when its pending destroy backup is restored: the backup's
// recorded base commit (its head for a backup that recorded none). Both are
// in the repo cache, reachable from the backup ref, so restoring never
// depends on the upstream still having the base branch (docs/API.md
// "Destroy"). "" when no destroy backup is pending, a fork of the key is
// (the fork's checkpoint decides), or the host has no provider.
func (a *Activities) destroyedStart(ctx context.Context, id string) string {
	lp, err := a.lifecycle()
	if err != nil || sandboxapi.ValidateWorkspaceID(id) != nil {
		return ""
	}
	if fm, ok, err := lp.ForkManifest(ctx, id); err != nil || (ok && fm.ConsumedAt == nil) {
		return ""
	}
	man, ok, err := lp.PendingDestroyed(ctx, sandboxapi.Workspace{ID: id})
	if err != nil || !ok {
		return ""
	}
	if isHexID(man.BaseCommit) {
		return man.BaseCommit
	}
	if isHexID(man.Head) {
		return man.Head
	}
	return ""
}

// restorableRef is the ref of ws's pending destroy backup, "" when none.
func (a *Activities) restorableRef(ctx context.Context, ws sandboxapi.Workspace) string {
	lp, err := a.lifecycle()
	if err != nil {
		return ""
	}
	man, ok, err := lp.PendingDestroyed(ctx, ws)
	if err != nil || !ok {
		return ""
	}
	return man.Ref
}

// applyFork writes a pending fork manifest into the just created ws and
// returns the source's id ("" when there is none).
func (a *Activities) applyFork(ctx context.Context, ws *sandboxapi.Workspace) (string, error) {
	lp, err := a.lifecycle()
	if err != nil {
		return "", nil
	}
	type out struct {
		fm sandbox.ForkManifest
		ok bool
	}
	o, err := whileHeartbeating(ctx, func() (out, error) {
		s, ok, err := lp.ApplyFork(ctx, *ws)
		return out{s, ok}, err
	})
	if err != nil || !o.ok {
		return "", err
	}
	ws.Dirty = true
	return o.fm.SourceID, nil
}

func isHexID(s string) bool {
	if len(s) < 40 || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// CleanupList lists the store rows of in's user (and project) that live on
// this host (tombstones only with IncludeRemoved), sorted by id. Errors:
// ErrWorkspaceUnavailable (asked of another host), ErrInvalidArgument, store errors.
func (a *Activities) CleanupList(ctx context.Context, in wire.CleanupListInput) (wire.CleanupCandidates, error) {
	out := wire.CleanupCandidates{Workspaces: []wire.CleanupCandidate{}}
	if in.HostID != a.HostID {
		return out, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "cleanup listing for host %s asked of host %s", in.HostID, a.HostID))
	}
	if err := (sandboxapi.CleanupInput{UserID: in.UserID, ProjectID: in.ProjectID}).Validate(); err != nil {
		return out, ToApplicationError(err)
	}
	rows, err := a.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{UserID: in.UserID, ProjectID: in.ProjectID, HostID: a.HostID})
	if err != nil {
		return out, ToApplicationError(err)
	}
	for _, w := range rows {
		if w.State == sandboxapi.WorkspaceRemoved && !in.IncludeRemoved {
			continue
		}
		out.Workspaces = append(out.Workspaces, wire.CleanupCandidate{WorkspaceID: w.ID, HostID: w.HostID, Mode: string(w.Mode), ProjectID: w.ProjectID, State: string(w.State)})
	}
	slices.SortFunc(out.Workspaces, func(x, y wire.CleanupCandidate) int { return strings.Compare(x.WorkspaceID, y.WorkspaceID) })
	return out, nil
}

// LifecycleActivities are the lifecycle activities that drive sessions
// through the Temporal client: the second step of a fork (acquiring the
// new workspace's own session) and the cleanup's listing and destroys.
// Register them on the shared queue and on the host's queue (a fork's
// acquire runs on the source's host, where its fork manifest is).
type LifecycleActivities struct {
	*Activities
	// Client is connected to the sessions' namespace.
	Client client.Client
	// TaskQueue is the shared queue (SANDBOX_TASK_QUEUE).
	TaskQueue string
}

// Register registers the lifecycle activities on w under their wire names.
func (l *LifecycleActivities) Register(w interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	reg := func(fn any, name string) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(l.ForkAcquire, wire.ActivityForkAcquire)
	reg(l.CleanupSessions, wire.ActivityCleanupSessions)
	reg(l.CleanupDestroy, wire.ActivityCleanupDestroy)
}

// ForkAcquire acquires the fork's target by update-with-start of its own
// session on in.HostID's queue (so its acquire runs on the source's host,
// where the fork manifest and the repo cache are); the acquire writes the forked state into
// the new worktree (Handle.ForkedFrom). A retried activity whose first
// attempt made the workspace recognizes it by the consumed fork manifest's OpID.
// Errors: ErrConflict (the target existed: nothing of the fork was written
// into it), ErrWorkspaceUnavailable (it landed on another host), the
// acquire's errors. On failure an unconsumed fork manifest is dropped.
func (l *LifecycleActivities) ForkAcquire(ctx context.Context, in wire.ForkAcquireInput) (sandboxapi.Handle, error) {
	h, err := whileHeartbeating(ctx, func() (sandboxapi.Handle, error) { return l.forkAcquire(ctx, in) })
	return h, ToApplicationError(err)
}

func (l *LifecycleActivities) forkAcquire(ctx context.Context, in wire.ForkAcquireInput) (sandboxapi.Handle, error) {
	if in.HostID != l.HostID {
		return sandboxapi.Handle{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork acquire for host %s asked of host %s", in.HostID, l.HostID)
	}
	targetID := sandboxapi.WorkspaceIDForKey(in.Request.Key())
	lp, err := l.lifecycle()
	if err != nil {
		return sandboxapi.Handle{}, err
	}
	drop := func() {
		if fm, ok, err := lp.ForkManifest(ctx, targetID); err == nil && ok && fm.ConsumedAt == nil && fm.OpID == in.OpID {
			_ = lp.DropForkManifest(ctx, targetID)
		}
	}
	// A failed acquire drops the fork manifest, so this attempt's own retry
	// cannot decide: an ending run is waited out here (sandboxclient's policy).
	_, h, err := acquireSession(ctx, l.Client, wire.HostTaskQueue(in.HostID), in.Request, sessionrpc.ClientPolicy)
	if err != nil {
		drop()
		return h, err
	}
	if h.HostID != in.HostID {
		drop()
		return h, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork %s landed on host %s, not the source's %s", h.WorkspaceID, h.HostID, in.HostID)
	}
	if h.ForkedFrom == in.SourceID {
		return h, nil
	}
	if fm, ok, err := lp.ForkManifest(ctx, targetID); err == nil && ok && fm.ConsumedAt != nil && fm.OpID == in.OpID && fm.SourceID == in.SourceID {
		h.ForkedFrom = fm.SourceID // made by this fork's earlier attempt
		return h, nil
	}
	drop()
	return h, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s existed already, so it is not a fork of %s: fork to a new id", h.WorkspaceID, in.SourceID)
}

// CleanupSessions lists the running sessions matching in.Query (ANDed onto
// sandboxapi.ListWorkspacesQuery), sorted by workspace id.
func (l *LifecycleActivities) CleanupSessions(ctx context.Context, in wire.CleanupSessionsInput) (wire.CleanupCandidates, error) {
	out := wire.CleanupCandidates{Workspaces: []wire.CleanupCandidate{}}
	list, err := sandboxclient.New(l.Client, sandboxclient.Options{TaskQueue: l.TaskQueue}).ListSessions(ctx, in.Query, 0)
	if err != nil {
		return out, ToApplicationError(err)
	}
	for _, s := range list {
		if sandboxapi.ValidateWorkspaceID(s.WorkspaceID) != nil {
			continue
		}
		out.Workspaces = append(out.Workspaces, wire.CleanupCandidate{WorkspaceID: s.WorkspaceID, HostID: s.Host, Mode: s.Mode, ProjectID: s.Project, State: s.State})
	}
	slices.SortFunc(out.Workspaces, func(x, y wire.CleanupCandidate) int { return strings.Compare(x.WorkspaceID, y.WorkspaceID) })
	return out, nil
}

// CleanupDestroy destroys one workspace through its session (update-with-start
// "destroy" on in.TaskQueue, sessionrpc.ActivityPolicy) with update id
// in.OpID/<attempt>; a retried attempt first collects the outcome of the
// earlier ones (onceSent).
func (l *LifecycleActivities) CleanupDestroy(ctx context.Context, in wire.CleanupDestroyInput) (sandboxapi.DestroyResult, error) {
	res, err := whileHeartbeating(ctx, func() (sandboxapi.DestroyResult, error) {
		s, err := sessionrpc.Open(l.Client, in.TaskQueue, in.WorkspaceID, sessionrpc.ActivityPolicy)
		if err != nil {
			return sandboxapi.DestroyResult{}, err
		}
		return onceSent(ctx, l.logger(), s, in.OpID, func(ctx context.Context, id string) (sandboxapi.DestroyResult, error) {
			var out sandboxapi.DestroyResult
			err := s.UpdateWithStart(ctx, sandboxapi.UpdateDestroy, id, sandboxapi.DestroyInput{Discard: in.Discard}, &out)
			return out, sandboxclient.FromTemporal(err)
		})
	})
	return res, ToApplicationError(err)
}

func (l *LifecycleActivities) logger() *slog.Logger { return l.log() }
