package activities

import (
	"context"
	"errors"
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
		return sandboxapi.Checkpoint{}, err
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	cp, err := whileHeartbeating(ctx, func() (sandboxapi.Checkpoint, error) { return lp.Checkpoint(ctx, ws, in.Label) })
	if err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	a.touch(ctx, ws.ID, false)
	return cp, nil
}

// Checkpoints lists the workspace's checkpoints, oldest first.
func (a *Activities) Checkpoints(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.CheckpointList, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.CheckpointList{}, err
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.CheckpointList{}, err
	}
	list, err := lp.Checkpoints(ctx, ws)
	if err != nil {
		return sandboxapi.CheckpointList{}, err
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
		return sandboxapi.RollbackResult{}, err
	}
	lp, err := a.lifecycle()
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.RollbackResult, error) { return lp.Rollback(ctx, ws, in.Checkpoint) })
	if err != nil {
		return sandboxapi.RollbackResult{}, err
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
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "cleanup listing for host %s asked of host %s", in.HostID, a.HostID)
	}
	if err := (sandboxapi.CleanupInput{UserID: in.UserID, ProjectID: in.ProjectID}).Validate(); err != nil {
		return out, err
	}
	rows, err := a.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{UserID: in.UserID, ProjectID: in.ProjectID, HostID: a.HostID})
	if err != nil {
		return out, err
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
	return whileHeartbeating(ctx, func() (sandboxapi.Handle, error) { return l.forkAcquire(ctx, in) })
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
		return out, err
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
	return whileHeartbeating(ctx, func() (sandboxapi.DestroyResult, error) {
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
}

func (l *LifecycleActivities) logger() *slog.Logger { return l.log() }
