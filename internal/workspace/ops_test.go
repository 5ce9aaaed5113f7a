package workspace

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.WorkspaceStatus{Branch: tb + "edits-c1", Head: f.c2, BaseCommit: f.c2}, st)

	require.NoError(t, f.m.WriteFile(ctx, ws, "new dir/untracked file.txt", []byte("u\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "README.md", []byte("edited\n"), 0))
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "src", "app.go")))
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	assert.ElementsMatch(t, []sandboxapi.FileStatus{
		{Path: "README.md", Status: " M"},
		{Path: "src/app.go", Status: " D"},
		{Path: "new dir/untracked file.txt", Status: "??"},
	}, st.Files)
	assert.Equal(t, 0, st.CommitsSinceBase)

	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "one"})
	require.NoError(t, err)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "two", AllowEmpty: true})
	require.NoError(t, err)
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.False(t, st.Dirty)
	assert.Equal(t, 2, st.CommitsSinceBase)
}

func TestDiffShowsEverythingAndKeepsIndex(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))

	// A committed change, a staged change, an unstaged change, an untracked
	// text file, an untracked binary file, and an ignored file.
	require.NoError(t, f.m.WriteFile(ctx, ws, "committed.txt", []byte("committed\n"), 0))
	_, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "commit one"})
	require.NoError(t, err)
	require.NoError(t, f.m.WriteFile(ctx, ws, "src/app.go", []byte("package app\n\nfunc Staged() {}\n"), 0))
	f.git(ws.LocalPath, "add", "src/app.go")
	require.NoError(t, f.m.WriteFile(ctx, ws, "README.md", []byte("hello\nworld\nunstaged\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "notes/untracked.txt", []byte("untracked\n"), 0))
	bin := append([]byte("BIN"), binaryContent...)
	require.NoError(t, f.m.WriteFile(ctx, ws, "assets/blob.bin", bin, 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, ".gitignore", []byte("*.log\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "debug.log", []byte("ignored\n"), 0))

	statusBefore := f.git(ws.LocalPath, "status", "--porcelain=v1", "--untracked-files=all")
	indexPath := filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath), "index")
	indexBefore, err := os.ReadFile(indexPath)
	require.NoError(t, err)

	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)

	indexAfter, err := os.ReadFile(indexPath)
	require.NoError(t, err)
	assert.Equal(t, indexBefore, indexAfter, "the real index must not change")
	assert.Equal(t, statusBefore, f.git(ws.LocalPath, "status", "--porcelain=v1", "--untracked-files=all"))
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(indexPath), "sandboxcore-diff-index-*"))
	assert.Empty(t, leftovers)

	assert.Equal(t, f.c2, d.BaseCommit)
	assert.False(t, d.Truncated)
	assert.Equal(t, int64(len(d.Patch)), d.TotalBytes)
	want := []string{".gitignore", "README.md", "assets/blob.bin", "committed.txt", "notes/untracked.txt", "src/app.go"}
	got := append([]string(nil), d.Files...)
	sort.Strings(got)
	assert.Equal(t, want, got)
	assert.NotContains(t, d.Patch, "debug.log")
	assert.Contains(t, d.Patch, "+unstaged")
	assert.Contains(t, d.Patch, "+func Staged() {}")
	assert.Contains(t, d.Patch, "GIT binary patch")

	// The patch reproduces the workspace exactly on top of the base commit.
	check := filepath.Join(t.TempDir(), "check")
	f.git(filepath.Dir(check), "clone", "-q", "--no-checkout", f.src, check)
	f.git(check, "checkout", "-q", "--detach", f.c2)
	patchFile := filepath.Join(t.TempDir(), "p.diff")
	require.NoError(t, os.WriteFile(patchFile, []byte(d.Patch), 0o644))
	f.git(check, "apply", "--binary", patchFile)
	for _, p := range want {
		exp, err := os.ReadFile(filepath.Join(ws.LocalPath, p))
		require.NoError(t, err)
		act, err := os.ReadFile(filepath.Join(check, p))
		require.NoError(t, err)
		assert.Equal(t, exp, act, p)
	}

	// A clean workspace has an empty diff.
	clean := f.ensure(f.req(sandboxapi.ModeEdit, "c2"))
	d, err = f.m.Diff(ctx, clean)
	require.NoError(t, err)
	assert.Empty(t, d.Patch)
	assert.Empty(t, d.Files)
}

