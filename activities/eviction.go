package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictionActivities are the activities of eviction (docs/DESIGN.md
// "Eviction policy"): listing hosts, planning on a host, sending the evict
// signals, and — called by each workspace's SessionWorkflow under its lock —
// evicting a workspace or a runtime; plus removing repo caches and pinning.
// They share the ports of Activities (embedded); Backups must be set on it
// for workspaces with unsaved work to be evicted at all.
type EvictionActivities struct {
	*Activities
	// Client sends the evict signals (signal-with-start of sessions).
	Client client.Client
	// DataDir is the host's data root (SANDBOX_DATA_DIR): disk usage is
	// measured under it.
	DataDir string
	// Policy is this host's eviction policy (eviction.DefaultPolicy and the
	// SANDBOX_EVICTION_* variables).
	Policy eviction.Policy
	// DiskBudgetBytes > 0: the budget in bytes, against the bytes of the
	// files under DataDir. Otherwise the budget is DiskBudgetFraction (0 means
	// 1) of the filesystem holding DataDir, against that filesystem's used bytes.
	DiskBudgetBytes    int64
	DiskBudgetFraction float64
	// VolumesDir, when set, holds the images of the host's disk volumes
	// (SANDBOX_DISK_VOLUMES): left out of the byte count, since each is
	// sparse (its length is its size, not its use) and what it holds is
	// counted where it is mounted, under its worktree or cache.
	VolumesDir string
}

// Register registers the eviction activities on w under their contract
// names (workflows.ActivityEviction*, ActivityEvict*, ActivitySetPin …).
func (e *EvictionActivities) Register(w interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	reg := func(fn any, name string) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(e.EvictionHosts, wire.ActivityEvictionHosts)
	reg(e.PlanEviction, wire.ActivityPlanEviction)
	reg(e.SignalEvictions, wire.ActivitySignalEvictions)
	reg(e.EvictWorkspace, wire.ActivityEvictWorkspace)
	reg(e.EvictRuntime, wire.ActivityEvictRuntime)
	reg(e.RemoveRepoCaches, wire.ActivityRemoveRepoCaches)
	reg(e.SetPin, wire.ActivitySetPin)
	reg(e.DeleteOrphanRuntimes, wire.ActivityDeleteOrphanRuntimes)
	reg(e.RemoveDependencyCaches, wire.ActivityRemoveDependencyCaches)
}

// SetPin sets or clears (Until nil) a workspace's pin in the store (docs/DESIGN.md
// "Eviction policy": never evict pinned workspaces). Errors:
// ErrWorkspaceNotFound, ErrInvalidArgument.
func (e *EvictionActivities) SetPin(ctx context.Context, in wire.SetPinInput) error {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return err
	}
	ws, err := e.Store.GetWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return err
	}
	if in.Until != nil {
		u := in.Until.UTC()
		ws.PinnedUntil = &u
	} else {
		ws.PinnedUntil = nil
	}
	ws.UpdatedAt = e.now()
	return e.Store.UpdateWorkspace(ctx, ws)
}

// restoreEvicted writes back the saved work of an evicted workspace that
// acquire has just re-created (ws), and returns the backup ref it came from
// ("" when there was none). A failure fails the acquire and leaves the
// backup pending (ErrConflict when the branch moved meanwhile).
func (a *Activities) restoreEvicted(ctx context.Context, found bool, existing, ws sandboxapi.Workspace) (string, error) {
	if !found || existing.State != sandboxapi.WorkspaceEvicted || a.Backups == nil {
		return "", nil
	}
	out, err := whileHeartbeating(ctx, func() (restoreOut, error) {
		m, ok, err := a.Backups.Restore(ctx, ws)
		return restoreOut{m, ok}, err
	})
	if err != nil || !out.ok {
		return "", err
	}
	a.log().Info("evicted workspace restored", "workspace", ws.ID, "ref", out.man.Ref, "files", out.man.Files)
	return out.man.Ref, nil
}

type restoreOut struct {
	man sandbox.WorkspaceBackup
	ok  bool
}
