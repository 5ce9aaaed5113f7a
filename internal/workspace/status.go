package workspace

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// readEnv is added to read-only git calls: no opportunistic index refresh
// writes (git(1) GIT_OPTIONAL_LOCKS).
const readEnv = "GIT_OPTIONAL_LOCKS=0"

// baseOf returns the workspace's base commit: ws.BaseCommit (the store's copy)
// when it is a hex id, else the one recorded in BaseCommitFile.
func baseOf(ws sandboxapi.Workspace, w *wtRepo) (string, error) {
	if isHex(ws.BaseCommit) {
		return ws.BaseCommit, nil
	}
	if b := readBase(w.admin); b != "" {
		return b, nil
	}
	return "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s has no recorded base commit", ws.ID)
}

// head returns HEAD's commit and its branch ("" when detached).
func head(ctx context.Context, g gitCtx) (commit, branch string, err error) {
	out, err := g.run(ctx, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
	if err != nil {
		return "", "", gitx.Classify(err, "git rev-parse HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	commit = strings.TrimSpace(string(out))
	out, err = g.run(ctx, "symbolic-ref", "--quiet", "HEAD")
	if err == nil {
		branch = strings.TrimPrefix(strings.TrimSpace(string(out)), "refs/heads/")
	} else if gitx.ExitCode(err) != 1 {
		return "", "", gitx.Classify(err, "git symbolic-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	return commit, branch, nil
}

// Status reports the workspace's git state (sandbox.WorkspaceProvider): the
// branch ("" when detached), HEAD, the base commit, every changed path from
// `git status --porcelain=v2 -z --branch --untracked-files=all --no-renames
// --ignore-submodules=dirty` (untracked files count as dirty; changes inside a
// submodule's own work tree are not inspected, so no git runs in it) in the
// porcelain v1 form (two status letters, ' ' for unchanged) capped at
// MaxStatusFiles, CommitsSinceBase = `git rev-list --count <base>..HEAD` (0
// without a call when HEAD is the base), UnpushedCommits (commits no
// remote-tracking branch, tag or recorded push holds), and ConfigWarnings
// (the poisoned configuration variables gitx found). HEAD and the branch come
// from the status call's own branch header (and the worktree's HEAD file for
// the branch's full name). After the configuration's inspection, three git
// processes run concurrently: the status, the unpushed count and the index
// listing (`git ls-files -s`) that the baseline, submodule and attribute
// checks share; more run only where they have something to look at: the
// `rev-list --count` when HEAD moved, a hash of the files the baseline
// records that status lists as modified, the .gitmodules read when the index
// has gitlinks and a status in each checked-out submodule, and the LFS scan
// when a gitattributes file may set filter=lfs (mayTrackLFS;
// docs/BENCHMARKS.md).
// Files still as checked out (the baseline, baseline.go) are not listed;
// a checked-out submodule whose files changed is listed as " M <path>"
// (submodules.go); LFSPointers and UninitializedSubmodules are reported.
// It takes no index lock (GIT_OPTIONAL_LOCKS=0) and runs no hook, fsmonitor
// or filter. Errors: ErrWorkspaceNotFound, ErrInvalidArgument (LocalPath),
// ErrRefNotFound (base commit missing), ErrWorkspaceUnavailable.
func (m *Manager) Status(ctx context.Context, ws sandboxapi.Workspace) (sandboxapi.WorkspaceStatus, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	g := w.git.with(readEnv)
	base, err := baseOf(ws, w)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	wt, err := m.porcelainStatus(ctx, w, g)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	files, err := m.withoutCheckedOut(ctx, w, wt.files)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	subs, err := m.submodules(ctx, w)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	dirtySubs, err := m.dirtyOf(ctx, w, subs)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	files = withDirtySubmodules(files, dirtySubs)
	st := sandboxapi.WorkspaceStatus{Branch: wt.branch, Head: wt.head, BaseCommit: base, Dirty: len(files) > 0, Files: files, UnpushedCommits: wt.unpushed}
	if len(st.Files) > MaxStatusFiles {
		st.Files = st.Files[:MaxStatusFiles]
	}
	if st.CommitsSinceBase, err = commitsSince(ctx, g, base, wt.head); err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	st.ConfigWarnings = configWarnings(g.ins)
	lfs, err := m.lfsPointers(ctx, w)
	if err != nil {
		return sandboxapi.WorkspaceStatus{}, err
	}
	st.LFSPointers = lfsPaths(lfs)
	st.UninitializedSubmodules = uninitializedPaths(subs)
	return st, nil
}

// worktreeState is what porcelainStatus reads: HEAD, its branch, the
// changed paths as git lists them and the unpushed commit count.
type worktreeState struct {
	head, branch string
	files        []sandboxapi.FileStatus
	unpushed     int
}

// porcelainStatus runs, concurrently, the porcelain v2 status, the
// unpushed count (bkUnpushedCommits) and the index listing the later
// checks share (w.stageEntries, memoized in w: a failure there is met
// again, in its place, by the first check that reads it), then parses the
// status (parseStatusV2) and names the branch (branchOf). Errors, in this
// order: the status call's, parseStatusV2's, branchOf's, the unpushed
// count's (ErrWorkspaceUnavailable).
func (m *Manager) porcelainStatus(ctx context.Context, w *wtRepo, g gitCtx) (worktreeState, error) {
	var st worktreeState
	var unpushedErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		st.unpushed, unpushedErr = bkUnpushedCommits(ctx, g)
	}()
	go func() {
		defer wg.Done()
		_, _ = w.stageEntries(ctx)
	}()
	out, err := g.run(ctx, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty")
	wg.Wait()
	if err != nil {
		return worktreeState{}, gitx.Classify(err, "git status", sandboxapi.ErrWorkspaceUnavailable)
	}
	var short string
	if st.head, short, st.files, err = parseStatusV2(out); err != nil {
		return worktreeState{}, err
	}
	if st.branch, err = branchOf(ctx, g, w.admin, short); err != nil {
		return worktreeState{}, err
	}
	if unpushedErr != nil {
		return worktreeState{}, unpushedErr
	}
	return st, nil
}

// withDirtySubmodules adds " M <path>" for each dirty checked-out submodule
// (submodules.go) that files does not already list.
func withDirtySubmodules(files []sandboxapi.FileStatus, dirty []string) []sandboxapi.FileStatus {
	for _, p := range dirty {
		listed := false
		for _, f := range files {
			listed = listed || f.Path == p
		}
		if !listed {
			files = append(files, sandboxapi.FileStatus{Path: p, Status: " M"})
		}
	}
	return files
}

// commitsSince is `git rev-list --count <base>..HEAD`, 0 without a call
// when head is the base. Errors: ErrWorkspaceUnavailable.
func commitsSince(ctx context.Context, g gitCtx, base, head string) (int, error) {
	if head == base {
		return 0, nil
	}
	out, err := g.run(ctx, "rev-list", "--count", "--end-of-options", base+"..HEAD", "--")
	if err != nil {
		return 0, gitx.Classify(err, "git rev-list "+base+"..HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git rev-list --count: %q", out)
	}
	return n, nil
}

// configWarnings lists the poisoned configuration variables of ins
// (Poison.String), nil when there are none.
func configWarnings(ins *gitx.Inspection) []string {
	var out []string
	if ins != nil {
		for _, p := range ins.Poisoned {
			out = append(out, p.String())
		}
	}
	return out
}

// parseStatusV2 parses `git status --porcelain=v2 -z --branch` (no renames:
// --no-renames): the "# branch.oid" header (HEAD's commit; "(initial)" for
// an unborn HEAD is ErrWorkspaceUnavailable, as HEAD^{commit} does not
// resolve), the "# branch.head" header (the short branch name, "(detached)"
// when detached) and the entries, each returned in porcelain v1's form:
// ordinary and unmerged entries with their two status letters ('.' → ' '),
// untracked ones as "??", in porcelain v1's order: the tracked entries
// (ordinary and unmerged together) sorted by path as git's string list is
// (byte order), then the untracked ones as git lists them.
func parseStatusV2(out []byte) (head, branch string, files []sandboxapi.FileStatus, err error) {
	var untracked []sandboxapi.FileStatus
	for _, f := range strings.Split(string(out), "\x00") {
		switch {
		case strings.HasPrefix(f, "# branch.oid "):
			head = strings.TrimPrefix(f, "# branch.oid ")
		case strings.HasPrefix(f, "# branch.head "):
			branch = strings.TrimPrefix(f, "# branch.head ")
		case strings.HasPrefix(f, "? "):
			untracked = append(untracked, sandboxapi.FileStatus{Path: f[2:], Status: "??"})
		case strings.HasPrefix(f, "1 "), strings.HasPrefix(f, "u "):
			// "1 XY sub mH mI mW hH hI path", "u XY sub m1 m2 m3 mW h1 h2 h3 path"
			n := 8
			if f[0] == 'u' {
				n = 10
			}
			parts := strings.SplitN(f, " ", n+1)
			if len(parts) != n+1 || len(parts[1]) != 2 {
				continue
			}
			files = append(files, sandboxapi.FileStatus{Path: parts[n], Status: strings.ReplaceAll(parts[1], ".", " ")})
		}
	}
	if !isHex(head) {
		return "", "", nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git status: HEAD does not name a commit (%q)", head)
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return head, branch, append(files, untracked...), nil
}

// branchOf returns HEAD's branch as `git symbolic-ref --quiet HEAD` names it
// without "refs/heads/" ("" when detached), from the worktree's HEAD file in
// its administrative directory when that file holds a symbolic ref or a
// commit id and agrees with status's short name, else from git.
func branchOf(ctx context.Context, g gitCtx, admin, short string) (string, error) {
	if b, err := os.ReadFile(filepath.Join(admin, "HEAD")); err == nil && len(b) < 4096 {
		line := strings.TrimSuffix(string(b), "\n")
		if ref, ok := strings.CutPrefix(line, "ref: "); ok && !strings.ContainsAny(ref, "\n\x00") {
			name := strings.TrimPrefix(ref, "refs/heads/")
			if name == short && strings.HasPrefix(ref, "refs/heads/") {
				return name, nil
			}
		} else if isHex(line) && short == "(detached)" {
			return "", nil
		}
	}
	_, branch, err := head(ctx, g)
	return branch, err
}

// withoutCheckedOut drops from files the worktree-only changes (" M") of
// paths still as checked out (baseline.go).
func (m *Manager) withoutCheckedOut(ctx context.Context, w *wtRepo, files []sandboxapi.FileStatus) ([]sandboxapi.FileStatus, error) {
	var cands []string
	for _, f := range files {
		if f.Status == " M" {
			cands = append(cands, f.Path)
		}
	}
	if len(cands) == 0 {
		return files, nil
	}
	same, err := m.asCheckedOut(ctx, w, cands)
	if err != nil || len(same) == 0 {
		return files, err
	}
	out := files[:0:0]
	for _, f := range files {
		if _, ok := same[f.Path]; ok && f.Status == " M" {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// baselinePaths lists the paths of the worktree's baseline.
func baselinePaths(w *wtRepo) []string {
	b := readBaseline(w.admin)
	out := make([]string, 0, len(b))
	for p := range b {
		out = append(out, p)
	}
	return out
}

// parsePorcelain parses `git status --porcelain=v1 -z`: "XY path\0", with an
// extra "orig\0" after renames and copies.
func parsePorcelain(out []byte) []sandboxapi.FileStatus {
	var files []sandboxapi.FileStatus
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 || f[2] != ' ' {
			continue
		}
		xy := f[:2]
		files = append(files, sandboxapi.FileStatus{Path: f[3:], Status: xy})
		if xy[0] == 'R' || xy[0] == 'C' || xy[1] == 'R' || xy[1] == 'C' {
			i++ // skip the original path
		}
	}
	return files
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// writable gates mutating calls (sandboxapi.Capabilities; DESIGN.md: capabilities
// "gate every mutating operation"): ErrCommandRejected unless
// ws.Capabilities.Writable and the mode is not analysis.
func writable(ws sandboxapi.Workspace) error {
	if !ws.Capabilities.Writable || ws.Mode == sandboxapi.ModeAnalysis {
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s (%s) is read-only", ws.ID, ws.Mode)
	}
	return nil
}
