package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// addAll stages the whole work tree (`git add -A`) except untracked nested
// repositories: `git ls-files --others` lists each as "<dir>/", and they are
// excluded (":(exclude,literal)<dir>/"), so git never opens the repository
// an agent's .git points at (which may be anyone's on the host, and whose
// missing commit would fail the whole add). The error is git's, unclassified.
func addAll(ctx context.Context, g gitCtx) error {
	out, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	var specs bytes.Buffer
	for _, p := range strings.Split(string(out), "\x00") {
		if strings.HasSuffix(p, "/") {
			specs.WriteString(":(exclude,literal)" + p + "\x00")
		}
	}
	if specs.Len() == 0 {
		_, err = g.run(ctx, "add", "-A")
		return err
	}
	var in bytes.Buffer
	in.WriteString(".\x00")
	in.Write(specs.Bytes())
	_, err = g.runIO(ctx, &in, nil, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
	return err
}

// nestedRepos lists, sorted and each ending in "/", the nested git
// repositories in the worktree that no commit, checkpoint or backup can
// hold: untracked directories holding a .git (`git ls-files --others
// --exclude-standard` lists each as "<dir>/"; ignored ones are not listed:
// ignored files are never saved) and gitlinks staged in the index that
// HEAD does not have as gitlinks (a repository the agent made and ran `git
// add` on: recorded, only its commit id would be kept, never its files).
// Errors: ErrWorkspaceUnavailable.
func nestedRepos(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files --others", sandboxapi.ErrWorkspaceUnavailable)
	}
	var nested []string
	for _, p := range strings.Split(string(out), "\x00") {
		if strings.HasSuffix(p, "/") {
			nested = append(nested, p)
		}
	}
	staged, err := newGitlinks(ctx, g)
	if err != nil {
		return nil, err
	}
	nested = append(nested, staged...)
	sort.Strings(nested)
	return slices.Compact(nested), nil
}

// newGitlinks lists ("<path>/") the gitlinks of g's index that HEAD does
// not have as gitlinks (`git diff-index --cached HEAD`: new mode 160000,
// old mode another). Errors: ErrWorkspaceUnavailable.
func newGitlinks(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "diff-index", "--cached", "--no-renames", "-z", "HEAD", "--")
	if err != nil {
		return nil, gitx.Classify(err, "git diff-index --cached HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	var list []string
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		f := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(f) == 5 && f[1] == "160000" && f[0] != "160000" {
			list = append(list, fields[i+1]+"/")
		}
	}
	return list, nil
}

// MaxNestedReposNamed is how many nested repositories the refusal of an
// operation that would leave them out names (nestedRepoError).
const MaxNestedReposNamed = 20

// nestedRepoError is the one refusal of commit, checkpoint, fork, destroy
// and eviction when the worktree holds nested repositories (nestedRepos)
// that they would leave out (docs/API.md "Nested repositories"):
// ErrWorkspaceDirty naming them (at most MaxNestedReposNamed) and what to
// do. what names the refused operation.
func nestedRepoError(what string, nested []string) error {
	named := nested
	if len(named) > MaxNestedReposNamed {
		named = named[:MaxNestedReposNamed]
	}
	quoted := make([]string, len(named))
	for i, p := range named {
		quoted[i] = strconv.Quote(p)
	}
	more := ""
	if n := len(nested) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "%s refused: nested git repositories %s%s cannot be committed or saved (their files would be left out); move them out of the workspace, delete them, or list them in .gitignore if they need not be kept",
		what, strings.Join(quoted, ", "), more)
}

