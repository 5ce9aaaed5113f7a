package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestWorktreesOnVolumes: with Options.Volumes, a new worktree — git's
// own add (an existing branch) and the fast add (a new branch, a detached
// analysis) alike — is checked out on a volume of its own, and Remove
// deletes the volume with the directory; the branch and its commits stay.
func TestWorktreesOnVolumes(t *testing.T) {
	f := newFixture(t)
	vols, err := volume.New(context.Background(), filepath.Join(f.root, "volumes"), nil)
	if errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes here: %v", err)
	}
	require.NoError(t, err)
	f.m.volumes, f.m.volBytes = vols, volume.MinBytes
	images := func() []string {
		m, _ := filepath.Glob(filepath.Join(f.root, "volumes", "*.img"))
		return m
	}

	edit := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	t.Cleanup(func() { _ = vols.Detach(edit.LocalPath) })
	assert.True(t, volume.Mounted(edit.LocalPath))
	assert.FileExists(t, filepath.Join(edit.LocalPath, "README.md"))
	assert.NoDirExists(t, filepath.Join(edit.LocalPath, "lost+found"))
	analysis := f.ensure(f.req(sandboxapi.ModeAnalysis, "dev"))
	t.Cleanup(func() { _ = vols.Detach(analysis.LocalPath) })
	assert.True(t, volume.Mounted(analysis.LocalPath))
	assert.Len(t, images(), 2)

	// Work committed on the volume survives Remove (in the branch); the
	// volume does not.
	require.NoError(t, os.WriteFile(filepath.Join(edit.LocalPath, "work.txt"), []byte("work\n"), 0o644))
	f.git(edit.LocalPath, "add", "work.txt")
	f.git(edit.LocalPath, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "work")
	require.NoError(t, f.m.Remove(context.Background(), edit))
	assert.NoDirExists(t, edit.LocalPath)
	assert.Len(t, images(), 1)

	// The branch exists now: git's own add, into the new volume.
	again := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	assert.Equal(t, edit.LocalPath, again.LocalPath)
	assert.True(t, volume.Mounted(again.LocalPath))
	b, err := os.ReadFile(filepath.Join(again.LocalPath, "work.txt"))
	require.NoError(t, err)
	assert.Equal(t, "work\n", string(b))
	assert.Equal(t, "", f.git(again.LocalPath, "status", "--porcelain"))
	assert.Len(t, images(), 2)

	require.NoError(t, f.m.Remove(context.Background(), again))
	require.NoError(t, f.m.Remove(context.Background(), analysis))
	assert.Empty(t, images())
}
