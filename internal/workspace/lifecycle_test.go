package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// dirtyEverything changes a worktree in every way a checkpoint must record:
// a modified tracked file (CRLF bytes), a deleted one, untracked files deep
// down, modes git records (0755) and ones it does not (0600), a symlink,
// and an ignored file (not recorded).
func dirtyEverything(t *testing.T, wt, tag string) {
	t.Helper()
	write(t, wt, ".gitignore", []byte("*.log\n"), 0o644)
	write(t, wt, "README.md", []byte("changed "+tag+"\r\n"), 0o644)
	require.NoError(t, os.Remove(filepath.Join(wt, "src", "app.go")))
	write(t, wt, "notes/deep/"+tag+".md", []byte("untracked "+tag+"\n"), 0o644)
	write(t, wt, "run.sh", []byte("#!/bin/sh\necho "+tag+"\n"), 0o755)
	write(t, wt, "secret.txt", []byte("only me "+tag+"\n"), 0o600)
	write(t, wt, "build.log", []byte("ignored "+tag+"\n"), 0o644)
	_ = os.Remove(filepath.Join(wt, "link"))
	require.NoError(t, os.Symlink("README.md", filepath.Join(wt, "link")))
}

func TestCheckpointRollbackAndUndo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "conv"))
	wt := ws.LocalPath

	// State A: one agent commit and every kind of uncommitted change.
	write(t, wt, "committed.txt", []byte("committed\n"), 0o644)
	f.git(wt, "add", "committed.txt")
	f.git(wt, "commit", "-q", "-m", "agent commit")
	headA := f.git(wt, "rev-parse", "HEAD")
	dirtyEverything(t, wt, "A")
	f.git(wt, "add", "notes") // staged: content recorded, the split is not
	admin := adminDir(loc{bare: f.bare, wt: wt, name: filepath.Base(wt)})
	indexBefore, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)
	stateA := worktreeFiles(t, wt, "build.log")

	cp1, err := b.Checkpoint(ctx, ws, "state A")
	require.NoError(t, err)
	assert.Equal(t, 1, cp1.ID)
	assert.Equal(t, "state A", cp1.Label)
	assert.Equal(t, headA, cp1.Head)
	assert.Equal(t, tb+"edits-conv", cp1.Branch)
	assert.Equal(t, sandboxapi.CheckpointRef(ws.ID, 1), cp1.Ref)
	assert.Equal(t, cp1.Commit, f.git(f.bare, "rev-parse", cp1.Ref))
	assert.Equal(t, headA, f.git(f.bare, "rev-parse", cp1.Commit+"^"), "parent = HEAD")
	// README.md, src/app.go, .gitignore, notes/deep/A.md, run.sh, secret.txt, link.
	assert.Equal(t, 7, cp1.FilesChanged)
	assert.False(t, cp1.CreatedAt.IsZero())
	indexAfter, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)
	assert.Equal(t, indexBefore, indexAfter, "a checkpoint never touches the index")
	assert.Equal(t, stateA, worktreeFiles(t, wt, "build.log"), "nor the files")
	assert.Equal(t, headA, f.git(wt, "rev-parse", "HEAD"), "nor the branch")

	un, err := b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.True(t, un.Dirty && un.Checkpointed, "the worktree is exactly its newest checkpoint: %+v", un)
	assert.True(t, un.NeedsBackup())
	assert.Equal(t, 1, un.UnpushedCommits)

	// State B: another commit, other changes, a file deleted and one re-moded.
	f.git(wt, "add", "-A")
	f.git(wt, "commit", "-q", "-m", "B commit")
	headB := f.git(wt, "rev-parse", "HEAD")
	require.NoError(t, os.Remove(filepath.Join(wt, "committed.txt")))
	write(t, wt, "b-only.txt", []byte("B\n"), 0o640)
	require.NoError(t, os.Chmod(filepath.Join(wt, "secret.txt"), 0o644))
	un, err = b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.False(t, un.Checkpointed, "changed since the checkpoint")
	stateB := worktreeFiles(t, wt, "build.log")

	res, err := b.Rollback(ctx, ws, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Checkpoint.ID)
	assert.Equal(t, 2, res.Undo.ID, "the state left is checkpointed first")
	assert.Equal(t, headB, res.Undo.Head)
	assert.Equal(t, headA, res.Head)
	assert.Equal(t, stateA, worktreeFiles(t, wt, "build.log"), "bytes, modes, deletions and untracked files of A")
	assert.Equal(t, headA, f.git(wt, "rev-parse", "HEAD"), "the branch head of A")
	assert.Equal(t, tb+"edits-conv", f.git(wt, "symbolic-ref", "--short", "HEAD"))
	assert.Equal(t, headA, f.git(f.bare, "rev-parse", "refs/heads/"+tb+"edits-conv"))
	assert.Empty(t, f.git(wt, "diff", "--cached", "--name-only"), "the index is reset to HEAD")
	write(t, wt, "build.log", []byte("ignored, written after B\n"), 0o644)
	assert.Equal(t, headB, f.git(f.bare, "rev-parse", res.Undo.Commit+"^"), "B's commit stays reachable through the undo checkpoint")

	// Undo the rollback.
	res2, err := b.Rollback(ctx, ws, res.Undo.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, res2.Undo.ID)
	assert.Equal(t, stateB, worktreeFiles(t, wt, "build.log"))
	assert.Equal(t, headB, f.git(wt, "rev-parse", "HEAD"))
	assert.Equal(t, "ignored, written after B\n", readFile(t, filepath.Join(wt, "build.log")), "ignored files are left alone")

	list, err := b.Checkpoints(ctx, ws)
	require.NoError(t, err)
	require.Len(t, list, 3)
	for i, cp := range list {
		assert.Equal(t, i+1, cp.ID)
	}
	assert.Equal(t, "before rollback to checkpoint 1", list[1].Label)

	_, err = b.Rollback(ctx, ws, 42)
	requireKind(t, err, sandboxapi.ErrNotFound)

	// A merge left in progress by the agent is never thrown away.
	require.NoError(t, os.WriteFile(filepath.Join(admin, "MERGE_HEAD"), []byte(headA+"\n"), 0o644))
	before := worktreeFiles(t, wt)
	_, err = b.Rollback(ctx, ws, 1)
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Equal(t, before, worktreeFiles(t, wt), "nothing changed")
	assert.Equal(t, headB, f.git(wt, "rev-parse", "HEAD"))
	list, err = b.Checkpoints(ctx, ws)
	require.NoError(t, err)
	assert.Len(t, list, 3, "not even the undo checkpoint is taken")
	require.NoError(t, os.Remove(filepath.Join(admin, "MERGE_HEAD")))
	_, err = b.Checkpoint(ctx, ws, "two\nlines")
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	holds, err := b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	assert.True(t, holds)
}

