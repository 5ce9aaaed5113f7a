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
