package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestSymlinksAreCommittedAsSymlinks: symlinks an agent makes (pointing out of
// the worktree, absolute or relative, to a file or a directory) are committed
// as symlinks — blobs holding the link text with mode 120000 — and nothing
// behind them is read into the repository.
func TestSymlinksAreCommittedAsSymlinks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside secret\n"), 0o644))
	links := map[string]string{
		"abs-file": filepath.Join(outside, "secret.txt"),
		"abs-dir":  outside,
		"rel-up":   "../../../../..",
		"etc":      "/etc/passwd",
		"dangling": "/nonexistent/x",
	}
	for name, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(ws.LocalPath, name)))
	}
	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "links"})
	require.NoError(t, err)
	tree := f.git(f.bare, "ls-tree", "-r", "--full-tree", res.Commit)
	for name, target := range links {
		var mode, sha string
		for _, line := range strings.Split(tree, "\n") {
			meta, path, _ := strings.Cut(line, "\t")
			if path == name {
				fields := strings.Fields(meta)
				mode, sha = fields[0], fields[2]
			}
		}
		assert.Equal(t, "120000", mode, "%s is committed as a symlink", name)
		assert.Equal(t, target, f.git(f.bare, "cat-file", "-p", sha), "%s: the blob is the link text", name)
	}
	assert.NotContains(t, tree, "secret.txt")
	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.NotContains(t, d.Patch, "outside secret")
	assert.NotContains(t, d.Patch, "root:x:0:0")
}

// TestForeignRepositoryHeadsNeverShow: a directory whose .git points at
// another repository on the host (a .git file, or a .git directory with a
// commondir) would make host-side `git add` record that repository's HEAD
// commit as a gitlink, revealing it in diff and commit. Such gitlinks are
// never recorded; the agent's ordinary files still are.
func TestForeignRepositoryHeadsNeverShow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	foreign := filepath.Join(t.TempDir(), "alice")
	f.git(filepath.Dir(foreign), "init", "-q", foreign)
	f.git(foreign, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-q", "--allow-empty", "-m", "alice's secret work")
	secret := f.git(foreign, "rev-parse", "HEAD")

	require.NoError(t, os.Mkdir(filepath.Join(ws.LocalPath, "leak"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "leak", ".git"), []byte("gitdir: "+filepath.Join(foreign, ".git")+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ws.LocalPath, "leak2", ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "leak2", ".git", "commondir"), []byte(filepath.Join(foreign, ".git")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "leak2", ".git", "HEAD"), []byte("ref: "+f.git(foreign, "symbolic-ref", "HEAD")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "mine.txt"), []byte("mine\n"), 0o644))
	// A .git pointing at a repository without a commit made host-side `add`
	// fail (telling the agent that path exists); it is not even opened now.
	empty := filepath.Join(t.TempDir(), "empty")
	f.git(filepath.Dir(empty), "init", "-q", empty)
	require.NoError(t, os.Mkdir(filepath.Join(ws.LocalPath, "leak3"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "leak3", ".git"), []byte("gitdir: "+filepath.Join(empty, ".git")+"\n"), 0o644))

	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.NotContains(t, d.Patch, secret)
	assert.NotContains(t, d.Patch, "Subproject")
	assert.Contains(t, d.Patch, "+mine")
	assert.NotContains(t, d.Files, "leak")

	// Committing everything would leave them out: refused, naming them
	// (never what they point at); the agent's own files commit by path.
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x"})
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), `"leak/", "leak2/", "leak3/"`)
	assert.NotContains(t, err.Error(), secret)
	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x", Paths: []string{"mine.txt"}})
	require.NoError(t, err)
	tree := f.git(f.bare, "ls-tree", "-r", "--full-tree", res.Commit)
	assert.NotContains(t, tree, secret)
	assert.NotContains(t, tree, "leak")
	assert.Contains(t, tree, "mine.txt")

	// The control: plain git does record alice's commit.
	f.git(ws.LocalPath, "add", "leak")
	assert.Contains(t, f.git(ws.LocalPath, "ls-files", "-s", "leak"), secret)
}