// A checkpoint is the only place some work lives: eviction's repo cache
// check sees it, and the worktree's removal does not lose it.
func TestCheckpointIsSavedWorkForEviction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeTask, "t1"))
	holds, err := b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	require.False(t, holds, "the fresh task branch is at the remote's main")
	write(t, ws.LocalPath, "only-here.txt", []byte("precious\n"), 0o644)
	cp, err := b.Checkpoint(ctx, ws, "")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "only-here.txt")))
	un, err := b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.False(t, un.Any(), "clean now: the work lives in the checkpoint")
	require.NoError(t, f.m.Remove(ctx, ws))
	holds, err = b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	assert.True(t, holds, "a checkpoint holds commits no remote has: the cache stays")
	assert.Equal(t, "precious\n", f.git(f.bare, "cat-file", "blob", cp.Commit+":only-here.txt")+"\n")
}

func TestRollbackOfDetachedCheckpointAndHostileRefs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "det"))
	wt := ws.LocalPath
	f.git(wt, "checkout", "-q", "--detach", f.c1)
	write(t, wt, "x.txt", []byte("x\n"), 0o644)
	cp, err := b.Checkpoint(ctx, ws, "detached")
	require.NoError(t, err)
	assert.Empty(t, cp.Branch)
	f.git(wt, "checkout", "-q", tb+"edits-det")
	require.NoError(t, os.Remove(filepath.Join(wt, "x.txt")))
	_, err = b.Rollback(ctx, ws, cp.ID)
	require.NoError(t, err)
	assert.Equal(t, f.c1, f.git(wt, "rev-parse", "HEAD"))
	_, err = f.gitRaw(wt, "symbolic-ref", "-q", "HEAD")
	assert.Error(t, err, "detached again")
	assert.Equal(t, f.c2, f.git(f.bare, "rev-parse", "refs/heads/"+tb+"edits-det"), "the branch was not moved")

	// Refs that are not checkpoints of ours are ignored, never trusted.
	f.git(f.bare, "update-ref", sandboxapi.CheckpointRefPrefix+ws.ID+"/007", cp.Commit)
	f.git(f.bare, "update-ref", sandboxapi.CheckpointRefPrefix+ws.ID+"/9", f.c1) // not a checkpoint commit
	list, err := b.Checkpoints(ctx, ws)
	require.NoError(t, err)
	var ids []int
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	assert.Equal(t, []int{1, 2}, ids, "the rollback's undo checkpoint, and the two forged refs skipped")
	_, err = b.Rollback(ctx, ws, 9)
	requireKind(t, err, sandboxapi.ErrWorkspaceUnavailable)
}

