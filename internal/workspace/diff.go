package workspace

import (
	"bytes"
	"context"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// cappedBuffer keeps at most max bytes and counts them all.
type cappedBuffer struct {
	buf   bytes.Buffer
	max   int
	total int64
}

// Diff returns everything the agent changed against the recorded base commit
// (sandbox.WorkspaceProvider; sandboxapi.Diff): commits, staged, unstaged and
// untracked-but-not-ignored files, as one binary-safe patch (`git diff --cached
// --binary --full-index --no-ext-diff --no-textconv --no-color --no-renames
// <base>`) that survives JSON: a file whose text diff would not be valid
// UTF-8 is re-emitted as a git binary patch (patch.go), so `git apply` of
// the patch a client receives reproduces every file byte for byte. The
// real index is never touched: the index is copied to a temporary index file
// in the worktree's administrative directory, `git add -A` stages the work
// tree into the copy, and the copy is deleted afterwards (blobs of untracked
// files become unreferenced objects in the repository, collected by git gc);
// an untracked nested repository is not staged at all (addAll) and no
// gitlink the agent made is kept (dropNewGitlinks), so such a directory does
// not appear. The patch keeps the whole file sections that fit in
// MaxDiffBytes (Truncated set, TotalBytes = the full size; when not even the
// first fits, that section cut on a line boundary, which no longer applies)
// and Files, the changed paths, at MaxDiffFiles (Truncated set). Errors: ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath), ErrRefNotFound (base commit missing),
// ErrRepoLocked, ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) Diff(ctx context.Context, ws sandboxapi.Workspace) (sandboxapi.Diff, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	base, err := baseOf(ws, w)
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	tmp, err := m.indexCopy(ctx, w, "sandboxcore-diff-index-*")
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	defer removeIndex(tmp)
	g := w.git.with(readEnv, "GIT_INDEX_FILE="+tmp)
	if err := m.stageWorkTree(ctx, w, g); err != nil {
		return sandboxapi.Diff{}, err
	}
	common := []string{"--cached", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames",
		"--no-relative", "--submodule=short", "--ignore-submodules=none"}

	// core.quotePath: header paths are ASCII whatever the repository says.
	patch := newPatchBuilder(ctx, g, sandboxapi.MaxDiffBytes)
	args := append([]string{"-c", "core.quotePath=true", "diff"}, common...)
	args = append(args, "--binary", "--full-index", "--src-prefix=a/", "--dst-prefix=b/", "-O/dev/null", "--end-of-options", base, "--")
	if _, err := g.runIO(ctx, nil, patch, args...); err != nil {
		return sandboxapi.Diff{}, gitx.Classify(err, "git diff "+base, sandboxapi.ErrWorkspaceUnavailable)
	}
	text, cut, total, err := patch.result()
	if err != nil {
		return sandboxapi.Diff{}, err
	}
	names := &cappedBuffer{max: 8 << 20}
	args = append([]string{"diff"}, common...)
	args = append(args, "--name-only", "-z", "--end-of-options", base, "--")
	if _, err := g.runIO(ctx, nil, names, args...); err != nil {
		return sandboxapi.Diff{}, gitx.Classify(err, "git diff --name-only "+base, sandboxapi.ErrWorkspaceUnavailable)
	}
	files, namesCut := diffNames(names)
	return sandboxapi.Diff{BaseCommit: base, Patch: text, Truncated: cut || namesCut, TotalBytes: total, Files: files}, nil
}

// stageWorkTree stages the whole work tree into the index g uses (a copy:
// GIT_INDEX_FILE) as Diff describes: `git add -A` without untracked nested
// repositories (addAll), no gitlink the agent made (dropNewGitlinks), and
// every path still as checked out put back as it was (the baseline:
// normalised line endings, fetched LFS content are no change). Errors:
// ErrWorkspaceUnavailable (and those of git's add, classified).
func (m *Manager) stageWorkTree(ctx context.Context, w *wtRepo, g gitCtx) error {
	if err := addAll(ctx, g); err != nil {
		return gitx.Classify(err, "git add -A (temporary index)", sandboxapi.ErrWorkspaceUnavailable)
	}
	if err := dropNewGitlinks(ctx, g); err != nil {
		return err
	}
	same, err := m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return err
	}
	return restoreCheckedOut(ctx, g, same)
}

// diffNames returns the paths of `git diff --name-only -z` held in names,
// at most MaxDiffFiles, never empty-named or partial (a last name cut by
// the buffer's cap is dropped), and whether anything was left out.
func diffNames(names *cappedBuffer) ([]string, bool) {
	files := []string{}
	truncated := false
	nameBytes := names.buf.Bytes()
	if names.total > int64(len(nameBytes)) { // drop a partial last name
		if i := bytes.LastIndexByte(nameBytes, 0); i >= 0 {
			nameBytes = nameBytes[:i+1]
		}
		truncated = true
	}
	for _, n := range strings.Split(string(nameBytes), "\x00") {
		if n == "" {
			continue
		}
		if len(files) == MaxDiffFiles {
			truncated = true
			break
		}
		files = append(files, n)
	}
	return files, truncated
}