// nestedUnder returns the nested repositories (nestedRepos' form) that
// the literal, clean pathspecs (NUL-terminated, commitArguments) name or
// contain; all of them when pathspecs is empty (everything is staged).
func nestedUnder(nested []string, pathspecs []byte) []string {
	if len(pathspecs) == 0 || len(nested) == 0 {
		return nested
	}
	var out []string
	for _, n := range nested {
		for _, p := range strings.Split(strings.TrimSuffix(string(pathspecs), "\x00"), "\x00") {
			if p == "." || strings.HasPrefix(n, p+"/") || strings.HasPrefix(p+"/", n) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// dropNewGitlinks puts back HEAD's entry (or none) for every gitlink (mode
// 160000) that `git add` staged in g's index and HEAD does not have as it is.
// Adding a directory holding a .git makes git resolve that repository's HEAD,
// and an agent's .git file (or a .git directory with a commondir) may point at
// any repository on the host, another user's included: recording its commit
// would show it in the diff. So a nested repository the agent made is never
// recorded (its files never were: git records a gitlink, not contents);
// gitlinks that came from the repository stay. Errors: ErrWorkspaceUnavailable.
func dropNewGitlinks(ctx context.Context, g gitCtx) error {
	out, err := g.run(ctx, "diff-index", "--cached", "--no-renames", "-z", "HEAD", "--")
	if err != nil {
		return gitx.Classify(err, "git diff-index --cached HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	var fix bytes.Buffer
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		// ":<old mode> <new mode> <old sha> <new sha> <status>" then the path.
		f := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(f) != 5 || f[1] != "160000" {
			continue
		}
		mode, sha := f[0], f[2]
		if mode == "000000" { // new: remove the entry
			mode, sha = "0", strings.Repeat("0", len(f[3]))
		}
		fmt.Fprintf(&fix, "%s %s\t%s\x00", mode, sha, fields[i+1])
	}
	if fix.Len() == 0 {
		return nil
	}
	if _, err := g.runIO(ctx, &fix, nil, "update-index", "-z", "--index-info"); err != nil {
		return gitx.Classify(err, "git update-index --index-info", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
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

// cappedBuffer keeps at most max bytes and counts them all.
type cappedBuffer struct {
	buf   bytes.Buffer
	max   int
	total int64
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

// Commit stages and commits the workspace's changes on its current branch
// (sandbox.WorkspaceProvider; docs/DESIGN.md "Workspace lifecycle": commit from the same
// workspace). Empty req.Paths stages everything including untracked files
// (`git add -A`); otherwise each path is validated with sandboxapi.CleanRelPath
// and staged literally (`git add -A --pathspec-from-file=- --pathspec-file-nul`
// with GIT_LITERAL_PATHSPECS=1, so no pathspec magic), and the commit then
// contains everything staged, except a gitlink the agent changed
// (dropNewGitlinks puts HEAD's entry back, so such a change is never
// committed). A nested repository the commit would include (nestedRepos:
// untracked, or staged as a new gitlink) refuses the commit with
// ErrWorkspaceDirty naming it, as checkpoint, destroy and eviction refuse
// to save it (nestedRepoError): nothing is left out silently. The message goes through stdin (`-F -`,
// --cleanup=whitespace: lines starting with '#' are kept); hooks are skipped
// (--no-verify, and the runner's core.hooksPath=/dev/null); author and
// committer are req's identity or DefaultAuthorName/DefaultAuthorEmail, dated
// by Options.Now. Nothing staged → NothingToCommit with Commit = HEAD and no
// error, unless req.AllowEmpty. Errors: ErrCommandRejected (workspace not
// writable, or HEAD detached), ErrWorkspaceDirty (a nested repository),
// ErrInvalidArgument (empty or over
// MaxCommitMessageBytes message, NUL in it, bad identity), ErrInvalidWorkspacePath
// (a bad path, one matching no file, or one through a symbolic link),
// ErrWorkspaceNotFound, ErrRepoLocked
// (index.lock held), ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) Commit(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.CommitRequest) (sandboxapi.CommitResult, error) {
	if err := writable(ws); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	id, pathspecs, err := commitArguments(req)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	_, branch, err := head(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if branch == "" {
		return sandboxapi.CommitResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s: HEAD is detached; check out its branch %s first", ws.ID, ws.BranchName)
	}
	// A nested repository is never left out silently: the commit is
	// refused as checkpoint, destroy and eviction refuse to save it.
	nested, err := nestedRepos(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if left := nestedUnder(nested, pathspecs.Bytes()); len(left) > 0 {
		return sandboxapi.CommitResult{}, nestedRepoError("commit", left)
	}
	if err := m.stageForCommit(ctx, w, len(req.Paths) == 0, pathspecs); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	_, err = w.git.run(ctx, "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", "HEAD", "--")
	staged := gitx.ExitCode(err) == 1
	if err != nil && !staged {
		return sandboxapi.CommitResult{}, gitx.Classify(err, "git diff --cached --quiet", sandboxapi.ErrWorkspaceUnavailable)
	}
	if !staged && !req.AllowEmpty {
		h, _, err := head(ctx, w.git)
		if err != nil {
			return sandboxapi.CommitResult{}, err
		}
		return sandboxapi.CommitResult{Commit: h, Branch: branch, NothingToCommit: true}, nil
	}
	if err := m.runCommit(ctx, w, id, req); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	h, branch, err := head(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	m.log.Info("workspace: committed", "workspace_id", ws.ID, "branch", branch, "commit", h)
	return sandboxapi.CommitResult{Commit: h, Branch: branch}, nil
}

// commitIdentity is the author (and committer) of a commit.
type commitIdentity struct{ name, email string }

// commitArguments validates a commit request before anything runs (see
// Commit): the message (not blank, at most MaxCommitMessageBytes, no NUL),
// the identity (req's or DefaultAuthorName/DefaultAuthorEmail: at most
// MaxIdentityBytes, not blank, no '<', '>', line breaks or NUL) and each
// path (sandboxapi.CleanRelPath, not inside .git), returned as NUL-terminated
// pathspecs for `git add --pathspec-from-file`. Errors: ErrInvalidArgument,
// ErrInvalidWorkspacePath.
func commitArguments(req sandboxapi.CommitRequest) (commitIdentity, *bytes.Buffer, error) {
	if strings.TrimSpace(req.Message) == "" {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message is required")
	}
	if len(req.Message) > MaxCommitMessageBytes {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message is longer than %d bytes", MaxCommitMessageBytes)
	}
	if strings.IndexByte(req.Message, 0) >= 0 {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message contains NUL")
	}
	id := commitIdentity{name: req.AuthorName, email: req.AuthorEmail}
	if id.name == "" {
		id.name = DefaultAuthorName
	}
	if id.email == "" {
		id.email = DefaultAuthorEmail
	}
	for what, v := range map[string]string{"author_name": id.name, "author_email": id.email} {
		if len(v) > MaxIdentityBytes || strings.ContainsAny(v, "<>\n\r\x00") || strings.TrimSpace(v) == "" {
			return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s %q: at most %d bytes, no '<', '>', line breaks or NUL", what, v, MaxIdentityBytes)
		}
	}
	var pathspecs bytes.Buffer
	for _, p := range req.Paths {
		clean, err := sandboxapi.CleanRelPath(p)
		if err != nil {
			return commitIdentity{}, nil, err
		}
		if sandboxapi.IsGitMetadataPath(clean) {
			return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path %q is inside .git", p)
		}
		pathspecs.WriteString(clean)
		pathspecs.WriteByte(0)
	}
	return id, &pathspecs, nil
}

// stageForCommit stages into the real index everything (all) or the
// literal pathspecs (GIT_LITERAL_PATHSPECS=1), then drops the gitlinks the
// agent made (dropNewGitlinks) and puts back the entries of files still as
// checked out (decided before `git add` changes them: the baseline).
// Errors: ErrInvalidWorkspacePath (a pathspec matching no file, or one
// through a symbolic link), ErrRepoLocked, ErrWorkspaceUnavailable.
func (m *Manager) stageForCommit(ctx context.Context, w *wtRepo, all bool, pathspecs *bytes.Buffer) error {
	same, err := m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return err
	}
	if all {
		err = addAll(ctx, w.git)
	} else {
		_, err = w.git.with("GIT_LITERAL_PATHSPECS=1").runIO(ctx, pathspecs, nil, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
	}
	if err != nil {
		if s := gitStderr(err); strings.Contains(s, "did not match any files") {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "no such file: %s", firstLine(s))
		} else if strings.Contains(s, "beyond a symbolic link") {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path goes through a symbolic link: %s", firstLine(s))
		}
		return gitx.Classify(err, "git add", sandboxapi.ErrWorkspaceUnavailable)
	}
	w.forgetStage() // `git add` changed the index
	if err := dropNewGitlinks(ctx, w.git); err != nil {
		return err
	}
	return restoreCheckedOut(ctx, w.git, same)
}

// runCommit runs `git commit` of the staged index with req's message on
// stdin, id as author and committer, dated by Options.Now, hooks and
// signing off (see Commit). Errors: ErrRepoLocked, ErrInsufficientDisk,
// ErrWorkspaceUnavailable.
func (m *Manager) runCommit(ctx context.Context, w *wtRepo, id commitIdentity, req sandboxapi.CommitRequest) error {
	now := m.now()
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	g := w.git.with(
		"GIT_AUTHOR_NAME="+id.name, "GIT_AUTHOR_EMAIL="+id.email, "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME="+id.name, "GIT_COMMITTER_EMAIL="+id.email, "GIT_COMMITTER_DATE="+date,
	)
	args := []string{"commit", "-q", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-"}
	if req.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	if _, err := g.runIO(ctx, strings.NewReader(req.Message), nil, args...); err != nil {
		return gitx.Classify(err, "git commit", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
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