func TestDiffTruncates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	line := strings.Repeat("x", 99) + "\n"
	big := []byte(strings.Repeat(line, (sandboxapi.MaxFileBytes-1)/len(line)))
	for _, n := range []string{"a.txt", "b.txt"} {
		require.NoError(t, f.m.WriteFile(ctx, ws, n, big, 0))
	}
	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.True(t, d.Truncated)
	assert.Greater(t, d.TotalBytes, int64(sandboxapi.MaxDiffBytes))
	assert.LessOrEqual(t, len(d.Patch), sandboxapi.MaxDiffBytes)
	assert.True(t, strings.HasSuffix(d.Patch, "\n"))
	assert.Equal(t, []string{"a.txt", "b.txt"}, d.Files)
}

func TestCommit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))

	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "nothing"})
	require.NoError(t, err)
	assert.True(t, res.NothingToCommit)
	assert.Equal(t, f.c2, res.Commit)
	assert.Equal(t, tb+"edits-c1", res.Branch)

	f.m.now = func() time.Time { return time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 2*3600)) }
	msg := "Add feature\n\n#123 is fixed; - not an option\n"
	require.NoError(t, f.m.WriteFile(ctx, ws, "feature.txt", []byte("f\n"), 0))
	res, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: msg})
	require.NoError(t, err)
	assert.False(t, res.NothingToCommit)
	assert.Equal(t, tb+"edits-c1", res.Branch)
	assert.Equal(t, res.Commit, f.git(f.bare, "rev-parse", "refs/heads/"+tb+"edits-c1"))
	assert.Equal(t, strings.TrimSpace(msg), f.git(f.bare, "log", "-1", "--format=%B", tb+"edits-c1"))
	assert.Equal(t, "sandboxcore agent <agent@sandboxcore.invalid>", f.git(f.bare, "log", "-1", "--format=%an <%ae>", tb+"edits-c1"))
	assert.Equal(t, f.c2, f.git(f.bare, "rev-parse", tb+"edits-c1~1"))
	assert.Equal(t, "2024-05-06T07:08:09+02:00 2024-05-06T07:08:09+02:00", f.git(f.bare, "log", "-1", "--format=%aI %cI", tb+"edits-c1"))
	assert.Equal(t, "feature.txt", f.git(f.bare, "show", "--format=", "--name-only", tb+"edits-c1"))

	// Selected paths only, with a custom author; pathspec magic is literal.
	require.NoError(t, f.m.WriteFile(ctx, ws, "a.txt", []byte("a\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "b.txt", []byte("b\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, ":(glob)*", []byte("magic\n"), 0))
	res, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "only a", Paths: []string{"a.txt", ":(glob)*"}, AuthorName: "Ada", AuthorEmail: "ada@example.com"})
	require.NoError(t, err)
	files := strings.Split(f.git(f.bare, "show", "--format=", "--name-only", res.Commit), "\n")
	assert.ElementsMatch(t, []string{":(glob)*", "a.txt"}, files)
	assert.Equal(t, "Ada <ada@example.com>", f.git(f.bare, "log", "-1", "--format=%an <%ae>", res.Commit))
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []sandboxapi.FileStatus{{Path: "b.txt", Status: "??"}}, st.Files)

	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", Paths: []string{"missing.txt"}})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", Paths: []string{"../x"}})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(ws.LocalPath, "link")))
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", Paths: []string{"link/x"}})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "link")))
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "  \n"})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: strings.Repeat("m", MaxCommitMessageBytes+1)})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", AuthorName: "Evil <x@y>"})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	res, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "empty", AllowEmpty: true, Paths: []string{"a.txt"}})
	require.NoError(t, err)
	assert.False(t, res.NothingToCommit)
	assert.Equal(t, "empty", f.git(f.bare, "log", "-1", "--format=%s", tb+"edits-c1"))

	// A detached HEAD is refused rather than committing off-branch.
	f.git(ws.LocalPath, "checkout", "-q", "--detach")
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", AllowEmpty: true})
	requireKind(t, err, sandboxapi.ErrCommandRejected)
}

