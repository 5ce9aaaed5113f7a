package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
// Per branch: a missing branch is sandboxapi.MergeMissing; a tip already
// contained in HEAD is sandboxapi.MergeMerged with no new commit (so a repeated
// call is a no-op); a merge that conflicts is aborted (`git merge --abort`,
// `git reset --hard <pre-merge commit>`, and `git clean -fd` of what the merge
// left untracked: the work tree was clean before it), reported as
// sandboxapi.MergeConflict with its unmerged paths, and the next branch is tried
// on the restored HEAD; any other refusal is sandboxapi.MergeFailed, restored the
// same way. The workspace is never left half-merged: MergeMarkerFile records
// the pre-merge commit while `git merge` runs, and a merge interrupted by a
// crash is rolled back at the start of the next Merge.
//
// Errors: ErrInvalidArgument (req.Validate), ErrCommandRejected (read-only
// workspace, detached HEAD), ErrWorkspaceDirty, ErrWorkspaceNotFound,
// ErrRepoLocked, ErrInsufficientDisk (these two after restoring the
// workspace), ErrWorkspaceUnavailable (any other git failure, or a workspace
// that could not be restored).
func (m *Manager) Merge(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.MergeRequest) (sandboxapi.MergeResult, error) {
	if err := req.Validate(); err != nil {
		return sandboxapi.MergeResult{}, err
	}
	if len(req.Workspaces) > 0 {
		return sandboxapi.MergeResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "merge: workspaces are resolved to their branches before the workspace provider")
	}
	if err := writable(ws); err != nil {
		return sandboxapi.MergeResult{}, err
	}
	if req.DryRun {
		return m.preview(ctx, ws, req)
	}
	if err := m.volumes.Room(0); err != nil {
		return sandboxapi.MergeResult{}, err
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	if err := m.recoverMerge(ctx, w); err != nil {
		return sandboxapi.MergeResult{}, err
	}
	h, branch, err := mergeTarget(ctx, ws, w)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	res := sandboxapi.MergeResult{Branch: branch, Branches: make([]sandboxapi.BranchMerge, 0, len(req.Branches))}
	dirty, err := m.changes(ctx, w, w.git)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	if len(dirty) > 0 {
		if req.CheckpointMessage == "" {
			return sandboxapi.MergeResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s has %d uncommitted changes (first: %s); commit them first", ws.ID, len(dirty), dirty[0].Path)
		}
		c, err := m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: req.CheckpointMessage})
		if err != nil {
			return sandboxapi.MergeResult{}, err
		}
		h, res.CheckpointCommit = c.Commit, c.Commit
	}

	g := mergeGit(w, branch)
	order := req.Branches
	if req.Order == sandboxapi.MergeOrderLeastConflicts {
		if order, err = m.leastConflictOrder(ctx, w, g, h, req.Branches); err != nil {
			return sandboxapi.MergeResult{}, err
		}
	}
	for _, b := range order {
		bm, next, err := m.mergeOne(ctx, w, g, h, b)
		if err != nil {
			return sandboxapi.MergeResult{}, err
		}
		h = next
		res.Branches = append(res.Branches, bm)
	}
	res.Head = h
	m.log.Info("workspace: merged branches", "workspace_id", ws.ID, "branch", branch, "head", h, "branches", len(req.Branches))
	return res, nil
}

// branchOutcome looks up branch b's tip for a merge into commit cur: an
// outcome with its Status set when nothing is left to merge
// (sandboxapi.MergeMissing, or sandboxapi.MergeMerged when cur contains it), else
// one with only Branch and Tip.
func (m *Manager) branchOutcome(ctx context.Context, w *wtRepo, cur, b string) (sandboxapi.BranchMerge, error) {
	bm := sandboxapi.BranchMerge{Branch: b}
	tip, err := m.firstCommit(ctx, w.git, "refs/heads/"+b)
	if err != nil {
		return bm, err
	}
	if tip == "" {
		bm.Status = sandboxapi.MergeMissing
		return bm, nil
	}
	bm.Tip = tip
	if _, err := w.git.run(ctx, "merge-base", "--is-ancestor", tip, cur); err == nil {
		bm.Status = sandboxapi.MergeMerged
		return bm, nil
	} else if gitx.ExitCode(err) != 1 {
		return bm, gitx.Classify(err, "git merge-base --is-ancestor", sandboxapi.ErrWorkspaceUnavailable)
	}
	return bm, nil
}

