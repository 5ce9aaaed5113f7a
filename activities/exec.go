package activities

import (
	"context"

	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// runExec runs one command in the workspace's runtime, creating or resuming the
// runtime first, with the network the request asks for (docs/SECURITY.md
// "Network modes"); with in.ProcessID it waits instead for the command
// startExec started as that process (process.go), re-attaching to it when
// retried. A non-zero exit or a timeout is a result; on remote runtimes the
// result also carries the replica's state. Errors: ErrInvalidArgument,
// ErrCommandRejected (a network above the workspace's policy, or another
// network on a runtime that has one for all commands),
// ErrRuntimeUnavailable, ErrWorkspaceUnavailable.
func (a *Activities) runExec(ctx context.Context, in wire.ExecActivityInput) (wire.ExecActivityResult, error) {
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

// Exec is the exec activity (wire.ActivityExec): runExec's result as a
// payload (wire.ExecPayload), so that a session asking with in.RawResult
// returns the command's output to its client without decoding it.
func (a *Activities) Exec(ctx context.Context, in wire.ExecActivityInput) (converter.RawValue, error) {
	res, err := a.runExec(ctx, in)
	if err != nil {
		return converter.RawValue{}, err
	}
	return wire.ExecPayload(res, in.RawResult)
}

// ExecStart is the exec-start activity (wire.ActivityExecStart):
// startExec's result as a payload (wire.ExecStartPayload; see Exec).
func (a *Activities) ExecStart(ctx context.Context, in wire.ExecActivityInput) (converter.RawValue, error) {
	res, err := a.startExec(ctx, in)
	if err != nil {
		return converter.RawValue{}, err
	}
	return wire.ExecStartPayload(res, in.RawResult)
}

// ReadOutput returns a page of an exec's kept output. Errors:
// ErrInvalidArgument, ErrNotFound (never kept, or dropped), ErrCommandRejected
// (this host keeps no output).
func (a *Activities) ReadOutput(ctx context.Context, in wire.OpInput[sandboxapi.ReadOutputInput]) (sandboxapi.ReadOutputResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ReadOutputResult{}, err
	}
	if a.Outputs == nil {
		return sandboxapi.ReadOutputResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "host %s keeps no command output", a.HostID)
	}
	res, err := a.Outputs.Read(ws.ID, in.Request)
	if err != nil {
		return sandboxapi.ReadOutputResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}

// outputKeeper is what execStreaming needs of an execoutput.Keeper.
type outputKeeper interface {
	Write(stream string, p []byte)
}

var _ outputKeeper = (*execoutput.Keeper)(nil)