// TestHostileRepositoryConfigDoesNotRun: an agent controls the worktree, its
// config (shared or per-worktree), .gitattributes and even its .git file.
// Host-side Status, Diff, Commit and Ensure must run none of it.
func TestHostileRepositoryConfigDoesNotRun(t *testing.T) {
	for _, scope := range []string{"shared", "worktree"} {
		t.Run(scope, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
			other := f.ensure(f.req(sandboxapi.ModeEdit, "c2"))

			evil := t.TempDir()
			marker := filepath.Join(evil, "marker")
			script := filepath.Join(evil, "evil.sh")
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat\n"), 0o755))
			hooks := filepath.Join(evil, "hooks")
			require.NoError(t, os.MkdirAll(hooks, 0o755))
			for _, h := range []string{"pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "post-index-change", "reference-transaction", "post-checkout"} {
				require.NoError(t, os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755))
			}
			cfg := []string{"config"}
			if scope == "worktree" {
				f.git(ws.LocalPath, "config", "extensions.worktreeConfig", "true")
				cfg = append(cfg, "--worktree")
			}
			set := func(k, v string) { f.git(ws.LocalPath, append(cfg, k, v)...) }
			set("core.fsmonitor", script)
			set("core.hooksPath", hooks)
			set("filter.evil.clean", script+" clean")
			set("filter.evil.smudge", script+" smudge")
			set("filter.evil.required", "true")
			set("filter.proc.process", script+" process")
			set("diff.external", script)
			set("diff.evil.textconv", script+" textconv")
			set("core.pager", script)
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, ".gitattributes"), []byte("*.txt filter=evil diff=evil\n*.md filter=proc\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "a.txt"), []byte("a\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "README.md"), []byte("changed\n"), 0o644))

			_, err := f.m.Status(ctx, ws)
			require.NoError(t, err)
			_, err = f.m.Diff(ctx, ws)
			require.NoError(t, err)
			res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "with attributes"})
			require.NoError(t, err)
			// Checking out a branch with those attributes (smudge, post-checkout).
			task := f.req(sandboxapi.ModeTask, "t1")
			task.FromBranch = ws.BranchName
			tw := f.ensure(task)
			_, err = f.m.Status(ctx, tw)
			require.NoError(t, err)

			// The .git file of a worktree is redirected to another workspace:
			// host-side git still works on the right one.
			otherAdmin := filepath.Join(f.bare, "worktrees", filepath.Base(other.LocalPath))
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, ".git"), []byte("gitdir: "+otherAdmin+"\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "b.txt"), []byte("b\n"), 0o644))
			res2, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "redirected?"})
			require.NoError(t, err)
			assert.Equal(t, res.Commit, f.git(f.bare, "rev-parse", tb+"edits-c1~1"))
			assert.Equal(t, res2.Commit, f.git(f.bare, "rev-parse", tb+"edits-c1"))
			assert.Equal(t, f.c2, f.git(f.bare, "rev-parse", tb+"edits-c2"), "the other workspace's branch must not move")

			_, err = os.Stat(marker)
			assert.True(t, os.IsNotExist(err), "hostile config ran: %s", readMarker(marker))

			// Control: an unhardened git in the same worktree does run it.
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, ".git"), []byte("gitdir: "+filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath))+"\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "c.txt"), []byte("c\n"), 0o644))
			// (--work-tree: with extensions.worktreeConfig the shared core.bare=true
			// of the cache otherwise makes the agent's own git see a bare repository.)
			_, _ = f.gitRaw(ws.LocalPath, "--work-tree="+ws.LocalPath, "status")
			_, _ = f.gitRaw(ws.LocalPath, "--work-tree="+ws.LocalPath, "add", "-A")
			got := readMarker(marker)
			assert.Contains(t, got, "clean", "control: the clean filter should run without hardening")
			assert.Contains(t, got, "post-index-change", "control: hooks should run without hardening")
		})
	}
}

