package sandboxclient

import (
	"context"
	"unicode/utf8"

	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Exec runs a command; a non-zero exit is in the result, not an error.
// When ctx ends before the command, the command is cancelled (the cancel
// update names the exec's update id: WithUpdateID's, else a random one):
// its whole process tree is killed, and its cancelled result (Cancelled,
// exit 130) is returned with ctx's error (docs/API.md "Cancelling a
// command"; Temporal itself cannot cancel an update).
func (s *Session) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	if err := checkExecPayload(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	res, err := s.rpc.Exec(ctx, execUpdateID(ctx), req)
	return res, execError(ctx, err)
}

// checkExecPayload refuses, before anything is sent, a request the workflow's
// validator would refuse anyway: a stdin over sandboxapi.MaxStdinBytes could
// otherwise exceed Temporal's payload limit and stall the session's workflow
// task instead of failing cleanly. Returns ErrInvalidArgument.
func checkExecPayload(req sandboxapi.ExecRequest) error {
	if len(req.Stdin) > sandboxapi.MaxStdinBytes {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "stdin is larger than %d bytes", sandboxapi.MaxStdinBytes)
	}
	size := 0
	for k, v := range req.Env {
		size += len(k) + len(v)
	}
	for _, a := range req.Cmd {
		size += len(a)
	}
	if size > sandboxapi.MaxStdinBytes {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "command and environment are larger than %d bytes", sandboxapi.MaxStdinBytes)
	}
	for k, v := range req.Env {
		if err := requireUTF8(sandboxapi.ErrInvalidArgument, "environment variable", k, v); err != nil {
			return err
		}
	}
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "command argument", req.Cmd...); err != nil {
		return err
	}
	return requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "cwd", req.Cwd)
}

// requireUTF8 refuses a string that is not valid UTF-8 before it is sent:
// the JSON payload would silently turn each bad byte into U+FFFD, so another
// file would be written or another argument run. Errors wrap kind.
func requireUTF8(kind *sandboxapi.Kind, what string, vals ...string) error {
	for _, v := range vals {
		if !utf8.ValidString(v) {
			return sandboxapi.Errorf(kind, "%s %q is not valid UTF-8 (the wire format carries text only)", what, sandboxapi.Clip(v, 200))
		}
	}
	return nil
}

// ReadOutput returns a page of the whole output an exec kept
// (ExecRequest.KeepOutput, ExecResult.OutputID; docs/API.md "Kept output").
// Errors: ErrInvalidArgument (checked before sending too), ErrNotFound (never
// kept, or dropped as the workspace's oldest).
func (s *Session) ReadOutput(ctx context.Context, in sandboxapi.ReadOutputInput) (sandboxapi.ReadOutputResult, error) {
	if err := in.Validate(); err != nil {
		return sandboxapi.ReadOutputResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpReadOutput, in)
}

// CancelWait bounds how long Exec and ExecStream wait, once their context
// ended, for the cancel update and for the cancelled command's result.
const CancelWait = sessionrpc.CancelWait

// Cancel cancels the exec sent with update id updateID (docs/API.md
// "Cancelling a command"): its whole process tree is killed and it returns
// cancelled (exit 130); the result says what state it was in.
func (s *Session) Cancel(ctx context.Context, updateID string) (sandboxapi.CancelResult, error) {
	return Call(ctx, s, sandboxapi.OpCancel, sandboxapi.CancelInput{UpdateID: updateID})
}

// execUpdateID is the update id of an exec: WithUpdateID's, else a random
// one.
func execUpdateID(ctx context.Context) string {
	if id := updateIDFrom(ctx); id != "" {
		return id
	}
	return sessionrpc.NewUpdateID()
}

// execError converts an exec's error: ctx's own error when ctx ended (the
// command was cancelled), else as FromTemporal.
func execError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return FromTemporal(err)
}
