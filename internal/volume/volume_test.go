package volume_test

import (
	"bytes"
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

// newManager returns a Manager in a temporary directory, skipping where
// this host cannot make volumes (not root, no loop devices); every volume
// it made is detached at the end.
func newManager(t *testing.T) (*volume.Manager, string) {
	t.Helper()
	root := t.TempDir()
	m, err := volume.New(context.Background(), filepath.Join(root, "volumes"), nil)
	if errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes here: %v", err)
	}
	require.NoError(t, err)
	return m, root
}

func TestAttachBoundsWhatTheDirectoryHolds(t *testing.T) {
	m, root := newManager(t)
	wt := filepath.Join(root, "worktrees", "a")
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	t.Cleanup(func() { _ = m.Detach(wt) })
	require.True(t, volume.Mounted(wt))
	names, err := os.ReadDir(wt)
	require.NoError(t, err)
	assert.Empty(t, names, "a new volume is empty (no lost+found)")

	// Writing past the volume's size fails with ENOSPC, and the host
	// file holding it stays within the size.
	f, err := os.Create(filepath.Join(wt, "big"))
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{1}, 1<<20)
	var werr error
	written := 0
	for range 100 {
		if _, werr = f.Write(chunk); werr != nil {
			break
		}
		written++
	}
	require.ErrorIs(t, werr, syscall.ENOSPC)
	assert.Less(t, written, 64)
	// A file deleted while open keeps its space on the volume, not the host's.
	require.NoError(t, os.Remove(filepath.Join(wt, "big")))
	_, err = f.Write(chunk)
	assert.ErrorIs(t, err, syscall.ENOSPC, "the open, deleted file still holds the volume's space")
	require.NoError(t, f.Close())
	u, err := volume.UsageOf(wt)
	require.NoError(t, err)
	assert.LessOrEqual(t, u.Size, int64(64<<20))

	// Attach again: already mounted, the content stays.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "kept"), []byte("work"), 0o644))
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	b, err := os.ReadFile(filepath.Join(wt, "kept"))
	require.NoError(t, err)
	assert.Equal(t, "work", string(b))
	assert.Equal(t, filepath.Join(root, "volumes"), m.HostDir(wt))
	assert.Equal(t, root, m.HostDir(root))
}

func TestRemountAfterUnmount(t *testing.T) {
	m, root := newManager(t)
	wt := filepath.Join(root, "w")
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	t.Cleanup(func() { _ = m.Detach(wt) })
	require.NoError(t, os.WriteFile(filepath.Join(wt, "f"), []byte("agent's work"), 0o644))
	// A reboot: the mount is gone, the image stays.
	require.NoError(t, syscall.Unmount(wt, 0))
	require.False(t, volume.Mounted(wt))
	// Something written into the bare directory meanwhile is never hidden.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "stray"), nil, 0o644))
	err := m.Attach(context.Background(), wt, 64<<20)
	assert.ErrorIs(t, err, sandboxapi.ErrConflict)
	require.NoError(t, os.Remove(filepath.Join(wt, "stray")))

	require.NoError(t, m.Remount(context.Background()))
	b, err := os.ReadFile(filepath.Join(wt, "f"))
	require.NoError(t, err)
	assert.Equal(t, "agent's work", string(b))
}

func TestNeverMountedTwice(t *testing.T) {
	m, root := newManager(t)
	wt := filepath.Join(root, "w")
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	t.Cleanup(func() { _ = m.Detach(wt) })
	// Moved elsewhere behind the Manager's back: the image is still held
	// by a loop device, so mounting it at wt again must be refused.
	other := filepath.Join(root, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, exec.Command("mount", "--move", wt, other).Run())
	t.Cleanup(func() { _ = syscall.Unmount(other, syscall.MNT_DETACH) })
	err := m.Attach(context.Background(), wt, 64<<20)
	assert.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.False(t, volume.Mounted(wt))
}

func TestDetachDeletesTheImage(t *testing.T) {
	m, root := newManager(t)
	wt := filepath.Join(root, "w")
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	f, err := os.Create(filepath.Join(wt, "open"))
	require.NoError(t, err)
	defer f.Close()
	// Busy (a file is open): detached lazily all the same.
	require.NoError(t, m.Detach(wt))
	assert.False(t, volume.Mounted(wt))
	assert.False(t, m.Has(wt))
	left, _ := filepath.Glob(filepath.Join(root, "volumes", "*"))
	assert.Empty(t, left)
	require.NoError(t, m.Detach(wt), "a target without a volume")
}

func TestAttachRefusesADirectoryHoldingFiles(t *testing.T) {
	m, root := newManager(t)
	wt := filepath.Join(root, "w")
	require.NoError(t, os.MkdirAll(wt, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "x"), nil, 0o644))
	err := m.Attach(context.Background(), wt, 64<<20)
	assert.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.False(t, m.Has(wt))
}
