package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
