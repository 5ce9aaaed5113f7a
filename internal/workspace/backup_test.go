package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// fileState is one worktree entry as a test sees it: type, permission bits
// and content (a symlink's target).
type fileState struct {
	Kind    string
	Perm    fs.FileMode
	Content string
}

// worktreeFiles lists every file and symlink under dir except .git and the
// names in skip.
func worktreeFiles(t *testing.T, dir string, skip ...string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return nil
		}
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = fileState{Kind: "symlink", Content: target}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = fileState{Kind: "file", Perm: fi.Mode().Perm(), Content: string(data)}
		}
		return nil
	}))
	return out
}

func newBackups(t *testing.T, f *fixture) *Backups {
	t.Helper()
	b, err := NewBackups(f.m, filepath.Join(f.root, "evicted"))
	require.NoError(t, err)
	return b
}

func write(t *testing.T, dir, rel string, data []byte, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, perm))
	require.NoError(t, os.Chmod(p, perm))
}

func TestBackupRestoreByteForByte(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	req := f.req(sandboxapi.ModeEdit, "conv")
	ws := f.ensure(req)
	wt := ws.LocalPath

	un, err := b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.False(t, un.Any(), "a fresh workspace has nothing to save: %+v", un)

	// A commit that exists nowhere but here (unpushed).
	write(t, wt, "committed.txt", []byte("committed\n"), 0o644)
	f.git(wt, "add", "committed.txt")
	f.git(wt, "commit", "-q", "-m", "agent commit")
	headBefore := f.git(wt, "rev-parse", "HEAD")

	// Every kind of change, including bytes that a clean filter or an
	// end-of-line conversion would alter.
	write(t, wt, ".gitattributes", []byte("* text=auto\n*.txt text eol=lf\n"), 0o644)
	write(t, wt, ".gitignore", []byte("*.log\n"), 0o644)
	write(t, wt, "README.md", []byte("changed\r\nwith CRLF\r\n"), 0o644)
	write(t, wt, "crlf.txt", []byte("a\r\nb\r\nlone\rcr\n"), 0o644)
	write(t, wt, "bin.dat", append([]byte{0xff, 0, 0xfe}, binaryContent...), 0o644)
	require.NoError(t, os.Remove(filepath.Join(wt, "src", "app.go")))
	write(t, wt, "notes/deep/new.md", []byte("untracked\n"), 0o644)
	write(t, wt, "run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	write(t, wt, "secret.txt", []byte("only me\n"), 0o600)
	write(t, wt, "build.log", []byte("ignored\n"), 0o644)
	write(t, wt, "name with spaces and ünïcode.txt", []byte("x"), 0o644)
	require.NoError(t, os.Symlink("README.md", filepath.Join(wt, "link")))
	require.NoError(t, os.Symlink("../outside/target", filepath.Join(wt, "dangling")))
	f.git(wt, "add", "notes/deep/new.md") // staged: the split is not preserved, the content is

	admin := adminDir(loc{bare: f.bare, wt: wt, name: filepath.Base(wt)})
	require.NotEmpty(t, admin)
	indexBefore, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)
	want := worktreeFiles(t, wt, "build.log")

	un, err = b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.True(t, un.Dirty)
	assert.Equal(t, 1, un.UnpushedCommits)

	man, err := b.Backup(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, sandbox.EvictedRef(ws.ID), man.Ref)
	assert.Equal(t, headBefore, man.Head)
	assert.Equal(t, tb+"edits-conv", man.Branch)
	assert.Equal(t, man.Commit, f.git(f.bare, "rev-parse", man.Ref))
	assert.Equal(t, man.Tree, f.git(f.bare, "rev-parse", man.Commit+"^{tree}"))
	assert.Equal(t, headBefore, f.git(f.bare, "rev-parse", man.Commit+"^"), "parent = HEAD keeps unpushed commits reachable")
	assert.Equal(t, map[string]uint32{"secret.txt": 0o600}, man.Modes)
	assert.Equal(t, len(want), man.Files)
	assert.True(t, man.Unsaved.Dirty)
	indexAfter, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)
	assert.Equal(t, indexBefore, indexAfter, "the workspace's own index is never touched")
	assert.Equal(t, "ignored\n", readFile(t, filepath.Join(wt, "build.log")), "backup changes nothing in the worktree")

	patch, err := os.ReadFile(man.PatchPath)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(b.Dir(), ws.ID+".patch"), man.PatchPath)
	assert.Contains(t, string(patch), "GIT binary patch")
	assert.Contains(t, string(patch), "secret.txt")
	assert.NotContains(t, string(patch), "build.log", "ignored files are not saved")
	assert.Contains(t, string(patch), "+a\r\n+b\r\n+lone\rcr\n", "raw bytes, no end-of-line conversion")
	pending, ok, err := b.PendingBackup(ctx, ws)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, man.Commit, pending.Commit)

	// The patch applies onto HEAD in an independent clone and yields the tree.
	clone := filepath.Join(t.TempDir(), "clone")
	f.git(f.bare, "clone", "-q", "--no-checkout", f.bare, clone)
	f.git(clone, "checkout", "-q", "--detach", headBefore)
	f.git(clone, "apply", "--index", "--binary", man.PatchPath)
	assert.Equal(t, man.Tree, f.git(clone, "write-tree"))

	// Evict: the worktree goes, the branch stays; then re-create and restore.
	require.NoError(t, b.CheckRemovable(ctx, ws))
	require.NoError(t, f.m.Remove(ctx, ws))
	assert.NoDirExists(t, wt)
	assert.True(t, f.branchExists(tb+"edits-conv"))
	holds, err := b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	assert.True(t, holds, "the unpushed branch and the backup ref live in the cache")

	ws2 := f.ensure(req)
	assert.Equal(t, headBefore, f.git(ws2.LocalPath, "rev-parse", "HEAD"))
	got, restored, err := b.Restore(ctx, ws2)
	require.NoError(t, err)
	require.True(t, restored)
	require.NotNil(t, got.RestoredAt)
	assert.Equal(t, want, worktreeFiles(t, ws2.LocalPath), "every file's bytes, type and permission bits")
	assert.Empty(t, f.git(ws2.LocalPath, "diff", "--cached", "--name-only"), "the index is left at HEAD")
	assert.Contains(t, f.git(ws2.LocalPath, "status", "--porcelain"), "?? notes/")
	assert.Equal(t, headBefore, f.git(ws2.LocalPath, "rev-parse", "HEAD"))

	_, again, err := b.Restore(ctx, ws2)
	require.NoError(t, err)
	assert.False(t, again, "a restored backup is not restored twice")
	_, ok, err = b.PendingBackup(ctx, ws2)
	require.NoError(t, err)
	assert.False(t, ok)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestBackupOfOnlyUnpushedCommits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeTask, "t1"))
	write(t, ws.LocalPath, "x.txt", []byte("x\n"), 0o644)
	f.git(ws.LocalPath, "add", "x.txt")
	f.git(ws.LocalPath, "commit", "-q", "-m", "x")
	un, err := b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, sandbox.UnsavedWork{Dirty: false, UnpushedCommits: 1}, un)
	man, err := b.Backup(ctx, ws)
	require.NoError(t, err)
	assert.Zero(t, man.PatchBytes, "nothing uncommitted: an empty patch")
	assert.Equal(t, f.git(ws.LocalPath, "rev-parse", "HEAD^{tree}"), man.Tree)

	want := worktreeFiles(t, ws.LocalPath)
	require.NoError(t, f.m.Remove(ctx, ws))
	ws2 := f.ensure(f.req(sandboxapi.ModeTask, "t1"))
	_, restored, err := b.Restore(ctx, ws2)
	require.NoError(t, err)
	assert.True(t, restored)
	assert.Equal(t, want, worktreeFiles(t, ws2.LocalPath))
}