// mergeTarget returns the HEAD and branch a merge (or its preview) goes
// into: refused when HEAD is detached (ErrCommandRejected) or someone
// else's merge, rebase or cherry-pick is in progress (ErrWorkspaceDirty).
func mergeTarget(ctx context.Context, ws sandboxapi.Workspace, w *wtRepo) (h, branch string, err error) {
	if h, branch, err = head(ctx, w.git); err != nil {
		return "", "", err
	}
	if branch == "" {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s: HEAD is detached; check out its branch %s first", ws.ID, ws.BranchName)
	}
	for _, f := range inProgressFiles {
		if _, err := os.Lstat(filepath.Join(w.admin, f)); err == nil {
			return "", "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s: an operation is in progress (%s); finish or abort it first", ws.ID, f)
		}
	}
	return h, branch, nil
}

// mergeOne merges branch b into HEAD (= pre) and returns its outcome and the new HEAD.
func (m *Manager) mergeOne(ctx context.Context, w *wtRepo, g gitCtx, pre, b string) (sandboxapi.BranchMerge, string, error) {
	bm, err := m.branchOutcome(ctx, w, pre, b)
	if err != nil || bm.Status != "" {
		return bm, pre, err
	}
	tip := bm.Tip
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
		bm.Status = sandboxapi.MergeMerged
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
		bm.Status = sandboxapi.MergeConflict
		if len(conflicts) > sandboxapi.MaxConflictFiles {
			conflicts, bm.ConflictTruncated = conflicts[:sandboxapi.MaxConflictFiles], true
		}
		bm.ConflictFiles = conflicts
		return bm, pre, nil
	}
	if err := gitx.Classify(merr, "git merge", sandboxapi.ErrWorkspaceUnavailable); errors.Is(err, sandboxapi.ErrRepoLocked) || errors.Is(err, sandboxapi.ErrInsufficientDisk) {
		return bm, pre, err
	}
	bm.Status = sandboxapi.MergeFailed
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
func (m *Manager) changes(ctx context.Context, w *wtRepo, g gitCtx) ([]sandboxapi.FileStatus, error) {
	w.forgetStage() // merges change the index between calls
	out, err := g.run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty")
	if err != nil {
		return nil, gitx.Classify(err, "git status", sandboxapi.ErrWorkspaceUnavailable)
	}
	return m.withoutCheckedOut(ctx, w, parsePorcelain(out))
}

// unmerged lists the index's unmerged paths, sorted and unique.
func (m *Manager) unmerged(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "ls-files", "--unmerged", "-z")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files --unmerged", sandboxapi.ErrWorkspaceUnavailable)
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
		return gitx.Classify(err, "git reset --hard "+pre, sandboxapi.ErrWorkspaceUnavailable)
	}
	left, err := m.changes(ctx, w, w.git)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		// Only untracked files can be left after reset --hard: the merge wrote them.
		if _, err := w.git.run(ctx, "clean", "-q", "-f", "-d"); err != nil {
			return gitx.Classify(err, "git clean", sandboxapi.ErrWorkspaceUnavailable)
		}
		if left, err = m.changes(ctx, w, w.git); err != nil {
			return err
		}
		if len(left) > 0 {
			return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "could not restore the workspace to %s after a merge: %s is still changed", pre, left[0].Path)
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

