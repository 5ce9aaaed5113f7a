package activities

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
	if m, ok := a.Workspaces.(VolumeMounter); ok {
		// Before anything — a command included — reaches the directory.
		if err := m.EnsureMounted(ctx, ws); err != nil {
			return sandboxapi.Workspace{}, err
		}
	}
	a.repairMetadata(ctx, ws)
	return ws, nil
}

// VolumeMounter is the optional capability of a WorkspaceProvider whose
// worktrees may be on disk volumes (workspace.Manager.EnsureMounted): the
// worktree's volume is mounted again when it is not, or the error says why
// it cannot be (sandboxapi.ErrWorkspaceUnavailable). Every operation on a
// workspace asks first, so that no command runs in, and nothing writes to,
// the empty directory beneath an unmounted volume (docs/SECURITY.md "Disk
// volumes").
type VolumeMounter interface {
	EnsureMounted(ctx context.Context, ws sandboxapi.Workspace) error
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