func TestForkManifestIsWrittenIntoTheNewWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	src := f.ensure(f.req(sandboxapi.ModeEdit, "src"))
	write(t, src.LocalPath, "committed.txt", []byte("c\n"), 0o644)
	f.git(src.LocalPath, "add", "-A")
	f.git(src.LocalPath, "commit", "-q", "-m", "c")
	head := f.git(src.LocalPath, "rev-parse", "HEAD")
	dirtyEverything(t, src.LocalPath, "S")
	want := worktreeFiles(t, src.LocalPath, "build.log")

	treq := sandboxapi.ForkInput{TaskID: "forked"}.Request("u1", "p1", "https://example.com/owner/repo", head)
	target := sandbox.ForkTarget{ID: sandboxapi.WorkspaceIDForKey(treq.Key()), Branch: treq.Branch(), OpID: "op-1"}
	cp, fm, err := b.PrepareFork(ctx, src, target)
	require.NoError(t, err)
	assert.Equal(t, "fork to "+target.ID, cp.Label)
	assert.Equal(t, head, fm.Head)
	assert.Equal(t, want, worktreeFiles(t, src.LocalPath, "build.log"), "the source is not changed")
	again, _, err := b.PrepareFork(ctx, src, target)
	require.NoError(t, err)
	assert.Equal(t, cp.ID, again.ID, "a retried fork reuses its checkpoint")

	dst := f.ensure(treq)
	assert.Equal(t, head, f.git(dst.LocalPath, "rev-parse", "HEAD"))
	got, ok, err := b.ApplyFork(ctx, dst)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, got.ConsumedAt)
	assert.Equal(t, want, worktreeFiles(t, dst.LocalPath), "uncommitted and untracked files, modes; not the ignored one")
	assert.Equal(t, tb+"task-forked", f.git(dst.LocalPath, "symbolic-ref", "--short", "HEAD"))
	assert.Empty(t, f.git(dst.LocalPath, "diff", "--cached", "--name-only"), "as uncommitted changes")
	st, err := f.m.Status(ctx, dst)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	_, ok, err = b.ApplyFork(ctx, dst)
	require.NoError(t, err)
	assert.True(t, ok, "a consumed fork manifest still names its source")

	// The two diverge.
	write(t, dst.LocalPath, "only-fork.txt", []byte("f\n"), 0o644)
	assert.NoFileExists(t, filepath.Join(src.LocalPath, "only-fork.txt"))

	// A second fork to the same key conflicts: its branch exists.
	_, _, err = b.PrepareFork(ctx, src, sandbox.ForkTarget{ID: target.ID, Branch: target.Branch, OpID: "op-2"})
	requireKind(t, err, sandboxapi.ErrConflict)
}

