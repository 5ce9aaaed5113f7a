package repocache

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
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
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// mountTmpfs mounts a tmpfs of the given size (e.g. "2m") on a fresh
// directory and unmounts it at the end of the test. Without the privilege to
// mount it skips, unless CI=true.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs (needed for the full-disk test in CI): %v", err)
		}
		t.Skipf("cannot mount a tmpfs here (%v): full-disk test skipped (it runs when CI=true)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestFullDiskDuringClone: a clone that fills the disk is ErrInsufficientDisk,
// leaves nothing at the final path and no staging directory (the space is
// given back), and a cache is never trusted while incomplete.
func TestFullDiskDuringClone(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "2m")
	src := gittest.NewRepo(t, "trunk")
	big := make([]byte, 3<<20) // incompressible: bigger than the whole disk
	_, _ = rand.Read(big)
	require.NoError(t, os.WriteFile(filepath.Join(src, "big.bin"), big, 0o644))
	gittest.Git(t, src, "add", "big.bin")
	gittest.Git(t, src, "commit", "-q", "-m", "big")
	id := parse(t, gittest.FileURL(src))

	c := newCacheAt(t, root, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Ensure(ctx, id, nil, false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrInsufficientDisk), "got %v", err)
	t.Logf("clone on a full disk: %v", err)
	assert.NoDirExists(t, c.Path(id), "nothing at the final path")
	assert.Empty(t, leftovers(t, c), "the staging directory is gone")
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(root, &st))
	assert.Greater(t, st.Bavail*uint64(st.Bsize), uint64(1<<20), "the space was given back")

	// With the big file gone upstream the same root clones fine.
	gittest.Git(t, src, "reset", "-q", "--hard", "HEAD~1")
	gittest.Git(t, src, "reflog", "expire", "--expire=now", "--all")
	gittest.Git(t, src, "gc", "-q", "--prune=now")
	rc, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	assert.Equal(t, "trunk", rc.DefaultBranch)
}

// TestHooksInTheMirrorNeverRun: hooks dropped into the mirror's hooks
// directory (shared by every worktree) never run during fetch.
func TestHooksInTheMirrorNeverRun(t *testing.T) {
	t.Parallel()
	src, id := fileRepo(t)
	c := newCache(t, nil)
	ctx := context.Background()
	_, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "marker")
	hooks := filepath.Join(c.Path(id), "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	for _, h := range []string{"reference-transaction", "post-checkout", "pre-auto-gc", "post-rewrite", "fsmonitor-watchman"} {
		require.NoError(t, os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755))
	}
	gittest.Commit(t, src, "n.txt", "n\n", "new")
	_, err = c.Ensure(ctx, id, nil, true)
	require.NoError(t, err)
	assert.NoFileExists(t, marker)
	// Control: plain git in the mirror runs reference-transaction.
	_, _ = gittest.TryGit(c.Path(id), "update-ref", "refs/heads/x", "refs/remotes/origin/trunk")
	assert.FileExists(t, marker)
}

// TestRedirectInMirrorConfigIsRemoved: an agent's `git config
// url.<evil>.insteadOf <upstream>` (or a remote named like the upstream URL,
// or an uploadpack for origin) in the shared mirror would make the next fetch
// read another repository or run a program; the fetch removes those keys
// (logging a warning) and fetches the real upstream.
func TestRedirectInMirrorConfigIsRemoved(t *testing.T) {
	t.Parallel()
	src, id := fileRepo(t)
	evilSrc := gittest.InitRepo(t, filepath.Join(t.TempDir(), "evil"), "evilbranch")
	var logs bytes.Buffer
	c := newCache(t, nil)
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	_, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	bare := c.Path(id)
	marker := filepath.Join(t.TempDir(), "marker")
	bareGit(t, bare, "config", "url."+gittest.FileURL(evilSrc)+".insteadOf", id.URL)
	bareGit(t, bare, "config", "remote."+id.URL+".url", gittest.FileURL(evilSrc))
	bareGit(t, bare, "config", "remote.origin.uploadpack", "touch "+marker+";git-upload-pack")
	bareGit(t, bare, "config", "filter.lfs.smudge", "touch "+marker)

	want := gittest.Commit(t, src, "n.txt", "n\n", "new")
	_, err = c.Ensure(ctx, id, nil, true)
	require.NoError(t, err)
	assert.Equal(t, want, bareGit(t, bare, "rev-parse", "refs/remotes/origin/trunk"))
	assert.NotContains(t, bareGit(t, bare, "for-each-ref"), "evilbranch")
	cfg := bareGit(t, bare, "config", "--list", "--local")
	assert.NotContains(t, cfg, "insteadof")
	assert.NotContains(t, cfg, "uploadpack")
	assert.NotContains(t, cfg, "remote."+id.URL)
	assert.Contains(t, cfg, "filter.lfs.smudge", "neutralized keys are left alone")
	assert.NoFileExists(t, marker)
	out := logs.String()
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "insteadof")
	assert.NotContains(t, out, "touch "+marker, "values are never logged")
}

// TestStaleLocksInTheMirror: a ref lock left by a dead fetch is removed once
// stale and the fetch retried; a young one is ErrRepoLocked naming the file;
// a stale config.lock never blocks a host-side operation.
func TestStaleLocksInTheMirror(t *testing.T) {
	t.Parallel()
	src, id := fileRepo(t)
	c := newCache(t, nil)
	ctx := context.Background()
	_, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	bare := c.Path(id)
	require.NoError(t, os.WriteFile(filepath.Join(bare, "config.lock"), nil, 0o644))
	lock := filepath.Join(bare, "refs", "remotes", "origin", "trunk.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))

	want := gittest.Commit(t, src, "n.txt", "n\n", "new")
	// A git process running in the mirror may own the young lock.
	live := exec.Command("git", "-C", bare, "hash-object", "--stdin")
	live.Env = gittest.Env()
	liveIn, err := live.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, live.Start())
	_, err = c.Ensure(ctx, id, nil, true)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoLocked), "got %v", err)
	assert.Contains(t, err.Error(), lock)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(lock, old, old))
	_, err = c.Ensure(ctx, id, nil, true)
	require.NoError(t, err, "a lock older than the stale age and open nowhere is removed")
	assert.NoFileExists(t, lock)
	assert.Equal(t, want, bareGit(t, bare, "rev-parse", "refs/remotes/origin/trunk"))
	_ = liveIn.Close()
	_ = live.Wait()

	// No git alive in the repository: a young lock is cleared at once.
	want = gittest.Commit(t, src, "m.txt", "m\n", "newer")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	_, err = c.Ensure(ctx, id, nil, true)
	require.NoError(t, err)
	assert.NoFileExists(t, lock)
	assert.Equal(t, want, bareGit(t, bare, "rev-parse", "refs/remotes/origin/trunk"))
	assert.FileExists(t, filepath.Join(bare, "config.lock"), "a config.lock nothing host-side needs is left alone")
	assert.False(t, strings.Contains(bareGit(t, bare, "config", "--list"), "branch."))
}