// preview is Merge with req.DryRun (docs/API.md "Merge preview"): the same
// checks, then every branch merged in simulation (simulate) from HEAD, or,
// when the work tree has changes, from a commit of the work tree as it is
// (made like Diff's staging, in a copy of the index, never on a branch:
// what Merge commits first with a checkpoint message). Nothing of the
// worktree, its index or its branch changes; the objects the simulation
// writes (trees, and commits on no ref) are unreachable and go with the
// repository's garbage collection.
func (m *Manager) preview(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.MergeRequest) (sandboxapi.MergeResult, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	h, branch, err := mergeTarget(ctx, ws, w)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	res := sandboxapi.MergeResult{DryRun: true, Branch: branch, Head: h}
	start := h
	// A merge interrupted by a crash is rolled back by the next Merge: its
	// half-merged work tree is no change of the agent's.
	if _, err := os.Lstat(filepath.Join(w.admin, MergeMarkerFile)); err != nil {
		dirty, err := m.changes(ctx, w, w.git)
		if err != nil {
			return sandboxapi.MergeResult{}, err
		}
		if len(dirty) > 0 {
			res.Dirty = true
			if start, err = m.workTreeCommit(ctx, w, h); err != nil {
				return sandboxapi.MergeResult{}, err
			}
		}
	}
	g := mergeGit(w, branch)
	order := req.Branches
	if req.Order == sandboxapi.MergeOrderLeastConflicts {
		if order, err = m.leastConflictOrder(ctx, w, g, start, req.Branches); err != nil {
			return sandboxapi.MergeResult{}, err
		}
	}
	if res.Branches, err = m.simulate(ctx, w, g, start, order); err != nil {
		return sandboxapi.MergeResult{}, err
	}
	return res, nil
}