func readMarker(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// Status reads one porcelain v2 call; its files, HEAD and branch must be
// exactly what porcelain v1, rev-parse and symbolic-ref say, for every kind
// of entry: staged and unstaged changes, deletions, a type change, an
// unmerged path, untracked files (names with spaces, a non-ASCII name, a
// leading "#" that looks like a v2 header), and a detached HEAD.
func TestStatusMatchesPorcelainV1(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "parity"))
	wt := ws.LocalPath
	write := func(rel, content string) {
		p := filepath.Join(wt, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("conflict.txt", "base\n")
	f.git(wt, "add", "conflict.txt")
	f.git(wt, "commit", "-q", "-m", "base")
	f.git(wt, "branch", "other")
	write("conflict.txt", "ours\n")
	f.git(wt, "commit", "-q", "-am", "ours")
	f.git(wt, "checkout", "-q", "other")
	write("conflict.txt", "theirs\n")
	f.git(wt, "commit", "-q", "-am", "theirs")
	f.git(wt, "checkout", "-q", tb+"edits-parity")
	_, err := f.gitRaw(wt, "merge", "-q", "other")
	require.Error(t, err, "the merge conflicts")

	write("staged new.txt", "n\n")
	f.git(wt, "add", "staged new.txt")
	write("README.md", "staged\n")
	f.git(wt, "add", "README.md")
	write("README.md", "and unstaged\n")
	require.NoError(t, os.Remove(filepath.Join(wt, "bin.dat")))
	require.NoError(t, os.Remove(filepath.Join(wt, "src", "app.go")))
	require.NoError(t, os.Symlink("README.md", filepath.Join(wt, "src", "app.go")))
	write("deep/er/untracked file", "u\n")
	write("ünïcode.txt", "u\n")
	write("# branch.oid deadbeef", "tricky\n")

	check := func(ws sandboxapi.Workspace) {
		t.Helper()
		st, err := f.m.Status(ctx, ws)
		require.NoError(t, err)
		out, err := exec.Command("git", "-C", ws.LocalPath, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty").Output()
		require.NoError(t, err)
		want := parsePorcelain(out)
		assert.Equal(t, want, st.Files)
		assert.Equal(t, len(want) > 0, st.Dirty)
		assert.Equal(t, f.git(ws.LocalPath, "rev-parse", "HEAD"), st.Head)
		branch, _ := f.gitRaw(ws.LocalPath, "symbolic-ref", "--quiet", "HEAD")
		assert.Equal(t, strings.TrimPrefix(branch, "refs/heads/"), st.Branch)
	}
	check(ws)
	require.Len(t, func() []sandboxapi.FileStatus { st, _ := f.m.Status(ctx, ws); return st.Files }(), 8)
	an := f.ensure(f.req(sandboxapi.ModeAnalysis, "v1"))
	write2 := filepath.Join(an.LocalPath, "x.txt")
	require.NoError(t, os.WriteFile(write2, []byte("x\n"), 0o644))
	check(an)
}

// TestDiffPatchIsByteExactThroughJSON: the patch travels as a JSON string;
// after a JSON round trip (as every client receives it) it is valid UTF-8
// and `git apply` of it on the base commit reproduces every file byte for
// byte: Latin-1 text ("caf\xe9"), a file whose invalid byte lies outside
// the changed lines, a new and a deleted non-UTF-8 file, a non-UTF-8 file
// name, CRLF lines, no trailing newline, valid UTF-8 and binary files
// together. Valid UTF-8 sections stay text patches.
func TestDiffPatchIsByteExactThroughJSON(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.writeSrc("legacy.txt", "line 1\ncaf\xe9 au lait\nline 3\n")
	f.writeSrc("gone.txt", "bye \xff\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "latin-1 files")
	f.fetch()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	base := ws.BaseCommit

	files := map[string][]byte{
		"latin1.txt":      []byte("caf\xe9\n"),
		"legacy.txt":      []byte("line 1\ncaf\xe9 au lait\nline 3 changed\n"), // the invalid byte is context, or not even that
		"crlf.txt":        []byte("one\r\ntwo\r\n"),
		"nonl.txt":        []byte("no trailing newline"),
		"utf8.txt":        []byte("h\u00e9llo \u2713\n"),
		"README.md":       []byte("hello\nworld\n\xc3\x28 invalid sequence\n"),
		"n\xe9e.txt":      []byte("a name in Latin-1\n"),
		"assets/blob.bin": append([]byte("BIN"), binaryContent...),
		"mixed.txt":       []byte("ok\r\n\xe9\r\nend"),
	}
	for p, b := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws.LocalPath, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, p), b, 0o644))
	}
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "gone.txt")))

	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	wire, err := json.Marshal(d)
	require.NoError(t, err)
	var got sandboxapi.Diff
	require.NoError(t, json.Unmarshal(wire, &got))
	require.True(t, utf8.ValidString(got.Patch), "the patch is valid UTF-8")
	require.Equal(t, d.Patch, got.Patch, "the JSON round trip changes nothing")
	assert.Equal(t, int64(len(got.Patch)), got.TotalBytes)
	assert.False(t, got.Truncated)

	sections := map[string]string{}
	for _, sec := range strings.SplitAfter(got.Patch, "\ndiff --git ") {
		if i := strings.Index(sec, " b/"); i >= 0 {
			name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(sec, "diff --git "), "a/"), " b/")
			sections[name] = sec
		}
	}
	for _, text := range []string{"crlf.txt", "nonl.txt", "utf8.txt"} {
		assert.NotContains(t, sections[text], "GIT binary patch", "%s stays a text patch", text)
	}
	assert.Contains(t, sections["crlf.txt"], "+one\r\n")
	for _, bin := range []string{"latin1.txt", "legacy.txt", "README.md", "gone.txt", "mixed.txt"} {
		assert.Contains(t, sections[bin], "GIT binary patch", "%s is re-encoded", bin)
	}

	check := filepath.Join(t.TempDir(), "check")
	f.git(filepath.Dir(check), "clone", "-q", "--no-checkout", f.src, check)
	f.git(check, "checkout", "-q", "--detach", base)
	patchFile := filepath.Join(t.TempDir(), "p.diff")
	require.NoError(t, os.WriteFile(patchFile, []byte(got.Patch), 0o644))
	f.git(check, "apply", "--binary", patchFile)
	for p, want := range files {
		act, err := os.ReadFile(filepath.Join(check, p))
		require.NoError(t, err, p)
		assert.Equal(t, want, act, "%q byte for byte", p)
	}
	assert.NoFileExists(t, filepath.Join(check, "gone.txt"))
}

