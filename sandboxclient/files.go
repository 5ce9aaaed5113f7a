package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ReadFile returns a workspace file's bytes. A path that is not valid UTF-8
// is refused before sending (ErrInvalidWorkspacePath: JSON would change it).
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	out, err := Call(ctx, s, sandboxapi.OpReadFile, sandboxapi.ReadFileInput{Path: path})
	return out.Content, err
}

// WriteFile creates or replaces a workspace file (mode 0 = 0644). Refused
// before sending: content over sandboxapi.MaxFileBytes (ErrResourceLimit), a
// path that is not valid UTF-8 (ErrInvalidWorkspacePath).
func (s *Session) WriteFile(ctx context.Context, path string, content []byte, mode uint32) error {
	_, err := s.WriteFileIfMatch(ctx, path, content, mode, "")
	return err
}

// WriteFileIfMatch is WriteFile with a precondition (docs/API.md
// "Optimistic concurrency"): with ifMatch set (the ContentHash a read
// returned, sandboxapi.ContentHash of the bytes read) the write happens only
// while the file still has that content, else it fails with ErrConflict and
// changes nothing; "" writes unconditionally. Returns the written content's
// hash, for the next write. Errors: those of WriteFile, ErrInvalidArgument
// (a malformed ifMatch, before sending), ErrConflict.
func (s *Session) WriteFileIfMatch(ctx context.Context, path string, content []byte, mode uint32, ifMatch string) (sandboxapi.WriteFileResult, error) {
	if len(content) > sandboxapi.MaxFileBytes {
		return sandboxapi.WriteFileResult{}, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "content is larger than %d bytes", sandboxapi.MaxFileBytes)
	}
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	if err := sandboxapi.ValidateIfMatch(ifMatch); err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpWriteFile, sandboxapi.WriteFileInput{Path: path, Content: content, Mode: mode, IfMatch: ifMatch})
}

// ListDir lists a directory ("" = root); a path that is not valid UTF-8 is
// ErrInvalidWorkspacePath before sending.
func (s *Session) ListDir(ctx context.Context, path string) ([]sandboxapi.FileEntry, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	out, err := Call(ctx, s, sandboxapi.OpListDir, sandboxapi.ListDirInput{Path: path})
	return out.Entries, err
}

// Search finds matching lines; a pattern or path that is not valid UTF-8 is
// refused before sending (ErrInvalidArgument, ErrInvalidWorkspacePath).
func (s *Session) Search(ctx context.Context, req sandboxapi.SearchRequest) (sandboxapi.SearchResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "search pattern", req.Pattern); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", req.Path); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpSearch, req)
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

// ReadFileResult is ReadFile returning the whole read_file result: the
// bytes, their size, and LFSPointer, set when the content is a Git LFS
// pointer whose real content was not fetched (docs/API.md "Git LFS").
// Errors as ReadFile.
func (s *Session) ReadFileResult(ctx context.Context, path string) (sandboxapi.ReadFileResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return sandboxapi.ReadFileResult{}, err
	}
	var out sandboxapi.ReadFileResult
	err := s.update(ctx, sandboxapi.UpdateReadFile, sandboxapi.ReadFileInput{Path: path}, &out)
	return out, err
}
