package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
	return whileHeartbeating(ctx, func() (sandboxapi.DestroyResult, error) { return a.destroy(ctx, in) })
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
