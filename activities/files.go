package activities

import (
	"context"
	"errors"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ReadFile returns a file's bytes (at most sandboxapi.MaxFileBytes). Errors:
// ErrInvalidWorkspacePath, ErrResourceLimit.
func (a *Activities) ReadFile(ctx context.Context, in wire.FileActivityInput) (sandboxapi.ReadFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ReadFileResult{}, err
	}
	data, err := a.Workspaces.ReadFile(ctx, ws, in.Path)
	if err != nil {
		return sandboxapi.ReadFileResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	_, ptr := sandbox.ParseLFSPointer(data)
	return sandboxapi.ReadFileResult{Path: in.Path, Content: data, Size: int64(len(data)), LFSPointer: ptr, ContentHash: sandboxapi.ContentHash(data)}, nil
}

// WriteFile creates or replaces a file. Errors: ErrCommandRejected (read-only
// workspace), ErrInvalidWorkspacePath, ErrResourceLimit.
func (a *Activities) WriteFile(ctx context.Context, in wire.FileActivityInput) (sandboxapi.WriteFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.WriteFileResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode)
	}
	written := sandboxapi.ContentHash(in.Content)
	if in.IfMatch != "" {
		// Under the session's exclusive lock: no other operation of the
		// workspace runs between this read and the write.
		if err := sandboxapi.ValidateIfMatch(in.IfMatch); err != nil {
			return sandboxapi.WriteFileResult{}, err
		}
		cur, err := a.Workspaces.ReadFile(ctx, ws, in.Path)
		switch {
		case err == nil && sandboxapi.ContentHash(cur) == in.IfMatch:
		case err == nil && sandboxapi.ContentHash(cur) == written:
			// A retried activity whose first attempt wrote: done already.
			a.touch(ctx, ws.ID, false)
			return sandboxapi.WriteFileResult{Path: in.Path, Bytes: int64(len(in.Content)), ContentHash: written}, nil
		case err == nil:
			return sandboxapi.WriteFileResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict,
				"write_file %q: the file changed since it was read (if_match %s, now %s); read it again and reapply the change", in.Path, in.IfMatch, sandboxapi.ContentHash(cur))
		case errors.Is(err, sandboxapi.ErrFileNotFound):
			return sandboxapi.WriteFileResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict,
				"write_file %q: the file was removed since it was read (if_match %s)", in.Path, in.IfMatch)
		default:
			return sandboxapi.WriteFileResult{}, err
		}
	}
	if err := a.Workspaces.WriteFile(ctx, ws, in.Path, in.Content, in.Mode); err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	a.setDirty(ctx, ws, true)
	a.touch(ctx, ws.ID, false)
	return sandboxapi.WriteFileResult{Path: in.Path, Bytes: int64(len(in.Content)), ContentHash: written}, nil
}

// ListDir lists a directory without following symlinks (to a depth, and
// without hidden or ignored entries when asked: ListTree).
func (a *Activities) ListDir(ctx context.Context, in wire.FileActivityInput) (sandboxapi.ListDirResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	if in.Depth > 1 || in.SkipHidden || in.SkipIgnored {
		res, err := a.Workspaces.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: in.Path, Depth: in.Depth, SkipHidden: in.SkipHidden, SkipIgnored: in.SkipIgnored})
		if err != nil {
			return sandboxapi.ListDirResult{}, err
		}
		a.touch(ctx, ws.ID, false)
		return res, nil
	}
	entries, err := a.Workspaces.ListDir(ctx, ws, in.Path)
	if err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return sandboxapi.ListDirResult{Path: in.Path, Entries: entries}, nil
}

// Search finds matching lines under the workspace root.
func (a *Activities) Search(ctx context.Context, in wire.OpInput[sandboxapi.SearchRequest]) (sandboxapi.SearchResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.SearchResult{}, err
	}
	res, err := whileHeartbeating(ctx, func() (sandboxapi.SearchResult, error) { return a.Workspaces.Search(ctx, ws, in.Request) })
	if err != nil {
		return sandboxapi.SearchResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}

// EditFile applies one edit_file command (sandboxapi.EditFileInput) to a
// text file of the workspace, in one step on this host. Errors:
// ErrCommandRejected (read-only workspace), ErrInvalidArgument (old_str
// occurring 0 or several times, insert_line past the end, a binary file),
// ErrInvalidWorkspacePath, ErrResourceLimit (oversized).
func (a *Activities) EditFile(ctx context.Context, in wire.EditFileActivityInput) (sandboxapi.EditFileResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.EditFileResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode)
	}
	res, err := a.Workspaces.EditFile(ctx, ws, in.Request, in.UpdateID)
	if err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	a.setDirty(ctx, ws, true)
	a.touch(ctx, ws.ID, false)
	return res, nil
}
