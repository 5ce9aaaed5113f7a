package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EditFile applies one edit_file command (str_replace, insert or create)
// to a text file, in one step on the worker (docs/API.md "Updates"). Refused
// before sending: a path or text that is not valid UTF-8
// (ErrInvalidWorkspacePath, ErrInvalidArgument), an invalid command or
// field (sandboxapi.EditFileInput.Validate). Errors from the worker:
// ErrInvalidArgument (old_str occurring zero or several times — the message
// says how many —, insert_line past the end, a binary file),
// ErrResourceLimit (oversized), ErrInvalidWorkspacePath, ErrFileNotFound,
// ErrCommandRejected (a read-only workspace).
func (s *Session) EditFile(ctx context.Context, in sandboxapi.EditFileInput) (sandboxapi.EditFileResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", in.Path); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if err := in.Validate(); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpEditFile, in)
}

// ListTree lists a directory with list_dir's options (depth, skip_hidden,
// skip_ignored; sandboxapi.ListDirInput). A path that is not valid UTF-8 is
// ErrInvalidWorkspacePath before sending.
func (s *Session) ListTree(ctx context.Context, in sandboxapi.ListDirInput) (sandboxapi.ListDirResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", in.Path); err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpListDir, in)
}

// Log lists the newest commits reachable from HEAD (limit 0 = 20, at most
// sandboxapi.MaxLogCommits). Errors: ErrInvalidArgument (limit).
func (s *Session) Log(ctx context.Context, limit int) (sandboxapi.LogResult, error) {
	return Call(ctx, s, sandboxapi.OpLog, sandboxapi.LogRequest{Limit: limit})
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
