package activities

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// outputKeeper is what execStreaming needs of an execoutput.Keeper.
type outputKeeper interface {
	Write(stream string, p []byte)
}

var _ outputKeeper = (*execoutput.Keeper)(nil)

// EditFile applies one edit_file command (sandboxapi.EditFileInput) to a
// text file of the workspace, in one step on this host. Errors:
// ErrCommandRejected (read-only workspace), ErrInvalidArgument (old_str
// occurring 0 or several times, insert_line past the end, a binary file),
// ErrInvalidWorkspacePath, ErrResourceLimit (oversized).
func (a *Activities) EditFile(ctx context.Context, in wire.EditFileActivityInput) (sandboxapi.EditFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.EditFileResult{}, ToApplicationError(err)
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.EditFileResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode))
	}
	res, err := a.Workspaces.EditFile(ctx, ws, in.Request, in.UpdateID)
	if err != nil {
		return sandboxapi.EditFileResult{}, ToApplicationError(err)
	}
	a.setDirty(ctx, ws, true)
	a.touch(ctx, ws.ID, false)
	return res, nil
}

// Log lists the newest commits reachable from the workspace's HEAD.
func (a *Activities) Log(ctx context.Context, in wire.OpInput[sandboxapi.LogRequest]) (sandboxapi.LogResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.LogResult{}, ToApplicationError(err)
	}
	res, err := a.Workspaces.Log(ctx, ws, in.Request)
	if err != nil {
		return sandboxapi.LogResult{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}

// ReadOutput returns a page of an exec's kept output. Errors:
// ErrInvalidArgument, ErrNotFound (never kept, or dropped), ErrCommandRejected
// (this host keeps no output).
func (a *Activities) ReadOutput(ctx context.Context, in wire.OpInput[sandboxapi.ReadOutputInput]) (sandboxapi.ReadOutputResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ReadOutputResult{}, ToApplicationError(err)
	}
	if a.Outputs == nil {
		return sandboxapi.ReadOutputResult{}, ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "host %s keeps no command output", a.HostID))
	}
	res, err := a.Outputs.Read(ws.ID, in.Request)
	if err != nil {
		return sandboxapi.ReadOutputResult{}, ToApplicationError(err)
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}
