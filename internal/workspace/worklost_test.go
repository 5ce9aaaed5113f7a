package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Ways work could be silently lost or stranded, each shown not to happen,
// with real git: a rollback cut short by a crash, a nested repository in
// the worktree, worktree metadata broken from inside.

// crashAt makes f's manager panic at the named crash point (a crash: nothing
// after it runs) and returns a function that runs op expecting that crash.
func crashAt(t *testing.T, f *fixture, point string) func(op func()) {
	t.Helper()
	f.m.crashPoint = func(p, _ string) {
		if p == point {
			panic("crash at " + p)
		}
	}
	return func(op func()) {
		t.Helper()
		require.PanicsWithValue(t, "crash at "+point, op)
		f.m.crashPoint = nil
	}
}

// TestRollbackInterruptedByACrashKeepsTheStateBeforeAsItsUndo: a rollback
// that dies after moving HEAD (the files still the old state's) and is run
// again reports as its undo point the state before the first attempt, not
// the half-rolled-back one, and rolling back to that undo point brings the
// state before back exactly.
func TestRollbackInterruptedByACrashKeepsTheStateBeforeAsItsUndo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "conv"))
	wt := ws.LocalPath

	dirtyEverything(t, wt, "A")
	headA := f.git(wt, "rev-parse", "HEAD")
	stateA := worktreeFiles(t, wt, "build.log")
	cp1, err := b.Checkpoint(ctx, ws, "A")
	require.NoError(t, err)

	f.git(wt, "add", "-A")
	f.git(wt, "commit", "-q", "-m", "B commit")
	headB := f.git(wt, "rev-parse", "HEAD")
	write(t, wt, "b-only.txt", []byte("B\n"), 0o640)
	stateB := worktreeFiles(t, wt, "build.log")

	crashAt(t, f, "rollback-moved")(func() { _, _ = b.Rollback(ctx, ws, cp1.ID) })
	assert.Equal(t, headA, f.git(wt, "rev-parse", "HEAD"), "the crash left HEAD moved, the files not")

	res, err := b.Rollback(ctx, ws, cp1.ID)
	require.NoError(t, err)
	assert.Equal(t, stateA, worktreeFiles(t, wt, "build.log"))
	assert.Equal(t, 2, res.Undo.ID, "the undo point is the state before the interrupted rollback")
	assert.Equal(t, headB, res.Undo.Head)
	list, err := b.Checkpoints(ctx, ws)
	require.NoError(t, err)
	assert.Len(t, list, 2, "the half-rolled-back state is no checkpoint of its own")
	assert.NoFileExists(t, filepath.Join(adminDir(loc{bare: f.bare, wt: wt, name: filepath.Base(wt)}), RollbackMarkerFile))

	back, err := b.Rollback(ctx, ws, res.Undo.ID)
	require.NoError(t, err)
	assert.Equal(t, stateB, worktreeFiles(t, wt, "build.log"), "undo brings back the state before, byte for byte")
	assert.Equal(t, headB, f.git(wt, "rev-parse", "HEAD"))
	assert.Equal(t, 3, back.Undo.ID, "a rollback that was not interrupted checkpoints the state it leaves")

	// A marker left by a crash is stale once the worktree changed since:
	// the state as it is now is the undo point, and nothing is lost.
	crashAt(t, f, "rollback-moved")(func() { _, _ = b.Rollback(ctx, ws, cp1.ID) })
	write(t, wt, "written-after-the-crash.txt", []byte("new work\n"), 0o644)
	now := worktreeFiles(t, wt, "build.log")
	res, err = b.Rollback(ctx, ws, cp1.ID)
	require.NoError(t, err)
	assert.Equal(t, stateA, worktreeFiles(t, wt, "build.log"))
	_, err = b.Rollback(ctx, ws, res.Undo.ID)
	require.NoError(t, err)
	assert.Equal(t, now, worktreeFiles(t, wt, "build.log"), "the work written after the crash is the undo point")
	_ = os.Remove
}

