package depcache

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// setupOutput makes a worktree whose setup produced node_modules (files,
// an executable, a nested directory, a relative and an absolute symbolic
// link, a fifo) and sub/.venv.
func setupOutput(t *testing.T) string {
	t.Helper()
	wt := t.TempDir()
	for p, data := range map[string]string{
		"node_modules/a/index.js":       "module.exports = 1\n",
		"node_modules/a/package.json":   `{"name":"a"}`,
		"node_modules/b/lib/deep/x.js":  "x",
		"node_modules/.bin/tool-target": "#!/bin/sh\necho tool\n",
		"sub/.venv/pyvenv.cfg":          "home = /usr/bin\n",
		"package-lock.json":             "{}",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(wt, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(wt, p), []byte(data), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(wt, "node_modules/.bin/tool-target"), 0o755))
	require.NoError(t, os.Symlink("tool-target", filepath.Join(wt, "node_modules/.bin/tool")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(wt, "node_modules/a/passwd")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(wt, "node_modules/fifo"), 0o644))
	return wt
}

func newCaches(t *testing.T) *Caches {
	return &Caches{Root: t.TempDir(), Scope: ScopeUser}
}

var ws1 = sandboxapi.Workspace{ID: "ws-1", UserID: "alice", RepoCacheID: "rc-1"}

func TestTreeKeyDependsOnEverythingThatMadeTheTree(t *testing.T) {
	c := newCaches(t)
	base := c.TreeKey(ws1, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "bwrap:")
	assert.Len(t, base, KeyLen)
	ws2 := ws1
	ws2.ID = "ws-2"
	assert.Equal(t, base, c.TreeKey(ws2, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "bwrap:"), "same user and repository: shared")
	bob := ws1
	bob.UserID = "bob"
	for name, other := range map[string]string{
		"another user":     c.TreeKey(bob, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "bwrap:"),
		"other lockfiles":  c.TreeKey(ws1, "h2", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "bwrap:"),
		"other setup":      c.TreeKey(ws1, "h1", [][]string{{"sh", "-c", "npm i"}}, []string{"node_modules"}, "bwrap:"),
		"other paths":      c.TreeKey(ws1, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules", ".venv"}, "bwrap:"),
		"other runtime":    c.TreeKey(ws1, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "docker:img"),
		"workspace scoped": (&Caches{Root: c.Root, Scope: ScopeWorkspace}).TreeKey(ws1, "h1", [][]string{{"sh", "-c", "npm ci"}}, []string{"node_modules"}, "bwrap:"),
	} {
		assert.NotEqual(t, base, other, name)
	}
}

// TestSaveAndRestoreByCopy: the restored tree is the saved one (bytes,
// modes, links as links), writable and independent of the tree; nothing
// outside the worktree was read; the fifo is left out.
func TestSaveAndRestoreByCopy(t *testing.T) {
	c := newCaches(t)
	src := setupOutput(t)
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules", "sub/.venv"}, "local:")
	st, err := c.SaveTree(key, src, []string{"node_modules", "sub/.venv", "missing"}, false)
	require.NoError(t, err)
	assert.EqualValues(t, 5, st.Files)
	assert.True(t, c.HasTree(key))

	dst := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dst, "package-lock.json"), []byte("{}"), 0o644))
	got, err := c.RestoreTree(key, dst, []string{"node_modules", "sub/.venv"}, false, -1, -1)
	require.NoError(t, err)
	assert.Equal(t, ModeCopy, got.Mode)
	assert.EqualValues(t, 5, got.Files)
	assert.Equal(t, st.Bytes, got.Bytes)

	data, err := os.ReadFile(filepath.Join(dst, "node_modules/b/lib/deep/x.js"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(data))
	fi, err := os.Stat(filepath.Join(dst, "node_modules/.bin/tool-target"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "executable and writable again")
	target, err := os.Readlink(filepath.Join(dst, "node_modules/.bin/tool"))
	require.NoError(t, err)
	assert.Equal(t, "tool-target", target)
	target, err = os.Readlink(filepath.Join(dst, "node_modules/a/passwd"))
	require.NoError(t, err)
	assert.Equal(t, "/etc/passwd", target, "a link is kept as a link, never followed")
	_, err = os.Lstat(filepath.Join(dst, "node_modules/fifo"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A copy is the workspace's own: changing it changes no other.
	require.NoError(t, os.WriteFile(filepath.Join(dst, "node_modules/a/index.js"), []byte("changed"), 0o644))
	dst2 := t.TempDir()
	_, err = c.RestoreTree(key, dst2, []string{"node_modules", "sub/.venv"}, false, -1, -1)
	require.NoError(t, err)
	data, err = os.ReadFile(filepath.Join(dst2, "node_modules/a/index.js"))
	require.NoError(t, err)
	assert.Equal(t, "module.exports = 1\n", string(data))
}

// TestRestoreByLinkIsReadOnly: as root, the tree's files belong to
// LinkOwnerUID and are read-only; a restore by link shares their inodes.
func TestRestoreByLinkIsReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to LinkOwnerUID needs root")
	}
	c := newCaches(t)
	src := setupOutput(t)
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules"}, "bwrap:")
	_, err := c.SaveTree(key, src, []string{"node_modules"}, true)
	require.NoError(t, err)
	dst := t.TempDir()
	got, err := c.RestoreTree(key, dst, []string{"node_modules"}, true, -1, -1)
	require.NoError(t, err)
	assert.Equal(t, ModeLink, got.Mode)
	fi, err := os.Stat(filepath.Join(dst, "node_modules/a/index.js"))
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.EqualValues(t, LinkOwnerUID, st.Uid)
	assert.EqualValues(t, 2, st.Nlink, "the tree's file and this link")
	assert.Equal(t, os.FileMode(0o444), fi.Mode().Perm())
	// The directories are the workspace's own: a file can be replaced.
	require.NoError(t, os.Remove(filepath.Join(dst, "node_modules/a/index.js")))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "node_modules/a/index.js"), []byte("mine"), 0o644))
	data, err := os.ReadFile(filepath.Join(c.Root, "prepared", key, "tree/node_modules/a/index.js"))
	require.NoError(t, err)
	assert.Equal(t, "module.exports = 1\n", string(data), "replacing the link left the tree alone")
}