// TestHooksInTheCacheNeverRun: hooks dropped into the repo cache's hooks
// directory (where every worktree's git looks) run for the agent's own git
// but never for host-side calls (core.hooksPath=/dev/null).
func TestHooksInTheCacheNeverRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	hooks := filepath.Join(f.bare, "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	for _, h := range []string{"pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "post-checkout", "reference-transaction", "post-index-change", "pre-auto-gc"} {
		require.NoError(t, os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755))
	}
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1")) // worktree add: post-checkout, reference-transaction
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "x.txt"), []byte("x\n"), 0o644))
	_, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	_, err = f.m.Diff(ctx, ws)
	require.NoError(t, err)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "x"})
	require.NoError(t, err)
	require.NoError(t, f.m.Remove(ctx, ws))
	f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	assert.NoFileExists(t, marker, "a hook ran in host-side git: %s", readMarker(marker))

	// Control: the agent's own git does run them.
	_, _ = f.gitRaw(ws.LocalPath, "commit", "-q", "--allow-empty", "-m", "y")
	assert.Contains(t, readMarker(marker), "pre-commit")
}

// TestPoisonedConfigIsReported: the workspace logs the poisoned variables of
// the repository configuration as a warning, once per set, and reports them
// to the caller in Status.ConfigWarnings (keys, never values).
func TestPoisonedConfigIsReported(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.m.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, st.ConfigWarnings, "a clean configuration")
	f.git(ws.LocalPath, "config", "filter.evil.clean", "touch /tmp/x")
	f.git(ws.LocalPath, "config", "core.fsmonitor", "touch /tmp/x")
	for i := 0; i < 3; i++ {
		st, err := f.m.Status(ctx, ws)
		require.NoError(t, err)
		require.Len(t, st.ConfigWarnings, 2, "%q", st.ConfigWarnings)
		all := strings.Join(st.ConfigWarnings, "\n") // in configuration-file order
		assert.Contains(t, all, `"filter.evil.clean" (local): runs a filter program`)
		assert.Contains(t, all, `"core.fsmonitor" (local): runs a program`)
		assert.NotContains(t, strings.Join(st.ConfigWarnings, "\n"), "touch /tmp/x", "values are never reported")
	}
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "level=WARN"), out)
	assert.Contains(t, out, `filter.evil.clean`)
	assert.Contains(t, out, `core.fsmonitor`)
	assert.NotContains(t, out, "touch /tmp/x", "values are never logged")
}

// TestStaleIndexLock: an index.lock left by a dead process (an agent's git
// killed on timeout, a worker killed mid-commit) blocks nothing once no live
// git could hold it: with a git process running in the worktree it is
// ErrRepoLocked naming the file (until it is StaleLockAge old); once that
// process is gone the next commit clears it at once and succeeds.
func TestStaleIndexLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	lock := filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath), "index.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "n.txt"), []byte("n\n"), 0o644))

	live := exec.Command("git", "-C", ws.LocalPath, "hash-object", "--stdin")
	live.Env = gittest.Env()
	liveIn, err := live.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, live.Start())
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "n"})
	requireKind(t, err, sandboxapi.ErrRepoLocked)
	assert.Contains(t, err.Error(), lock)
	// Status and Diff take no index lock.
	_, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	_, err = f.m.Diff(ctx, ws)
	require.NoError(t, err)
	_ = liveIn.Close()
	_ = live.Wait()

	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "n"})
	require.NoError(t, err, "the young lock no live git holds is cleared on the retry")
	assert.False(t, res.NothingToCommit)
	assert.NoFileExists(t, lock)
}

// crashEnv names the environment of TestWorkspaceCrashHelper.
const crashEnv = "WORKSPACE_CRASH_POINT"