// TestNestedRepositoryRefusedAlikeByCommitCheckpointDestroyAndEviction: a
// nested git repository the agent made in the worktree (untracked, or staged
// with its own `git add` as a gitlink) cannot be held by a commit, a
// checkpoint or a backup: commit, checkpoint, destroy's save and eviction's
// backup all refuse with the same WorkspaceDirty error naming it, change
// nothing, and lose nothing; a commit of other paths goes through.
func TestNestedRepositoryRefusedAlikeByCommitCheckpointDestroyAndEviction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "nested"))
	wt := ws.LocalPath
	write(t, wt, "mine.txt", []byte("mine\n"), 0o644)
	nested := filepath.Join(wt, "vendor", "lib")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	f.git(nested, "init", "-q")
	write(t, nested, "code.go", []byte("package lib\n"), 0o644)
	f.git(nested, "add", "code.go")
	f.git(nested, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-q", "-m", "nested work")
	head := f.git(wt, "rev-parse", "HEAD")

	refusals := func(tag string) {
		t.Helper()
		before := worktreeFiles(t, wt)
		_, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "all"})
		requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
		assert.Contains(t, err.Error(), `"vendor/lib/"`, tag+": commit names it")
		_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "the directory", Paths: []string{"vendor"}})
		requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
		_, err = b.Checkpoint(ctx, ws, "")
		requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
		assert.Contains(t, err.Error(), `"vendor/lib/"`, tag+": checkpoint names it")
		_, _, err = b.SaveForDestroy(ctx, ws)
		requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
		assert.Contains(t, err.Error(), `"vendor/lib/"`, tag+": destroy names it")
		_, err = b.Backup(ctx, ws)
		requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
		assert.Contains(t, err.Error(), `"vendor/lib/"`, tag+": eviction names it")
		assert.Equal(t, head, f.git(wt, "rev-parse", "HEAD"), tag+": nothing committed")
		assert.Equal(t, before, worktreeFiles(t, wt), tag+": nothing changed")
		cps, err := b.Checkpoints(ctx, ws)
		require.NoError(t, err)
		assert.Empty(t, cps, tag)
	}
	refusals("untracked")

	// The agent's own `git add` makes it a gitlink: only its commit id
	// would be kept, never its files.
	f.git(wt, "add", "vendor/lib")
	require.Contains(t, f.git(wt, "ls-files", "-s", "vendor/lib"), "160000")
	refusals("staged")
	f.git(wt, "rm", "-q", "-f", "--cached", "vendor/lib")

	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "mine only", Paths: []string{"mine.txt"}})
	require.NoError(t, err, "paths that hold no nested repository commit")
	assert.Equal(t, "mine.txt", f.git(wt, "show", "--format=", "--name-only", res.Commit))
	assert.FileExists(t, filepath.Join(nested, "code.go"))
	assert.Equal(t, "nested work", f.git(nested, "log", "-1", "--format=%s"))

	// Once the agent moves it out of the workspace, everything saves.
	require.NoError(t, os.Rename(filepath.Join(wt, "vendor"), filepath.Join(t.TempDir(), "vendor")))
	_, err = b.Checkpoint(ctx, ws, "")
	require.NoError(t, err)
}

