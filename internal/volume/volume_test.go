package volume_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(wt, &st))
	assert.LessOrEqual(t, int64(st.Blocks)*st.Bsize, int64(64<<20), "the file system's size")

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
	wt := unmountedWithWork(t, m, root)
	require.False(t, volume.Mounted(wt))
	// Something written into the bare directory meanwhile is never hidden.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "stray"), nil, 0o644))
	err := m.Attach(context.Background(), wt, 64<<20)
	assert.ErrorIs(t, err, sandboxapi.ErrConflict)
	require.NoError(t, os.Remove(filepath.Join(wt, "stray")))

	require.NoError(t, m.Remount(context.Background()))
	assertWork(t, wt)
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

func TestMountBringsBackAnUnmountedVolume(t *testing.T) {
	m, root := newManager(t)
	require.NoError(t, m.Mount(context.Background(), filepath.Join(root, "w")), "no volume: nothing to do")
	wt := unmountedWithWork(t, m, root)

	require.NoError(t, m.Mount(context.Background(), wt))
	assertWork(t, wt)
	require.NoError(t, m.Mount(context.Background(), wt), "mounted: nothing to do")
}

func TestAFileSystemWithErrorsIsRepairedBeforeItIsMounted(t *testing.T) {
	m, root := newManager(t)
	wt := unmountedWithWork(t, m, root)
	img := imageOf(t, m)
	// What the kernel records after an I/O error on the volume (its
	// backing file system full): the file system has errors.
	out, err := exec.Command("debugfs", "-w", "-R", "ssv state 2", img).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, fsState(t, img), "errors")

	require.NoError(t, m.Remount(context.Background()))
	assert.NotContains(t, fsState(t, img), "errors", "checked and repaired before the mount")
	assertWork(t, wt)
}

func imageOf(t *testing.T, m *volume.Manager) string {
	t.Helper()
	imgs, err := filepath.Glob(filepath.Join(m.Dir(), "*.img"))
	require.NoError(t, err)
	require.Len(t, imgs, 1)
	return imgs[0]
}

// fsState is the "Filesystem state" dumpe2fs reads from img's superblock.
func fsState(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("dumpe2fs", "-h", img).Output()
	require.NoError(t, err)
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Filesystem state:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no file system state in dumpe2fs's output")
	return ""
}

func TestABrokenFileSystemIsNeverMounted(t *testing.T) {
	m, root := newManager(t)
	wt := unmountedWithWork(t, m, root)
	// The primary superblock (bytes 1024–2047) zeroed: e2fsck -p does not
	// repair that on its own.
	f, err := os.OpenFile(imageOf(t, m), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 1024), 1024)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	err = m.Mount(context.Background(), wt)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable)
	assert.Contains(t, err.Error(), "e2fsck")
	assert.False(t, volume.Mounted(wt))
	assert.True(t, m.Has(wt), "the image is kept")
	assert.Error(t, m.Remount(context.Background()))
	assert.False(t, volume.Mounted(wt))
}

func TestRemountDeletesAnUnfinishedProbe(t *testing.T) {
	m, _ := newManager(t)
	probe := filepath.Join(m.Dir(), ".probe-1")
	require.NoError(t, m.Attach(context.Background(), probe, 64<<20))
	require.NoError(t, syscall.Unmount(probe, 0)) // the worker was killed, then the host rebooted
	require.NoError(t, m.Remount(context.Background()))
	assert.False(t, volume.Mounted(probe))
	assert.False(t, m.Has(probe))
	left, _ := filepath.Glob(filepath.Join(m.Dir(), "*"))
	assert.Empty(t, left)
}

func TestFits(t *testing.T) {
	m, _ := newManager(t)
	require.NoError(t, m.Fits(40<<30))
	err := m.Fits(100000 << 30)
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	left, _ := filepath.Glob(filepath.Join(m.Dir(), "*"))
	assert.Empty(t, left)
}

// TestRoomKeepsTheHostsReserve: the worker's own writes into volumes ask
// first whether the host's file system holding the images keeps its
// reserve (1 GiB) afterwards: here a tmpfs of 1 GiB and 16 MiB.
func TestRoomKeepsTheHostsReserve(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "volumes")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1040m,mode=0700"); err != nil {
		t.Skipf("no tmpfs mount here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	m, err := volume.New(context.Background(), dir, nil)
	if errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes here: %v", err)
	}
	require.NoError(t, err)
	var nilManager *volume.Manager
	require.NoError(t, nilManager.Room(1<<40), "no volumes: nothing to keep")

	require.NoError(t, m.Room(0))
	require.NoError(t, m.Room(8<<20))
	err = m.Room(32 << 20)
	assert.ErrorIs(t, err, sandboxapi.ErrInsufficientDisk)
	assert.Contains(t, err.Error(), "reserve of 1024 MiB")
	// Taken by something else on the host.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other"), make([]byte, 20<<20), 0o600))
	assert.ErrorIs(t, m.Room(0), sandboxapi.ErrInsufficientDisk)
}

// unmountedWithWork gives <root>/w a 64 MiB volume holding the agent's
// file f, then unmounts it as a reboot does (the image stays).
func unmountedWithWork(t *testing.T, m *volume.Manager, root string) string {
	t.Helper()
	wt := filepath.Join(root, "w")
	require.NoError(t, m.Attach(context.Background(), wt, 64<<20))
	t.Cleanup(func() { _ = m.Detach(wt) })
	require.NoError(t, os.WriteFile(filepath.Join(wt, "f"), []byte("agent's work"), 0o644))
	require.NoError(t, syscall.Unmount(wt, 0))
	return wt
}

// assertWork checks that unmountedWithWork's file is back at wt.
func assertWork(t *testing.T, wt string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wt, "f"))
	require.NoError(t, err)
	assert.Equal(t, "agent's work", string(b))
}
