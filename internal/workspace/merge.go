package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// MergeMarkerFile is the name of the file, inside a worktree's administrative
// directory (<bare>/worktrees/<name>/, out of an agent's reach), that Merge
// writes before each `git merge` and removes after it: it holds the commit
// HEAD had before that merge (lowercase hex and a newline). Finding it on the
// next Merge means a merge was interrupted (the worker died): the workspace is
// reset to that commit before anything else.
const MergeMarkerFile = "sandboxcore-merge"

var _ sandbox.BranchMerger = (*Manager)(nil)

// inProgressFiles name the administrative files of an operation a workspace
// is in the middle of (git's own markers).
var inProgressFiles = []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply"}

// Merge brings req.Branches into the workspace's branch, one by one in request
// order (sandbox.BranchMerger; docs/DESIGN.md "Workspace lifecycle": merge back into the
// conversation edit workspace). Each branch is merged with `git merge -q
// --no-ff --no-edit -s ort -m "Merge branch '<b>'"` of its tip commit through
// the hardened runner (hooks, filters and custom merge drivers neutralized: a
// file that needs a repository-configured merge driver conflicts), with rerere
// and branch.<b>.mergeOptions switched off. Author and committer are
// DefaultAuthorName/DefaultAuthorEmail, dated by Options.Now.
//
// Before merging, the workspace must be on its branch, have no merge, rebase
// or cherry-pick of someone else's in progress, and be clean (untracked files
// count): a dirty workspace is committed first with req.CheckpointMessage, or
// refused with ErrWorkspaceDirty when that is empty.
//
// Per branch: a missing branch is sandbox.MergeMissing; a tip already
// contained in HEAD is sandbox.MergeMerged with no new commit (so a repeated
// call is a no-op); a merge that conflicts is aborted (`git merge --abort`,
// `git reset --hard <pre-merge commit>`, and `git clean -fd` of what the merge
// left untracked: the work tree was clean before it), reported as
// sandbox.MergeConflict with its unmerged paths, and the next branch is tried
// on the restored HEAD; any other refusal is sandbox.MergeFailed, restored the
// same way. The workspace is never left half-merged: MergeMarkerFile records
// the pre-merge commit while `git merge` runs, and a merge interrupted by a
// crash is rolled back at the start of the next Merge.
//
// Errors: ErrInvalidArgument (req.Validate), ErrCommandRejected (read-only
// workspace, detached HEAD), ErrWorkspaceDirty, ErrWorkspaceNotFound,
// ErrRepoLocked, ErrInsufficientDisk (these two after restoring the
// workspace), ErrWorkspaceUnavailable (any other git failure, or a workspace
// that could not be restored).
func (m *Manager) Merge(ctx context.Context, ws sandbox.Workspace, req sandbox.MergeRequest) (sandbox.MergeResult, error) {
	if err := req.Validate(); err != nil {
		return sandbox.MergeResult{}, err
	}
	if err := writable(ws); err != nil {
		return sandbox.MergeResult{}, err
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandbox.MergeResult{}, err
	}
	if err := m.recoverMerge(ctx, w); err != nil {
		return sandbox.MergeResult{}, err
	}
	h, branch, err := head(ctx, w.git)
	if err != nil {
		return sandbox.MergeResult{}, err
	}
	if branch == "" {
		return sandbox.MergeResult{}, sandbox.Errorf(sandbox.ErrCommandRejected, "workspace %s: HEAD is detached; check out its branch %s first", ws.ID, ws.BranchName)
	}
	for _, f := range inProgressFiles {
		if _, err := os.Lstat(filepath.Join(w.admin, f)); err == nil {
			return sandbox.MergeResult{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "workspace %s: an operation is in progress (%s); finish or abort it first", ws.ID, f)
		}
	}
	res := sandbox.MergeResult{Branch: branch, Branches: make([]sandbox.BranchMerge, 0, len(req.Branches))}
	dirty, err := m.changes(ctx, w, w.git)
	if err != nil {
		return sandbox.MergeResult{}, err
	}
	if len(dirty) > 0 {
		if req.CheckpointMessage == "" {
			return sandbox.MergeResult{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "workspace %s has %d uncommitted changes (first: %s); commit them first", ws.ID, len(dirty), dirty[0].Path)
		}
		c, err := m.Commit(ctx, ws, sandbox.CommitRequest{Message: req.CheckpointMessage})
		if err != nil {
			return sandbox.MergeResult{}, err
		}
		h, res.CheckpointCommit = c.Commit, c.Commit
	}

	g := mergeGit(w, branch)
	for _, b := range req.Branches {
		bm, next, err := m.mergeOne(ctx, w, g, h, b)
		if err != nil {
			return sandbox.MergeResult{}, err
		}
		h = next
		res.Branches = append(res.Branches, bm)
	}
	res.Head = h
	m.log.Info("workspace: merged branches", "workspace_id", ws.ID, "branch", branch, "head", h, "branches", len(req.Branches))
	return res, nil
}