// TestWorkspaceCrashHelper is the body of the child processes of
// TestCrashDuringWorktreeCreation: it runs Ensure and SIGKILLs itself at the
// named point. It does nothing in a normal test run.
func TestWorkspaceCrashHelper(t *testing.T) {
	point := os.Getenv(crashEnv)
	if point == "" {
		return
	}
	var cache sandbox.RepoCache
	var req sandboxapi.WorkspaceRequest
	if err := json.Unmarshal([]byte(os.Getenv("WORKSPACE_CACHE")), &cache); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	if err := json.Unmarshal([]byte(os.Getenv("WORKSPACE_REQ")), &req); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	runner, err := gitx.New(gitx.Options{HomeDir: os.Getenv("WORKSPACE_GIT_HOME")})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	m, err := New(Options{Git: runner, Locker: &testLocker{}, HostID: "host-1"})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	m.crashPoint = func(p, _ string) {
		if p == point {
			fmt.Println("crashing at", p)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
	}
	_, err = m.Ensure(context.Background(), cache, req, nil)
	fmt.Println("finished:", err)
	os.Exit(3)
}

// TestCrashDuringWorktreeCreation: a process SIGKILLed at each point of
// worktree creation leaves a state the next Ensure (another process) repairs:
// the same path, one registration, the agent branch checked out in exactly
// one worktree, a recorded base commit, a working Status, no stray directory.
func TestCrashDuringWorktreeCreation(t *testing.T) {
	for _, point := range []string{"before-add", "added", "recorded"} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t)
			req := f.req(sandboxapi.ModeEdit, "c1")
			cacheJSON, _ := json.Marshal(f.cache)
			reqJSON, _ := json.Marshal(req)
			cmd := exec.Command(os.Args[0], "-test.run=^TestWorkspaceCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+point, "WORKSPACE_CACHE="+string(cacheJSON),
				"WORKSPACE_REQ="+string(reqJSON), "WORKSPACE_GIT_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws, ok := ee.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child must die by SIGKILL at %s: %s", point, out)
			require.Contains(t, string(out), "crashing at "+point)

			got := f.ensure(req)
			assert.Equal(t, filepath.Join(f.worktreesDir(), req.WorktreeDirName()), got.LocalPath)
			assert.Equal(t, f.c2, got.BaseCommit)
			assert.Equal(t, []string{got.LocalPath}, f.registered())
			list := f.git(f.bare, "worktree", "list", "--porcelain")
			assert.Equal(t, 1, strings.Count(list, "branch refs/heads/"+tb+"edits-c1\n")+boolInt(strings.HasSuffix(list, "branch refs/heads/"+tb+"edits-c1")), list)
			st, err := f.m.Status(context.Background(), got)
			require.NoError(t, err)
			assert.False(t, st.Dirty, "%+v", st)
			assert.Equal(t, tb+"edits-c1", st.Branch)
			entries, err := os.ReadDir(f.worktreesDir())
			require.NoError(t, err)
			assert.Len(t, entries, 1)
			assert.Equal(t, got.BaseCommit, readBase(filepath.Join(f.bare, "worktrees", filepath.Base(got.LocalPath))))
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBranchNamespaceCollisions: a new workspace branch that git could not
// hold beside an existing ref fails at Ensure with SandboxConflict naming
// that ref, and changes nothing: an upstream branch "agent" (every agent/…
// branch would fail to push with "cannot lock ref"), an upstream
// agent/edits-c5/x below the new branch, and a local branch made by a
// branch_name override (agent/edits-z/w) below a later conversation z's
// branch. A branch that does not collide, and an existing branch, work.
func TestBranchNamespaceCollisions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// A local override below conversation z's branch.
	over := f.req(sandboxapi.ModeEdit, "y")
	over.BranchName = tb + "edits-z/w"
	f.ensure(over)
	_, err := f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, "z"), nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "holds a branch below it")
	assert.NotContains(t, err.Error(), "edits-z/w", "another workspace's branch is never named")
	assert.False(t, f.branchExists(tb+"edits-z"))
	assert.NoDirExists(t, filepath.Join(f.worktreesDir(), f.req(sandboxapi.ModeEdit, "z").WorktreeDirName()))
	// And the other way round: an override below an existing branch.
	f.ensure(f.req(sandboxapi.ModeEdit, "q"))
	below := f.req(sandboxapi.ModeEdit, "q2")
	below.BranchName = tb + "edits-q/sub"
	_, err = f.m.Ensure(ctx, f.cache, below, nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "named like one of its directories")
	assert.NotContains(t, err.Error(), "refs/heads/")

	// Upstream branches, as last fetched into refs/remotes/origin/*.
	f.git(f.src, "branch", tb+"edits-c5/x")
	f.fetch()
	_, err = f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, "c5"), nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "refs/remotes/origin/"+tb+"edits-c5/x")

	f.git(f.src, "branch", "-D", tb+"edits-c5/x")
	f.git(f.src, "branch", "agent")
	f.git(f.bare, "fetch", "-q", "--prune", f.src, "+refs/heads/*:refs/remotes/origin/*")
	_, err = f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeTask, "t1"), nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "refs/remotes/origin/agent")
	assert.Contains(t, err.Error(), "every agent/… branch collides")
	assert.False(t, f.branchExists(tb+"task-t1"))

	// A prefix ref naming something other than a commit collides too (git
	// holds refs to any object), and a tag named like a branch's prefix
	// ref does not (only the exact ref name counts).
	f.git(f.src, "branch", "-D", "agent")
	f.git(f.bare, "fetch", "-q", "--prune", f.src, "+refs/heads/*:refs/remotes/origin/*")
	blob := strings.TrimSpace(f.git(f.bare, "hash-object", "-w", "--stdin"))
	f.git(f.bare, "update-ref", "refs/remotes/origin/agent", blob)
	_, err = f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeTask, "t2"), nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "refs/remotes/origin/agent")
	assert.False(t, f.branchExists(tb+"task-t2"))
	f.git(f.bare, "update-ref", "-d", "refs/remotes/origin/agent")
	f.git(f.bare, "tag", "refs/heads/agent", blob)
	f.ensure(f.req(sandboxapi.ModeTask, "t2"))
	assert.True(t, f.branchExists(tb+"task-t2"))

	// Existing branches are reused as they are (their pushes report the remote's reason).
	f.ensure(over)
	f.ensure(f.req(sandboxapi.ModeEdit, "q"))
	// Analysis workspaces create no branch.
	f.ensure(f.req(sandboxapi.ModeAnalysis, "main"))
}

