package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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
	vols := withVolumes(t, f)
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

// withVolumes gives f's Manager volumes of volume.MinBytes (skipping where
// this host cannot make them).
func withVolumes(t *testing.T, f *fixture) *volume.Manager {
	t.Helper()
	vols, err := volume.New(context.Background(), filepath.Join(f.root, "volumes"), nil)
	if errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes here: %v", err)
	}
	require.NoError(t, err)
	f.m.volumes, f.m.volBytes = vols, volume.MinBytes
	return vols
}

// TestAnUnmountedVolumeIsNeverServedEmpty: a worktree whose volume is not
// mounted (a remount that failed when the worker started) is mounted again
// by the next operation; one that cannot be mounted fails every operation,
// writes nothing into the directory beneath it, and Remove keeps its image.
func TestAnUnmountedVolumeIsNeverServedEmpty(t *testing.T) {
	f := newFixture(t)
	vols := withVolumes(t, f)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	t.Cleanup(func() { _ = vols.Detach(ws.LocalPath) })
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "untracked.txt"), []byte("agent's work\n"), 0o644))
	unmount := func() {
		t.Helper()
		require.NoError(t, syscall.Unmount(ws.LocalPath, 0))
		require.True(t, vols.Has(ws.LocalPath))
		require.False(t, volume.Mounted(ws.LocalPath))
	}

	unmount()
	b, err := f.m.ReadFile(ctx, ws, "untracked.txt")
	require.NoError(t, err, "mounted again")
	assert.Equal(t, "agent's work\n", string(b))
	assert.True(t, volume.Mounted(ws.LocalPath))

	// Cannot be mounted: something is in the directory beneath.
	unmount()
	stray := filepath.Join(ws.LocalPath, "stray")
	require.NoError(t, os.WriteFile(stray, nil, 0o644))
	_, err = f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, "c1"), &ws)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable, "Ensure")
	_, err = f.m.Exists(ctx, ws)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable, "Exists")
	_, err = f.m.Status(ctx, ws)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable, "Status")
	_, err = f.m.ReadFile(ctx, ws, "README.md")
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable, "ReadFile")
	assert.ErrorIs(t, f.m.WriteFile(ctx, ws, "new.txt", []byte("x"), 0o644), sandboxapi.ErrWorkspaceUnavailable, "WriteFile")
	assert.ErrorIs(t, f.m.RepairMetadata(ctx, ws), sandboxapi.ErrWorkspaceUnavailable, "RepairMetadata")
	assert.ErrorIs(t, f.m.Remove(ctx, ws), sandboxapi.ErrWorkspaceUnavailable, "Remove")
	entries, err := os.ReadDir(ws.LocalPath)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the stray file written beneath the volume")
	assert.True(t, vols.Has(ws.LocalPath), "the image is kept")

	require.NoError(t, os.Remove(stray))
	require.NoError(t, f.m.Remove(ctx, ws), "mounted, then removed")
	assert.False(t, vols.Has(ws.LocalPath))
}

// TestHostSideWritesKeepTheHostsReserve: the images are sparse, so the
// worker's own writes into volumes (files, new worktrees) are refused when
// they would leave the host's file system holding the images under its
// reserve; a volume turned read-only is the workspace's failure, not the
// path's.
func TestHostSideWritesKeepTheHostsReserve(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.root, "volumes")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1040m,mode=0700"); err != nil {
		t.Skipf("no tmpfs mount here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	vols := withVolumes(t, f)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	t.Cleanup(func() { _ = vols.Detach(ws.LocalPath) })
	require.NoError(t, f.m.WriteFile(ctx, ws, "a.txt", []byte("kept\n"), 0))

	// Something else takes the host's space.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other"), make([]byte, 16<<20), 0o600))
	err := f.m.WriteFile(ctx, ws, "b.txt", make([]byte, 1<<20), 0)
	assert.ErrorIs(t, err, sandboxapi.ErrInsufficientDisk)
	assert.NoFileExists(t, filepath.Join(ws.LocalPath, "b.txt"))
	other, err := f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, "c2"), nil)
	if err == nil {
		_ = vols.Detach(other.LocalPath)
	}
	assert.ErrorIs(t, err, sandboxapi.ErrInsufficientDisk, "a new worktree")
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "m", Paths: []string{"a.txt"}})
	assert.ErrorIs(t, err, sandboxapi.ErrInsufficientDisk, "a commit")
	b, err := f.m.ReadFile(ctx, ws, "a.txt")
	require.NoError(t, err, "reads go on")
	assert.Equal(t, "kept\n", string(b))
	require.NoError(t, os.Remove(filepath.Join(dir, "other")))

	// A checkpoint writes its files' blobs: refused when their bytes
	// would take the reserve, though the host is above it now.
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	room := int64(st.Bavail)*st.Bsize - 1<<30
	require.Greater(t, room, int64(4<<20))
	// Sparse: it takes no host space itself, and its length is what git
	// would write.
	big, err := os.Create(filepath.Join(ws.LocalPath, "big.bin"))
	require.NoError(t, err)
	require.NoError(t, big.Truncate(room+(8<<20)))
	require.NoError(t, big.Close())
	require.NoError(t, f.m.volumes.Room(0), "the host is above its reserve")
	bk, err := NewBackups(f.m, t.TempDir())
	require.NoError(t, err)
	_, err = bk.Checkpoint(ctx, ws, "")
	assert.ErrorIs(t, err, sandboxapi.ErrInsufficientDisk, "a checkpoint")
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "big.bin")))
	_, err = bk.Checkpoint(ctx, ws, "")
	require.NoError(t, err, "small enough")

	// What the kernel does to a volume after an I/O error.
	out, err := exec.Command("mount", "-o", "remount,ro", ws.LocalPath).CombinedOutput()
	require.NoError(t, err, string(out))
	err = f.m.WriteFile(ctx, ws, "c.txt", []byte("x"), 0)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable)
}