// mergeOne merges branch b into HEAD (= pre) and returns its outcome and the new HEAD.
func (m *Manager) mergeOne(ctx context.Context, w *wtRepo, g gitCtx, pre, b string) (sandbox.BranchMerge, string, error) {
	bm := sandbox.BranchMerge{Branch: b}
	tip, err := m.firstCommit(ctx, w.git, "refs/heads/"+b)
	if err != nil {
		return bm, pre, err
	}
	if tip == "" {
		bm.Status = sandbox.MergeMissing
		return bm, pre, nil
	}
	bm.Tip = tip
	if _, err := w.git.run(ctx, "merge-base", "--is-ancestor", tip, pre); err == nil {
		bm.Status = sandbox.MergeMerged
		return bm, pre, nil
	} else if gitx.ExitCode(err) != 1 {
		return bm, pre, gitx.Classify(err, "git merge-base --is-ancestor", sandbox.ErrWorkspaceUnavailable)
	}
	if err := writeMarker(w.admin, pre); err != nil {
		return bm, pre, err
	}
	now := m.now()
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	_, merr := g.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date).run(ctx,
		"merge", "-q", "--no-ff", "--no-edit", "--no-squash", "--no-stat", "--no-autostash", "--no-verify",
		"--no-verify-signatures", "--no-rerere-autoupdate", "-s", "ort", "-m", "Merge branch '"+b+"'",
		"--end-of-options", tip)
	if merr == nil {
		h, _, err := head(ctx, w.git)
		if err != nil {
			return bm, pre, err
		}
		if err := os.Remove(filepath.Join(w.admin, MergeMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return bm, pre, fsError(err, "remove merge marker")
		}
		bm.Status = sandbox.MergeMerged
		return bm, h, nil
	}
	conflicts, cerr := m.unmerged(ctx, w.git)
	if err := m.restore(ctx, w, pre); err != nil {
		return bm, pre, err
	}
	if cerr != nil {
		return bm, pre, cerr
	}
	if len(conflicts) > 0 {
		bm.Status = sandbox.MergeConflict
		if len(conflicts) > sandbox.MaxConflictFiles {
			conflicts, bm.ConflictTruncated = conflicts[:sandbox.MaxConflictFiles], true
		}
		bm.ConflictFiles = conflicts
		return bm, pre, nil
	}
	if err := gitx.Classify(merr, "git merge", sandbox.ErrWorkspaceUnavailable); errors.Is(err, sandbox.ErrRepoLocked) || errors.Is(err, sandbox.ErrInsufficientDisk) {
		return bm, pre, err
	}
	bm.Status = sandbox.MergeFailed
	bm.Message = firstLine(gitStderr(merr))
	if bm.Message == "" {
		bm.Message = merr.Error()
	}
	return bm, pre, nil
}

// mergeGit returns w's git for `git merge`: rerere off and
// branch.<branch>.mergeOptions emptied (an agent's `-s ours` there would
// silently drop every task), as GIT_CONFIG_* entries that gitx merges with
// its own overrides (which already turn every merge.<driver>.driver into
// `false`, so a file that needs a custom driver conflicts instead).
func mergeGit(w *wtRepo, branch string) gitCtx {
	return withConfig(w.git, [][2]string{{"rerere.enabled", "false"}, {"branch." + branch + ".mergeOptions", ""}})
}

