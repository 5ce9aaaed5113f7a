package workspace

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BaseFiles returns the content of each of paths (slash-separated, relative
// to the repository's root) as committed at ws's base commit: a path that
// is missing there, or is no regular file, is left out; one of more than
// maxBytes is returned as its first maxBytes+1 bytes, so the caller sees it
// is too large without the worker reading it whole. The worktree is never
// read (the agent's edits do not change what the base commit says).
// Errors: ErrWorkspaceNotFound, ErrInvalidArgument (a path with a line
// break), ErrWorkspaceUnavailable.
func (m *Manager) BaseFiles(ctx context.Context, ws sandboxapi.Workspace, paths []string, maxBytes int) (map[string][]byte, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	base, err := baseOf(ws, w)
	if err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for _, p := range paths {
		if strings.ContainsAny(p, "\n\x00") {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "path %q contains a line break", p)
		}
		in.WriteString(base + ":" + p + "\n")
	}
	out, err := w.git.runIO(ctx, &in, nil, "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	if err != nil {
		return nil, gitx.Classify(err, "git cat-file", sandboxapi.ErrWorkspaceUnavailable)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	files := map[string][]byte{}
	for i, line := range lines {
		f := strings.Fields(line)
		if i >= len(paths) || len(f) != 3 || !isHex(f[0]) || f[1] != "blob" {
			continue // "<name> missing", a tree, a submodule
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		buf := &cappedBuffer{max: maxBytes + 1}
		if size > int64(maxBytes) {
			buf.buf.Write(make([]byte, maxBytes+1)) // too large: never read
		} else if _, err := w.git.runIO(ctx, nil, buf, "cat-file", "blob", f[0]); err != nil {
			return nil, gitx.Classify(err, "git cat-file blob", sandboxapi.ErrWorkspaceUnavailable)
		}
		files[paths[i]] = buf.buf.Bytes()
	}
	return files, nil
}