func TestDestroyBackupDiscardAndRestoreIntoAFreshWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	req := f.req(sandboxapi.ModeEdit, "gone")
	ws := f.ensure(req)
	wt := ws.LocalPath
	write(t, wt, "committed.txt", []byte("c\n"), 0o644)
	f.git(wt, "add", "-A")
	f.git(wt, "commit", "-q", "-m", "unpushed")
	head := f.git(wt, "rev-parse", "HEAD")
	dirtyEverything(t, wt, "D")
	want := worktreeFiles(t, wt, "build.log")
	_, err := b.Checkpoint(ctx, ws, "kept")
	require.NoError(t, err)

	man, saved, err := b.SaveForDestroy(ctx, ws)
	require.NoError(t, err)
	require.True(t, saved)
	assert.Equal(t, sandboxapi.DestroyedRef(ws.ID), man.Ref)
	assert.Equal(t, ws.BaseCommit, man.BaseCommit)
	assert.FileExists(t, man.PatchPath)
	assert.True(t, strings.HasPrefix(man.PatchPath, filepath.Join(b.Dir(), "destroyed")))
	require.NoError(t, f.m.Remove(ctx, ws))
	require.NoError(t, b.DeleteBranch(ctx, ws))
	assert.False(t, f.branchExists(tb+"edits-gone"))
	_, _, err = b.SaveForDestroy(ctx, ws)
	requireKind(t, err, sandboxapi.ErrConflict) // the earlier destroy backup is never overwritten

	// A fresh workspace of the key starts at the base; its own eviction
	// backups live apart from the destroy backup.
	fresh := f.ensure(req)
	assert.Equal(t, f.c2, f.git(fresh.LocalPath, "rev-parse", "HEAD"))
	pending, ok, err := b.PendingDestroyed(ctx, fresh)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, man.Commit, pending.Commit)

	got, ok, err := b.RestoreDestroyed(ctx, fresh)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want, worktreeFiles(t, fresh.LocalPath, "build.log"), "byte for byte, with modes and deletions")
	assert.Equal(t, head, f.git(fresh.LocalPath, "rev-parse", "HEAD"), "the unpushed commit is back on the branch")
	assert.Equal(t, got.BaseCommit, readBase(adminDir(loc{bare: f.bare, wt: fresh.LocalPath, name: filepath.Base(fresh.LocalPath)})))
	_, err = f.gitRaw(f.bare, "rev-parse", "--verify", "-q", got.Ref)
	assert.Error(t, err, "the destroy backup ref is dropped once restored")
	_, ok, err = b.PendingDestroyed(ctx, fresh)
	require.NoError(t, err)
	assert.False(t, ok)

	// Discard drops checkpoints, backups and fork manifests.
	require.NoError(t, b.Discard(ctx, fresh))
	list, err := b.Checkpoints(ctx, fresh)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.NoFileExists(t, man.PatchPath)
}

func TestRestoreDestroyedNeedsAFreshWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	req := f.req(sandboxapi.ModeTask, "busy")
	ws := f.ensure(req)
	write(t, ws.LocalPath, "work.txt", []byte("w\n"), 0o644)
	_, saved, err := b.SaveForDestroy(ctx, ws)
	require.NoError(t, err)
	require.True(t, saved)
	require.NoError(t, f.m.Remove(ctx, ws))
	require.NoError(t, b.DeleteBranch(ctx, ws))
	fresh := f.ensure(req)
	write(t, fresh.LocalPath, "new.txt", []byte("n\n"), 0o644)
	_, _, err = b.RestoreDestroyed(ctx, fresh)
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Equal(t, "n\n", readFile(t, filepath.Join(fresh.LocalPath, "new.txt")), "nothing was touched")
	_, ok, err := b.PendingDestroyed(ctx, fresh)
	require.NoError(t, err)
	assert.True(t, ok, "the backup stays pending")
}

func TestSaveForDestroyAdoptsAnEvictionBackup(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "ev"))
	write(t, ws.LocalPath, "work.txt", []byte("w\n"), 0o600)
	man, err := b.Backup(ctx, ws)
	require.NoError(t, err)
	require.NoError(t, f.m.Remove(ctx, ws))
	ws.State = sandboxapi.WorkspaceEvicted
	got, saved, err := b.SaveForDestroy(ctx, ws)
	require.NoError(t, err)
	require.True(t, saved)
	assert.Equal(t, man.Commit, got.Commit)
	assert.Equal(t, sandboxapi.DestroyedRef(ws.ID), got.Ref)
	assert.Equal(t, man.Commit, f.git(f.bare, "rev-parse", got.Ref))
	_, err = f.gitRaw(f.bare, "rev-parse", "--verify", "-q", sandbox.EvictedRef(ws.ID))
	assert.Error(t, err, "moved, not copied")
	assert.FileExists(t, got.PatchPath)
	assert.NoFileExists(t, man.PatchPath)
	_, ok, err := b.PendingBackup(ctx, ws)
	require.NoError(t, err)
	assert.False(t, ok)
}