// TestRestoreChangesNothingItShouldNot: a path already there, a parent
// that is a symbolic link out of the worktree, a missing or half-removed
// tree: an error, and the worktree is as before.
func TestRestoreChangesNothingItShouldNot(t *testing.T) {
	c := newCaches(t)
	src := setupOutput(t)
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules", "sub/.venv"}, "local:")
	_, err := c.SaveTree(key, src, []string{"node_modules", "sub/.venv"}, false)
	require.NoError(t, err)

	dst := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dst, "node_modules/mine"), 0o755))
	_, err = c.RestoreTree(key, dst, []string{"node_modules", "sub/.venv"}, false, -1, -1)
	assert.ErrorIs(t, err, ErrPathExists)
	_, err = os.Lstat(filepath.Join(dst, "sub"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")

	outside := t.TempDir()
	dst = t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dst, "sub")))
	_, err = c.RestoreTree(key, dst, []string{"node_modules", "sub/.venv"}, false, -1, -1)
	require.Error(t, err)
	des, _ := os.ReadDir(outside)
	assert.Empty(t, des, "nothing written through the link")
	_, err = os.Lstat(filepath.Join(dst, "node_modules"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the first path was removed again")

	_, err = c.RestoreTree(c.TreeKey(ws1, "other", nil, nil, ""), t.TempDir(), []string{"node_modules"}, false, -1, -1)
	assert.ErrorIs(t, err, ErrNoTree)

	// Half removed under the restore (an eviction): the count is short.
	require.NoError(t, os.RemoveAll(filepath.Join(c.Root, "prepared", key, "tree/node_modules/b")))
	dst = t.TempDir()
	_, err = c.RestoreTree(key, dst, []string{"node_modules", "sub/.venv"}, false, -1, -1)
	assert.ErrorIs(t, err, ErrNoTree)
	des, _ = os.ReadDir(dst)
	assert.Empty(t, des)
}

// TestSaveRefusesALinkedDirectory: a prepared path that is a symbolic
// link (to the host's /etc, say) is not saved.
func TestSaveRefusesALinkedDirectory(t *testing.T) {
	c := newCaches(t)
	wt := t.TempDir()
	require.NoError(t, os.Symlink("/etc", filepath.Join(wt, "node_modules")))
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules"}, "")
	st, err := c.SaveTree(key, wt, []string{"node_modules"}, false)
	require.NoError(t, err)
	assert.Zero(t, st.Files)
	_, err = c.RestoreTree(key, t.TempDir(), []string{"node_modules"}, false, -1, -1)
	assert.ErrorIs(t, err, ErrNoTree, "the tree holds no path")
}

// TestTreesAreListedAndRemovedWithTheCaches: eviction sees a prepared tree
// as a dependency cache; removing it while a workspace holds a restored
// copy or links loses nothing of that workspace.
func TestTreesAreListedAndRemovedWithTheCaches(t *testing.T) {
	c := newCaches(t)
	src := setupOutput(t)
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules"}, "")
	_, err := c.SaveTree(key, src, []string{"node_modules"}, os.Geteuid() == 0)
	require.NoError(t, err)
	dst := t.TempDir()
	_, err = c.RestoreTree(key, dst, []string{"node_modules"}, os.Geteuid() == 0, -1, -1)
	require.NoError(t, err)

	list, err := c.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "prepared/"+key, list[0].ID())
	assert.Positive(t, list[0].SizeBytes)
	require.NoError(t, c.Remove(list[0].ID()))
	assert.False(t, c.HasTree(key))
	list, err = c.List()
	require.NoError(t, err)
	assert.Empty(t, list)

	data, err := os.ReadFile(filepath.Join(dst, "node_modules/a/index.js"))
	require.NoError(t, err)
	assert.Equal(t, "module.exports = 1\n", string(data))
	assert.True(t, errors.Is(c.Remove("prepared/zz"), sandboxapi.ErrInvalidArgument))
}

