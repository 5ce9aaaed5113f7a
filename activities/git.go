package activities

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Status reports the workspace's git state and records its dirty flag.
func (a *Activities) Status(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.WorkspaceStatus, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	st, err := a.Workspaces.Status(ctx, ws)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	a.setDirty(ctx, ws, st.Dirty)
	a.touch(ctx, ws.ID, false)
	return st, nil
}

// Diff returns the agent's change against the recorded base commit.
func (a *Activities) Diff(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.Diff, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	d, err := whileHeartbeating(ctx, func() (sandboxapi.Diff, error) { return a.Workspaces.Diff(ctx, ws) })
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	a.touch(ctx, ws.ID, false)
	return d, nil
}

// Commit commits the workspace's changes onto its branch. Errors:
// ErrCommandRejected (read-only), ErrInvalidArgument, ErrRepoLocked.
func (a *Activities) Commit(ctx context.Context, in wire.OpInput[sandboxapi.CommitRequest]) (sandboxapi.CommitResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.CommitResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode)
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.CommitResult, error) { return a.Workspaces.Commit(ctx, ws, in.Request) })
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if st, err := a.Workspaces.Status(ctx, ws); err == nil {
		a.setDirty(ctx, ws, st.Dirty)
	}
	a.touch(ctx, ws.ID, true)
	return res, nil
}

// Log lists the newest commits reachable from the workspace's HEAD.
func (a *Activities) Log(ctx context.Context, in wire.OpInput[sandboxapi.LogRequest]) (sandboxapi.LogResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.LogResult{}, err
	}
	res, err := a.Workspaces.Log(ctx, ws, in.Request)
	if err != nil {
		return sandboxapi.LogResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}