// TestWorktreeMetadataIsRepairedOnEveryOperation: the agent deleting or
// overwriting the worktree's .git file, a `git worktree prune` on the
// repository after that, or a corrupted back-pointer never strands the
// workspace: the next host operation (or acquire) repairs the metadata, the
// agent's own git works again, and every file of the worktree — the
// agent's commits, modified and untracked files — survives.
func TestWorktreeMetadataIsRepairedOnEveryOperation(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*fixture, sandboxapi.WorkspaceRequest, sandboxapi.Workspace, map[string]fileState, string) {
		f := newFixture(t)
		req := f.req(sandboxapi.ModeEdit, "meta")
		ws := f.ensure(req)
		ws.State = sandboxapi.WorkspaceReady
		wt := ws.LocalPath
		write(t, wt, "committed.txt", []byte("committed\n"), 0o644)
		f.git(wt, "add", "committed.txt")
		f.git(wt, "commit", "-q", "-m", "agent commit")
		write(t, wt, "README.md", []byte("modified, not committed\n"), 0o644)
		write(t, wt, "notes/untracked.md", []byte("untracked\n"), 0o600)
		return f, req, ws, worktreeFiles(t, wt), f.git(wt, "rev-parse", "HEAD")
	}
	check := func(t *testing.T, f *fixture, ws sandboxapi.Workspace, files map[string]fileState, head string) {
		t.Helper()
		st, err := f.m.Status(ctx, ws)
		require.NoError(t, err, "the operation repairs the metadata first")
		assert.True(t, st.Dirty)
		wt := ws.LocalPath
		assert.Equal(t, head, f.git(wt, "rev-parse", "HEAD"), "the agent's git works again, on its commit")
		assert.Equal(t, ws.BranchName, f.git(wt, "symbolic-ref", "--short", "HEAD"))
		if files != nil {
			assert.Equal(t, files, worktreeFiles(t, wt), "every file survives")
		}
		assert.Contains(t, f.git(wt, "status", "--porcelain"), "M README.md")
		assert.Equal(t, []string{wt}, f.registered())
		d, err := f.m.Diff(ctx, ws)
		require.NoError(t, err)
		assert.Contains(t, d.Patch, "+modified, not committed")
		assert.Contains(t, d.Patch, "+untracked")
	}
	gitFile := func(ws sandboxapi.Workspace) string { return filepath.Join(ws.LocalPath, ".git") }

	t.Run("deleted", func(t *testing.T) {
		f, _, ws, files, head := setup(t)
		require.NoError(t, os.Remove(gitFile(ws)))
		check(t, f, ws, files, head)
	})
	t.Run("overwritten", func(t *testing.T) {
		f, _, ws, files, head := setup(t)
		require.NoError(t, os.WriteFile(gitFile(ws), []byte("gitdir: /nowhere\n"), 0o644))
		check(t, f, ws, files, head)
	})
	t.Run("pruned", func(t *testing.T) {
		f, _, ws, files, head := setup(t)
		require.NoError(t, os.Remove(gitFile(ws)))
		f.git(f.bare, "worktree", "prune")
		require.Empty(t, f.registered(), "prune dropped the registration")
		check(t, f, ws, files, head)
	})
	t.Run("pruned, then acquired", func(t *testing.T) {
		f, req, ws, files, head := setup(t)
		require.NoError(t, os.Remove(gitFile(ws)))
		f.git(f.bare, "worktree", "prune")
		got, err := f.m.Ensure(ctx, f.cache, req, &ws)
		require.NoError(t, err, "acquire registers the worktree again, never SandboxConflict")
		assert.Equal(t, ws.LocalPath, got.LocalPath)
		assert.Equal(t, ws.BaseCommit, got.BaseCommit)
		check(t, f, ws, files, head)
	})
	t.Run("back-pointer corrupted", func(t *testing.T) {
		f, _, ws, files, head := setup(t)
		f.git(ws.LocalPath, "add", "notes/untracked.md")
		admin := adminDir(loc{bare: f.bare, wt: ws.LocalPath, name: filepath.Base(ws.LocalPath)})
		require.NoError(t, os.WriteFile(filepath.Join(admin, "gitdir"), []byte("garbage\n"), 0o644))
		check(t, f, ws, files, head)
		assert.Contains(t, f.git(ws.LocalPath, "status", "--porcelain"), "A  notes/untracked.md", "HEAD and index are kept")
	})
	t.Run("replaced by the agent's repository", func(t *testing.T) {
		f, _, ws, files, head := setup(t)
		require.NoError(t, os.Remove(gitFile(ws)))
		f.git(ws.LocalPath, "init", "-q")
		check(t, f, ws, nil, head)
		assert.Equal(t, files["README.md"], worktreeFiles(t, ws.LocalPath)["README.md"])
		matches, _ := filepath.Glob(filepath.Join(ws.LocalPath, ".git.agent-*", "HEAD"))
		assert.Len(t, matches, 1, "the agent's .git directory is moved aside, not deleted")
	})
}