// TestSaveLeavesTheWorktreeAlone: the save copies; the worktree's files
// keep their owner, mode and single link (a process holding one open
// for writing can never reach the tree).
func TestSaveLeavesTheWorktreeAlone(t *testing.T) {
	c := newCaches(t)
	src := setupOutput(t)
	key := c.TreeKey(ws1, "h", nil, []string{"node_modules"}, "bwrap:")
	_, err := c.SaveTree(key, src, []string{"node_modules"}, os.Geteuid() == 0)
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(src, "node_modules/a/index.js"))
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.EqualValues(t, os.Geteuid(), st.Uid)
	assert.EqualValues(t, 1, st.Nlink)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	f, err := os.OpenFile(filepath.Join(src, "node_modules/a/index.js"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("poisoned\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	data, err := os.ReadFile(filepath.Join(c.Root, "prepared", key, "tree/node_modules/a/index.js"))
	require.NoError(t, err)
	assert.Equal(t, "module.exports = 1\n", string(data))
}

// TestPartialTree: a prepared path the setup did not make is not in the
// tree, and the tree still restores (it must be missing in the new
// worktree too); a setup that made none keeps no tree.
func TestPartialTree(t *testing.T) {
	c := newCaches(t)
	src := setupOutput(t)
	paths := []string{"node_modules", ".venv"}
	key := c.TreeKey(ws1, "h", nil, paths, "")
	_, err := c.SaveTree(key, src, paths, false)
	require.NoError(t, err)
	dst := t.TempDir()
	got, err := c.RestoreTree(key, dst, paths, false, -1, -1)
	require.NoError(t, err)
	assert.EqualValues(t, 4, got.Files)
	_, err = os.Lstat(filepath.Join(dst, ".venv"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = c.RestoreTree(key, dst, paths, false, -1, -1)
	assert.ErrorIs(t, err, ErrPathExists)

	none := c.TreeKey(ws1, "none", nil, []string{"absent"}, "")
	st, err := c.SaveTree(none, src, []string{"absent"}, false)
	require.NoError(t, err)
	assert.Zero(t, st.Files)
	assert.False(t, c.HasTree(none))
}