// TestRefsPackedAsBranchesAccumulate: every PackRefsEvery-th branch a
// repository's workspaces create packs the bare repository's refs (its
// loose ref files go into packed-refs), and everything reads them as
// before: the branches exist, a later workspace of the same conversation is
// the same workspace, a new branch below a packed one is still refused,
// and a removed workspace comes back on its packed branch.
func TestRefsPackedAsBranchesAccumulate(t *testing.T) {
	f := newFixture(t)
	f.m.packEvery = 3
	ctx := context.Background()
	var made []sandboxapi.Workspace
	for _, c := range []string{"p1", "p2"} {
		made = append(made, f.ensure(f.req(sandboxapi.ModeEdit, c)))
	}
	loose := filepath.Join(f.bare, "refs", "heads", filepath.FromSlash(tb), "edits-p1")
	assert.FileExists(t, loose, "two branches: not packed yet")
	made = append(made, f.ensure(f.req(sandboxapi.ModeEdit, "p3")))
	assert.NoFileExists(t, loose, "the third branch packs the refs")
	packed, err := os.ReadFile(filepath.Join(f.bare, "packed-refs"))
	require.NoError(t, err)
	for _, b := range []string{tb + "edits-p1", tb + "edits-p2", tb + "edits-p3"} {
		assert.Contains(t, string(packed), " refs/heads/"+b+"\n")
		assert.True(t, f.branchExists(b), b)
	}
	again := f.ensure(f.req(sandboxapi.ModeEdit, "p1"))
	assert.Equal(t, made[0].LocalPath, again.LocalPath)
	assert.Equal(t, made[0].BaseCommit, again.BaseCommit)
	below := f.req(sandboxapi.ModeEdit, "p4")
	below.BranchName = tb + "edits-p2/sub"
	_, err = f.m.Ensure(ctx, f.cache, below, nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "named like one of its directories")
	// A removed workspace comes back on its packed branch, base kept.
	require.NoError(t, f.m.Remove(ctx, made[2]))
	back := f.ensure(f.req(sandboxapi.ModeEdit, "p3"))
	assert.Equal(t, tb+"edits-p3", back.BranchName)
	assert.Equal(t, made[2].BaseCommit, back.BaseCommit)
	assert.Equal(t, made[2].BaseCommit, strings.TrimSpace(f.git(back.LocalPath, "rev-parse", "HEAD")))
}