// TestPushedCommitsAreSaved: a commit recorded under refs/sandbox/pushed/ (what
// the push update writes; the push goes to an explicit URL, so origin's
// remote-tracking branches do not move) is no longer unpushed work, neither
// for the workspace nor for its repo cache.
func TestPushedCommitsAreSaved(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	write(t, ws.LocalPath, "x.txt", []byte("x\n"), 0o644)
	f.git(ws.LocalPath, "add", "x.txt")
	f.git(ws.LocalPath, "commit", "-q", "-m", "x")
	un, err := b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, sandbox.UnsavedWork{UnpushedCommits: 1}, un)
	holds, err := b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	assert.True(t, holds)

	f.git(ws.LocalPath, "update-ref", sandbox.PushedRef(ws.ID), "HEAD")
	un, err = b.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, sandbox.UnsavedWork{}, un)
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, 0, st.UnpushedCommits)
	assert.Equal(t, 1, st.CommitsSinceBase)
	holds, err = b.RepoCacheHoldsUnsavedWork(ctx, f.cache)
	require.NoError(t, err)
	assert.False(t, holds)

	// A later commit is unpushed again.
	f.git(ws.LocalPath, "commit", "-q", "--allow-empty", "-m", "y")
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, 1, st.UnpushedCommits)
}

