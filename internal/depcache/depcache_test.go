package depcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func ws(id, user, repo string) sandboxapi.Workspace {
	return sandboxapi.Workspace{ID: id, UserID: user, RepoCacheID: repo}
}

// TestKeyScopes: under user scope one user's workspaces of a repository
// share, other users and other repositories never do; repo scope shares
// across users; workspace scope shares nothing.
func TestKeyScopes(t *testing.T) {
	a1, a2 := ws("ws-1", "alice", "rc-1"), ws("ws-2", "alice", "rc-1")
	b1, aOther := ws("ws-3", "bob", "rc-1"), ws("ws-4", "alice", "rc-2")
	assert.Equal(t, Key(ScopeUser, a1), Key(ScopeUser, a2))
	assert.NotEqual(t, Key(ScopeUser, a1), Key(ScopeUser, b1))
	assert.NotEqual(t, Key(ScopeUser, a1), Key(ScopeUser, aOther))
	assert.Equal(t, Key(ScopeRepo, a1), Key(ScopeRepo, b1))
	assert.NotEqual(t, Key(ScopeRepo, a1), Key(ScopeRepo, aOther))
	assert.NotEqual(t, Key(ScopeWorkspace, a1), Key(ScopeWorkspace, a2))
	// No concatenation ambiguity: ("ab", "c") is not ("a", "bc").
	assert.NotEqual(t, Key(ScopeUser, ws("x", "ab", "c")), Key(ScopeUser, ws("x", "a", "bc")))
	for _, k := range []string{Key(ScopeUser, a1), Key(ScopeRepo, a1), Key(ScopeWorkspace, a1)} {
		assert.True(t, validKey(k), k)
	}
}

func TestParseScope(t *testing.T) {
	for _, s := range []string{"user", "repo", "workspace"} {
		got, err := ParseScope(s)
		require.NoError(t, err)
		assert.Equal(t, Scope(s), got)
	}
	for _, s := range []string{"", "User", "global", "../x"} {
		_, err := ParseScope(s)
		assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "%q: %v", s, err)
	}
}

// TestPrepareListRemove: Prepare makes the directory (0700) and marks its
// use outside it; List reports size and last use; Remove deletes a cache
// whose directories Go made read-only, and refuses ids that name no cache.
func TestPrepareListRemove(t *testing.T) {
	root := filepath.Join(t.TempDir(), "depcache")
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	c := &Caches{Root: root, Now: func() time.Time { return now }}
	w := ws("ws-1", "alice", "rc-1")
	w.LocalPath = t.TempDir()
	dir, err := c.Prepare(w)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "user", Key(ScopeUser, w)), dir)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	again, err := c.Prepare(w)
	require.NoError(t, err)
	assert.Equal(t, dir, again, "idempotent")

	mod := filepath.Join(dir, "go", "mod", "example.com", "m@v1.0.0")
	require.NoError(t, os.MkdirAll(mod, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), make([]byte, 1000), 0o444))
	require.NoError(t, os.Chmod(mod, 0o555)) // as Go leaves its module cache
	entries, err := c.List()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "user/"+Key(ScopeUser, w), entries[0].ID())
	assert.Equal(t, int64(1000), entries[0].SizeBytes)
	assert.True(t, entries[0].LastUsedAt.Equal(now), "%v", entries[0].LastUsedAt)

	for _, bad := range []string{"user", "user/../../etc", "global/" + Key(ScopeUser, w), "user/" + Key(ScopeUser, w)[:8]} {
		assert.True(t, errors.Is(c.Remove(bad), sandboxapi.ErrInvalidArgument), bad)
	}
	require.NoError(t, c.Remove(entries[0].ID()))
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "removed: %v", err)
	require.NoError(t, c.Remove(entries[0].ID()), "a missing cache is success")
	entries, err = c.List()
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestRemoveWorkspace: a workspace's own cache goes with it; a shared one
// stays for the scope's other workspaces.
func TestRemoveWorkspace(t *testing.T) {
	root := t.TempDir()
	w := ws("ws-1", "alice", "rc-1")
	w.LocalPath = t.TempDir()
	shared := &Caches{Root: root, Scope: ScopeUser}
	dir, err := shared.Prepare(w)
	require.NoError(t, err)
	require.NoError(t, shared.RemoveWorkspace(w))
	assert.DirExists(t, dir)

	own := &Caches{Root: root, Scope: ScopeWorkspace}
	dir, err = own.Prepare(w)
	require.NoError(t, err)
	require.NoError(t, own.RemoveWorkspace(w))
	assert.NoDirExists(t, dir)
}

func TestEnvPointsIntoTheCache(t *testing.T) {
	env := Env("/data/depcache/user/k")
	for k, v := range env {
		assert.Contains(t, v, "/data/depcache/user/k/", k)
	}
	assert.Equal(t, "/data/depcache/user/k/go/build", env["GOCACHE"])
}