// TestCRLFCheckoutIsClean: a repository holding a CRLF file under
// `*.txt text` (committed before the attribute, as real repositories do)
// gives a fresh workspace that status, diff, commit, merge and eviction all
// agree is clean (the checkout baseline); without the baseline git itself
// calls it modified (the control). A real change to that file is a change
// again, committed as git normalises it; an untouched one stays out of commits.
func TestCRLFCheckoutIsClean(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.writeSrc("win.txt", "one\r\ntwo\r\n")
	f.writeSrc("other.txt", "plain\r\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "crlf files")
	f.writeSrc(".gitattributes", "*.txt text\n")
	f.git(f.src, "add", ".gitattributes") // only it: the CRLF blobs stay as committed
	f.git(f.src, "commit", "-q", "-m", "normalise text")
	require.Equal(t, "one\r\ntwo", f.git(f.src, "cat-file", "blob", "HEAD:win.txt"))
	f.fetch()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	raw, err := os.ReadFile(filepath.Join(ws.LocalPath, "win.txt"))
	require.NoError(t, err)
	require.Equal(t, "one\r\ntwo\r\n", string(raw), "checked out as committed")
	assert.Contains(t, f.git(ws.LocalPath, "status", "--porcelain"), "win.txt", "the control: plain git calls the untouched file modified")

	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "status: %v", st.Files)
	assert.Empty(t, st.Files)
	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, d.Patch)
	assert.Empty(t, d.Files)
	c, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "nothing"})
	require.NoError(t, err)
	assert.True(t, c.NothingToCommit, "no line-ending-only commit")
	bk, err := NewBackups(f.m, t.TempDir())
	require.NoError(t, err)
	un, err := bk.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.False(t, un.Any(), "eviction sees a clean workspace")
	mr, err := f.m.Merge(ctx, ws, sandboxapi.MergeRequest{Branches: []string{"dev"}})
	require.NoError(t, err, "merge finds the workspace clean")
	assert.Empty(t, mr.CheckpointCommit)

	// A real change is a change, committed normalised; the untouched file stays out.
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "other.txt"), []byte("plain\r\nmore\r\n"), 0o644))
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []sandboxapi.FileStatus{{Path: "other.txt", Status: " M"}}, st.Files)
	d, err = f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"other.txt"}, d.Files)
	c, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "more"})
	require.NoError(t, err)
	require.False(t, c.NothingToCommit)
	assert.Equal(t, "other.txt", f.git(f.bare, "diff-tree", "--no-commit-id", "--name-only", "-r", c.Commit))
	assert.Equal(t, "plain\nmore\n", f.git(f.bare, "cat-file", "blob", c.Commit+":other.txt")+"\n", "committed as git normalises it")
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "after the commit: %v", st.Files)

	// A change that keeps the bytes but not the mode is a change too.
	require.NoError(t, os.Chmod(filepath.Join(ws.LocalPath, "win.txt"), 0o755))
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.True(t, st.Dirty)

	// A workspace without the record (made before it existed) is what git says.
	ws2 := f.ensure(f.req(sandboxapi.ModeEdit, "c2"))
	require.NoError(t, os.Remove(filepath.Join(f.bare, "worktrees", filepath.Base(ws2.LocalPath), BaselineFile)))
	st, err = f.m.Status(ctx, ws2)
	require.NoError(t, err)
	assert.True(t, st.Dirty, "the control: without the baseline the untouched CRLF file is modified")
}