func TestRestoreAnalysisMovesDetachedHead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	req := f.req(sandboxapi.ModeAnalysis, "main")
	ws := f.ensure(req)
	write(t, ws.LocalPath, "scratch.txt", []byte("notes\n"), 0o644)
	want := worktreeFiles(t, ws.LocalPath)
	man, err := b.Backup(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, man.Branch)
	require.NoError(t, f.m.Remove(ctx, ws))

	// main moves on upstream while the workspace is evicted.
	f.writeSrc("README.md", "newer\n")
	f.git(f.src, "commit", "-q", "-am", "c4")
	f.fetch()
	ws2 := f.ensure(req)
	require.NotEqual(t, man.Head, f.git(ws2.LocalPath, "rev-parse", "HEAD"))
	_, restored, err := b.Restore(ctx, ws2)
	require.NoError(t, err)
	assert.True(t, restored)
	assert.Equal(t, man.Head, f.git(ws2.LocalPath, "rev-parse", "HEAD"))
	assert.Equal(t, want, worktreeFiles(t, ws2.LocalPath))
	assert.Equal(t, "?? scratch.txt", f.git(ws2.LocalPath, "status", "--porcelain"))
}

func TestRestoreRefusesWhenTheBranchMoved(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	req := f.req(sandboxapi.ModeEdit, "moved")
	ws := f.ensure(req)
	write(t, ws.LocalPath, "work.txt", []byte("precious\n"), 0o644)
	man, err := b.Backup(ctx, ws)
	require.NoError(t, err)
	require.NoError(t, f.m.Remove(ctx, ws))
	f.git(f.bare, "update-ref", "refs/heads/"+tb+"edits-moved", f.c3)
	ws2 := f.ensure(req)
	_, restored, err := b.Restore(ctx, ws2)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.False(t, restored)
	assert.Contains(t, err.Error(), man.Ref)
	_, ok, err := b.PendingBackup(ctx, ws2)
	require.NoError(t, err)
	assert.True(t, ok, "the backup stays pending")
	assert.Equal(t, man.Commit, f.git(f.bare, "rev-parse", man.Ref))
}

func TestBackupRefusesNestedRepository(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "nested"))
	nested := filepath.Join(ws.LocalPath, "vendor", "lib")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	f.git(nested, "init", "-q")
	write(t, nested, "code.go", []byte("package lib\n"), 0o644)
	_, err := b.Backup(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), "vendor/lib/")
	_, ok, err := b.PendingBackup(ctx, ws)
	require.NoError(t, err)
	assert.False(t, ok, "no manifest for a failed backup")
	assert.FileExists(t, filepath.Join(nested, "code.go"))
}

func TestCheckRemovable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "perm"))
	ro := filepath.Join(ws.LocalPath, "ro")
	write(t, ro, "f.txt", []byte("x"), 0o444)
	require.NoError(t, os.Chmod(ro, 0o555))
	t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })

	if os.Geteuid() != 0 {
		// Our own read-only directories are made writable by Remove.
		require.NoError(t, b.CheckRemovable(ctx, ws))
	}
	// Pretend to be another uid: directories owned by the real owner with no
	// write permission for others cannot be emptied.
	b.euid, b.groups = 4242, []int{4242}
	err := b.CheckRemovable(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceUnavailable)
	assert.Contains(t, err.Error(), "cannot be deleted by uid 4242")
	require.NoError(t, filepath.WalkDir(ws.LocalPath, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			return os.Chmod(p, 0o777)
		}
		return err
	}))
	require.NoError(t, b.CheckRemovable(ctx, ws), "world-writable directories can be emptied by anyone")
	require.NoError(t, os.Chmod(ro, os.ModeSticky|0o777))
	err = b.CheckRemovable(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceUnavailable)
	assert.True(t, strings.Contains(err.Error(), "sticky"), err.Error())

	// The real remover handles read-only directories of its own uid.
	require.NoError(t, os.Chmod(ro, 0o555))
	require.NoError(t, f.m.Remove(ctx, ws))
	assert.NoDirExists(t, ws.LocalPath)
}

func TestCleanCacheHoldsNothing(t *testing.T) {
	f := newFixture(t)
	b := newBackups(t, f)
	f.ensure(f.req(sandboxapi.ModeEdit, "c")) // a branch at an upstream commit: nothing unique
	holds, err := b.RepoCacheHoldsUnsavedWork(context.Background(), f.cache)
	require.NoError(t, err)
	assert.False(t, holds)
	missing := f.cache
	missing.LocalPath = filepath.Join(f.root, "repos", "nope", "x", "y", ".bare")
	require.NoError(t, os.MkdirAll(filepath.Dir(missing.LocalPath), 0o755))
	holds, err = b.RepoCacheHoldsUnsavedWork(context.Background(), missing)
	require.NoError(t, err)
	assert.False(t, holds)
}
