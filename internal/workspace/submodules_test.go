package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// withSubmodule gives the fixture's upstream a submodule lib/dep (a gitlink
// and .gitmodules, as `git submodule add` makes them) at the returned commit
// of a new repository, and returns that repository's bare mirror.
func withSubmodule(t *testing.T, f *fixture) (mirror, commit string) {
	t.Helper()
	dep := filepath.Join(t.TempDir(), "dep")
	f.git(filepath.Dir(dep), "init", "-q", "-b", "main", dep)
	require.NoError(t, os.WriteFile(filepath.Join(dep, "dep.go"), []byte("package dep\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dep, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dep, "sub", "x.txt"), []byte("x\n"), 0o644))
	f.git(dep, "add", "-A")
	f.git(dep, "commit", "-q", "-m", "dep 1")
	require.NoError(t, os.WriteFile(filepath.Join(dep, "dep.go"), []byte("package dep\n\nconst V = 2\n"), 0o644))
	f.git(dep, "commit", "-q", "-am", "dep 2")
	commit = f.git(dep, "rev-parse", "HEAD")
	f.writeSrc(".gitmodules", "[submodule \"dep\"]\n\tpath = lib/dep\n\turl = ../dep.git\n")
	f.git(f.src, "add", ".gitmodules")
	f.git(f.src, "update-index", "--add", "--cacheinfo", "160000,"+commit+",lib/dep")
	f.git(f.src, "commit", "-q", "-m", "add submodule lib/dep")
	f.fetch()
	mirror = filepath.Join(t.TempDir(), "dep", ".bare")
	f.git(filepath.Dir(filepath.Dir(mirror)), "clone", "-q", "--bare", dep, mirror)
	return mirror, commit
}

// TestSubmoduleCheckout: a new workspace's submodule is an empty gitlink
// directory, reported uninitialised; CheckoutSubmodule puts the recorded
// commit there from the submodule's repo cache (a shallow copy of its
// objects into the worktree's own administrative directory), after which
// plain git sees a populated submodule, the workspace is clean, a change
// inside the submodule makes it dirty and blocks its eviction backup, and
// removal takes everything away.
func TestSubmoduleCheckout(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mirror, commit := withSubmodule(t, f)
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"lib/dep"}, st.UninitializedSubmodules)
	assert.False(t, st.Dirty)
	subs, err := f.m.Submodules(ctx, ws)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	assert.Equal(t, sandbox.Submodule{Path: "lib/dep", Name: "dep", URL: "../dep.git", Commit: commit}, subs[0])
	url, err := sandbox.ResolveSubmoduleURL("https://example.com/owner/repo", subs[0].URL)
	require.NoError(t, err)
	assert.Equal(t, "https://example.com/owner/dep.git", url)

	require.NoError(t, f.m.CheckoutSubmodule(ctx, ws, subs[0], mirror))
	require.NoError(t, f.m.CheckoutSubmodule(ctx, ws, subs[0], mirror), "idempotent")
	got, err := os.ReadFile(filepath.Join(ws.LocalPath, "lib", "dep", "dep.go"))
	require.NoError(t, err)
	assert.Equal(t, "package dep\n\nconst V = 2\n", string(got))
	assert.Equal(t, commit, f.git(filepath.Join(ws.LocalPath, "lib", "dep"), "rev-parse", "HEAD"), "plain git in the submodule")
	assert.Empty(t, f.git(ws.LocalPath, "status", "--porcelain"), "plain git: the superproject is clean")
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, st.UninitializedSubmodules)
	assert.False(t, st.Dirty, "%v", st.Files)
	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, d.Files)

	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "lib", "dep", "dep.go"), []byte("changed\n"), 0o644))
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	assert.Contains(t, st.Files, sandboxapi.FileStatus{Path: "lib/dep", Status: " M"})
	bk, err := NewBackups(f.m, t.TempDir())
	require.NoError(t, err)
	_, err = bk.Backup(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), "submodule lib/dep")

	// A directory with files in it is never overwritten.
	ws2 := f.ensure(f.req(sandboxapi.ModeEdit, "c2"))
	require.NoError(t, os.WriteFile(filepath.Join(ws2.LocalPath, "lib", "dep", "mine.txt"), []byte("agent\n"), 0o644))
	requireKind(t, f.m.CheckoutSubmodule(ctx, ws2, subs[0], mirror), sandboxapi.ErrConflict)
	b, err := os.ReadFile(filepath.Join(ws2.LocalPath, "lib", "dep", "mine.txt"))
	require.NoError(t, err)
	assert.Equal(t, "agent\n", string(b))

	require.NoError(t, f.m.Remove(ctx, ws))
	assert.NoDirExists(t, ws.LocalPath)
	assert.NoDirExists(t, filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath)))
}

// TestEmptySubmoduleDir: a missing gitlink directory is created, an empty
// one accepted; a file in its place or a directory holding anything is a
// conflict and left as it is.
func TestEmptySubmoduleDir(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	require.NoError(t, emptySubmoduleDir(root, "lib/dep"))
	assert.DirExists(t, filepath.Join(dir, "lib", "dep"))
	require.NoError(t, emptySubmoduleDir(root, "lib/dep"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lib", "dep", "x"), []byte("x"), 0o644))
	requireKind(t, emptySubmoduleDir(root, "lib/dep"), sandboxapi.ErrConflict)
	assert.FileExists(t, filepath.Join(dir, "lib", "dep", "x"))
	requireKind(t, emptySubmoduleDir(root, "lib/dep/x"), sandboxapi.ErrConflict)
}
