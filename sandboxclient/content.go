package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// ReadFileResult is ReadFile returning the whole read_file result: the
// bytes, their size, and LFSPointer, set when the content is a Git LFS
// pointer whose real content was not fetched (docs/API.md "Git LFS").
// Errors as ReadFile.
func (s *Session) ReadFileResult(ctx context.Context, path string) (workflows.ReadFileResult, error) {
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", path); err != nil {
		return workflows.ReadFileResult{}, err
	}
	var out workflows.ReadFileResult
	err := s.update(ctx, workflows.UpdateReadFile, workflows.ReadFileInput{Path: path}, &out)
	return out, err
}