// withConfig appends GIT_CONFIG_KEY_n/VALUE_n entries after those g already
// carries (GIT_CONFIG_COUNT, last one wins) and raises the count.
func withConfig(g gitCtx, kv [][2]string) gitCtx {
	n := 0
	for _, e := range g.env {
		if v, ok := strings.CutPrefix(e, "GIT_CONFIG_COUNT="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	env := make([]string, 0, 2*len(kv)+1)
	for i, p := range kv {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n+i, p[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n+i, p[1]))
	}
	return g.with(append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", n+len(kv)))...)
}

// changes lists the work tree's changes, untracked files included, but
// files still as checked out (baseline.go).
func (m *Manager) changes(ctx context.Context, w *wtRepo, g gitCtx) ([]sandbox.FileStatus, error) {
	w.forgetStage() // merges change the index between calls
	out, err := g.run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty")
	if err != nil {
		return nil, gitx.Classify(err, "git status", sandbox.ErrWorkspaceUnavailable)
	}
	return m.withoutCheckedOut(ctx, w, parsePorcelain(out))
}

// unmerged lists the index's unmerged paths, sorted and unique.
func (m *Manager) unmerged(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "ls-files", "--unmerged", "-z")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files --unmerged", sandbox.ErrWorkspaceUnavailable)
	}
	seen := map[string]bool{}
	var paths []string
	for _, rec := range strings.Split(string(out), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		if _, p, ok := strings.Cut(rec, "\t"); ok && !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, nil
}

// restore puts the workspace back at commit pre with a clean work tree after
// a failed or interrupted merge (the work tree was clean before it started),
// then removes MergeMarkerFile. ErrWorkspaceUnavailable when it stays dirty.
func (m *Manager) restore(ctx context.Context, w *wtRepo, pre string) error {
	_, _ = w.git.run(ctx, "merge", "--abort") // nothing to abort is fine: reset follows
	if _, err := w.git.run(ctx, "reset", "-q", "--hard", pre); err != nil {
		return gitx.Classify(err, "git reset --hard "+pre, sandbox.ErrWorkspaceUnavailable)
	}
	left, err := m.changes(ctx, w, w.git)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		// Only untracked files can be left after reset --hard: the merge wrote them.
		if _, err := w.git.run(ctx, "clean", "-q", "-f", "-d"); err != nil {
			return gitx.Classify(err, "git clean", sandbox.ErrWorkspaceUnavailable)
		}
		if left, err = m.changes(ctx, w, w.git); err != nil {
			return err
		}
		if len(left) > 0 {
			return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "could not restore the workspace to %s after a merge: %s is still changed", pre, left[0].Path)
		}
	}
	if err := os.Remove(filepath.Join(w.admin, MergeMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "remove merge marker")
	}
	return nil
}

// recoverMerge rolls back a merge interrupted by a crash (MergeMarkerFile
// present): when HEAD is still the recorded pre-merge commit, the work tree
// and index are restored to it; when HEAD moved, the merge commit was made
// and only the marker is removed.
func (m *Manager) recoverMerge(ctx context.Context, w *wtRepo) error {
	b, err := os.ReadFile(filepath.Join(w.admin, MergeMarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError(err, "read merge marker")
	}
	pre := strings.TrimSpace(string(b))
	h, _, err := head(ctx, w.git)
	if err != nil {
		return err
	}
	if isHex(pre) && h == pre {
		m.log.Warn("workspace: rolling back an interrupted merge", "path", w.wt, "head", pre)
		return m.restore(ctx, w, pre)
	}
	if err := os.Remove(filepath.Join(w.admin, MergeMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "remove merge marker")
	}
	return nil
}

// writeMarker records pre in MergeMarkerFile (atomically).
func writeMarker(admin, pre string) error {
	tmp, err := os.CreateTemp(admin, MergeMarkerFile+".tmp-*")
	if err != nil {
		return fsError(err, "write merge marker")
	}
	_, werr := tmp.WriteString(pre + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "write merge marker")
	}
	if err := os.Rename(tmp.Name(), filepath.Join(admin, MergeMarkerFile)); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "write merge marker")
	}
	return nil
}