// workTreeCommit returns a commit (on no ref) of the work tree as Diff sees
// it, with parent h.
func (m *Manager) workTreeCommit(ctx context.Context, w *wtRepo, h string) (string, error) {
	tmp, err := m.indexCopy(ctx, w, "sandboxcore-preview-index-*")
	if err != nil {
		return "", err
	}
	defer removeIndex(tmp)
	g := w.git.with("GIT_INDEX_FILE=" + tmp)
	if err := m.stageWorkTree(ctx, w, g); err != nil {
		return "", err
	}
	out, err := g.run(ctx, "write-tree")
	if err != nil {
		return "", gitx.Classify(err, "git write-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	return m.previewCommit(ctx, w.git, strings.TrimSpace(string(out)), "sandboxcore: merge preview of the work tree", h)
}

// previewCommit writes a commit object of tree with the given parents, on
// no ref, dated by Options.Now.
func (m *Manager) previewCommit(ctx context.Context, g gitCtx, tree, message string, parents ...string) (string, error) {
	now := m.now()
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	args := []string{"commit-tree", "--no-gpg-sign", "-m", message}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := g.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date).run(ctx, append(args, "--end-of-options", tree)...)
	if err != nil {
		return "", gitx.Classify(err, "git commit-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	return strings.TrimSpace(string(out)), nil
}

// MaxPairwiseBranches bounds the merges whose pairwise conflicts
// leastConflictOrder previews (n·(n-1)/2 simulated merges); with more,
// only each branch against the start is previewed.
const MaxPairwiseBranches = 16

// simulate computes, without touching the worktree, what merging branches
// into commit start one after the other does (mergeOne's outcomes, with
// MergeClean for a branch that would add a merge commit): each merge is
// `git merge-tree --write-tree` (merge-ort, the same configuration as the
// real merge), and a clean one continues from a commit of its tree (on no
// ref); a conflicting one is left out, as the merge leaves it out.
func (m *Manager) simulate(ctx context.Context, w *wtRepo, g gitCtx, start string, branches []string) ([]sandboxapi.BranchMerge, error) {
	out := make([]sandboxapi.BranchMerge, 0, len(branches))
	cur := start
	for _, b := range branches {
		bm, next, err := m.simulateOne(ctx, w, g, cur, b)
		if err != nil {
			return nil, err
		}
		out = append(out, bm)
		cur = next
	}
	return out, nil
}

// leastConflictOrder is sandboxapi.MergeOrderLeastConflicts: each branch is
// previewed against start, and (up to MaxPairwiseBranches branches) every
// pair of branches that merge cleanly on their own is previewed merged one
// after the other; the order puts the branches that merge cleanly into
// start first, fewest conflicts with the others first among them, then the
// given order.
func (m *Manager) leastConflictOrder(ctx context.Context, w *wtRepo, g gitCtx, start string, branches []string) ([]string, error) {
	n := len(branches)
	alone := make([]sandboxapi.BranchMerge, n)
	commits := make([]string, n)
	for i, b := range branches {
		bm, c, err := m.simulateOne(ctx, w, g, start, b)
		if err != nil {
			return nil, err
		}
		alone[i], commits[i] = bm, c
	}
	clean := func(i int) bool {
		return alone[i].Status == sandboxapi.MergeClean || alone[i].Status == sandboxapi.MergeMerged
	}
	conflicts := make([]int, n)
	if n <= MaxPairwiseBranches {
		for i := range n {
			for j := i + 1; j < n; j++ {
				if !clean(i) || !clean(j) {
					continue
				}
				bm, _, err := m.simulateOne(ctx, w, g, commits[i], branches[j])
				if err != nil {
					return nil, err
				}
				if bm.Status == sandboxapi.MergeConflict || bm.Status == sandboxapi.MergeFailed {
					conflicts[i]++
					conflicts[j]++
				}
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if clean(a) != clean(b) {
			if clean(a) {
				return -1
			}
			return 1
		}
		return conflicts[a] - conflicts[b]
	})
	order := make([]string, n)
	for k, i := range idx {
		order[k] = branches[i]
	}
	return order, nil
}

// simulateOne previews merging branch b into commit cur: its outcome and
// the commit the merge would make (cur when it makes none).
func (m *Manager) simulateOne(ctx context.Context, w *wtRepo, g gitCtx, cur, b string) (sandboxapi.BranchMerge, string, error) {
	bm, err := m.branchOutcome(ctx, w, cur, b)
	if err != nil || bm.Status != "" {
		return bm, cur, err
	}
	tip := bm.Tip
	// Exit 1 (conflicts) still prints the tree and the conflicted paths.
	var out bytes.Buffer
	_, merr := g.runIO(ctx, nil, &out, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", "--end-of-options", cur, tip)
	fields := strings.Split(out.String(), "\x00")
	switch {
	case merr == nil:
		tree := fields[0]
		if !isHex(tree) {
			return bm, cur, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git merge-tree printed no tree for %s", b)
		}
		next, err := m.previewCommit(ctx, w.git, tree, "Merge branch '"+b+"'", cur, tip)
		if err != nil {
			return bm, cur, err
		}
		bm.Status = sandboxapi.MergeClean
		return bm, next, nil
	case gitx.ExitCode(merr) == 1:
		var conflicts []string
		for _, f := range fields[1:] {
			if f != "" && !slices.Contains(conflicts, f) {
				conflicts = append(conflicts, f)
			}
		}
		sort.Strings(conflicts)
		bm.Status = sandboxapi.MergeConflict
		if len(conflicts) > sandboxapi.MaxConflictFiles {
			conflicts, bm.ConflictTruncated = conflicts[:sandboxapi.MaxConflictFiles], true
		}
		bm.ConflictFiles = conflicts
		return bm, cur, nil
	default:
		if err := gitx.Classify(merr, "git merge-tree", sandboxapi.ErrWorkspaceUnavailable); errors.Is(err, sandboxapi.ErrRepoLocked) || errors.Is(err, sandboxapi.ErrInsufficientDisk) {
			return bm, cur, err
		}
		bm.Status = sandboxapi.MergeFailed
		if bm.Message = firstLine(gitStderr(merr)); bm.Message == "" {
			bm.Message = merr.Error()
		}
		return bm, cur, nil
	}
}
