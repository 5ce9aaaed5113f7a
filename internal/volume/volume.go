// Package volume gives a directory a file system of its own, of a fixed
// size, so that the kernel keeps what the directory can hold: an ext4 file
// system in a sparse image file, mounted through a loop device at the
// directory. A worktree and a bubblewrap runtime's /tmp each get one when
// the worker is configured to (SANDBOX_DISK_VOLUMES). The walk of package
// diskquota still measures them; the volume is the bound the walk cannot
// give: space held by files deleted while open, what one command writes
// between two measurements, writes the worker did not see (docs/SECURITY.md
// "Resource limits (bubblewrap)", "Disk volumes").
//
// Nothing here ever mounts one image twice: two mounts of one ext4 file
// system corrupt it. A volume's image stays where it is across worker
// restarts (the mount stays too); after a host reboot, Manager.Remount
// mounts every image again before anything uses its directory.
package volume

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ErrUnsupported is returned by New when this host cannot make volumes:
// the worker is not root, there is no loop device control or no mkfs.ext4,
// or the probe's mount failed (a container without the privilege). The
// message says which.
var ErrUnsupported = errors.New("disk volumes unsupported")

// MinBytes is the smallest volume: 64 MiB (ext4's journal and metadata
// take a few MiB of it).
const MinBytes = 64 << 20

// Manager makes, mounts and deletes the volumes whose images live in one
// host directory. It is safe for concurrent use; its calls are serialized.
type Manager struct {
	dir  string
	mkfs string
	fsck string
	log  *slog.Logger
	mu   sync.Mutex
}

// New returns the Manager keeping its images in dir (created 0700 when
// missing; it must be absolute). It checks that this host can make
// volumes by making, mounting and deleting a small one. Errors wrap
// ErrUnsupported (with the reason) or are sandboxapi.ErrInvalidArgument
// (dir not absolute).
func New(ctx context.Context, dir string, log *slog.Logger) (*Manager, error) {
	if !filepath.IsAbs(dir) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "volumes directory %q is not absolute", dir)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the worker does not run as root (mounting a file system needs it)", ErrUnsupported)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return nil, fmt.Errorf("%w: no loop device control (/dev/loop-control: %v)", ErrUnsupported, err)
	}
	mkfs, err := lookTool("mkfs.ext4")
	if err != nil {
		return nil, fmt.Errorf("%w: mkfs.ext4 not found (apt-get install e2fsprogs)", ErrUnsupported)
	}
	fsck, err := lookTool("e2fsck")
	if err != nil {
		return nil, fmt.Errorf("%w: e2fsck not found (apt-get install e2fsprogs)", ErrUnsupported)
	}
	if _, err := lookTool("mount"); err != nil {
		return nil, fmt.Errorf("%w: mount not found (apt-get install mount)", ErrUnsupported)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: volumes directory: %v", ErrUnsupported, err)
	}
	m := &Manager{dir: filepath.Clean(dir), mkfs: mkfs, fsck: fsck, log: log}
	if err := m.probe(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return m, nil
}

// Held lists the directories that have a volume whose image is kept in
// dir (a Manager's Dir), read from its records without mounting anything
// and without root: what a worker must not serve without volumes, since
// their files are in the images. Probes New did not finish are left out.
// A missing dir holds none.
func Held(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	records, err := filepath.Glob(filepath.Join(dir, "*.target"))
	if err != nil {
		return nil, err
	}
	var held []string
	for _, rec := range records {
		b, err := os.ReadFile(rec)
		if err != nil {
			return nil, err
		}
		target := strings.TrimSpace(string(b))
		img := strings.TrimSuffix(rec, ".target") + ".img"
		if _, err := os.Lstat(img); err != nil || filepath.Dir(target) == dir {
			continue
		}
		held = append(held, target)
	}
	return held, nil
}

// Room checks that the file system holding the images keeps
// diskquota.DefaultReserve (1 GiB) free once bytes more are written: the
// images are sparse, so a write into a volume takes the host's space, and
// a volume whose host file system fills turns read-only with its last
// writes lost. The runtimes' watcher stops commands at the reserve; the
// worker's own writes into volumes (files written through the API,
// restores, new worktrees) ask here first. nil on a nil Manager. Errors:
// sandboxapi.ErrInsufficientDisk.
func (m *Manager) Room(bytes int64) error {
	if m == nil {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m.dir, &st); err != nil {
		return failure(err, "volume: free space")
	}
	free := int64(st.Bavail) * st.Bsize
	if free-max(bytes, 0) < diskquota.DefaultReserve {
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk,
			"the host's disk holding the workspaces' volumes has %d MiB free; writing %d MiB more would leave less than its reserve of %d MiB",
			free>>20, (max(bytes, 0)+(1<<20)-1)>>20, int64(diskquota.DefaultReserve)>>20)
	}
	return nil
}

// Dir is the host directory holding the images: the file system whose free
// space the volumes draw on.
func (m *Manager) Dir() string { return m.dir }

// probe makes, mounts, unmounts and deletes a MinBytes volume.
func (m *Manager) probe(ctx context.Context) error {
	target, err := os.MkdirTemp(m.dir, ".probe-")
	if err != nil {
		return err
	}
	defer os.Remove(target)
	if err := m.Attach(ctx, target, MinBytes); err != nil {
		return err
	}
	return m.Detach(target)
}

// Fits checks that a volume of size bytes can be made here: that the
// host's file system takes an image file of that size (a sparse file is
// made and deleted). It does not check free space (images are sparse).
// Errors: sandboxapi.ErrInvalidArgument (too large for the file system,
// e.g. "file too large" past ext4's 16 TiB), ErrWorkspaceUnavailable.
func (m *Manager) Fits(bytes int64) error {
	f, err := os.CreateTemp(m.dir, ".fits-")
	if err != nil {
		return failure(err, "volume: check the size")
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Truncate(max(bytes, MinBytes)); err != nil {
		if errors.Is(err, unix.EFBIG) || errors.Is(err, unix.EINVAL) {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "volume: %d bytes is more than the file system of %s takes in one file: %v", bytes, m.dir, err)
		}
		return failure(err, "volume: check the size")
	}
	return nil
}

// lookTool finds a system program in PATH or the sbin directories a
// worker's PATH may lack.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// key names target's image: the first 20 bytes of its path's SHA-256, in
// hex (a path never reaches a file name).
func (m *Manager) key(target string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(target)))
	return hex.EncodeToString(sum[:20])
}

func (m *Manager) image(target string) string {
	return filepath.Join(m.dir, m.key(target)+".img")
}

func (m *Manager) record(target string) string {
	return filepath.Join(m.dir, m.key(target)+".target")
}

// Has reports whether target has a volume (its image exists), mounted or
// not.
func (m *Manager) Has(target string) bool {
	_, err := os.Lstat(m.image(target))
	return err == nil
}

// Attach gives target a volume of size bytes (rounded up to MinBytes) and
// mounts it there. When target has a volume already, it is mounted if it
// is not (its size stays what it was made with). Otherwise target must be
// missing or an empty directory; the new file system's root is empty
// (mode 0755, root's) and mounted nosuid, nodev, with discard (deleted
// files give their space back to the host). Errors:
// sandboxapi.ErrConflict (target holds files that are not on its volume,
// or the image is in use elsewhere), sandboxapi.ErrInsufficientDisk (the
// host cannot hold the image), sandboxapi.ErrWorkspaceUnavailable.
func (m *Manager) Attach(ctx context.Context, target string, bytes int64) error {
	target = filepath.Clean(target)
	m.mu.Lock()
	defer m.mu.Unlock()
	img := m.image(target)
	if _, err := os.Lstat(img); err == nil {
		return m.mountLocked(ctx, target, img)
	}
	if fi, err := os.Lstat(target); err == nil {
		if !fi.IsDir() || !Empty(target) {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "volume: %s exists and is not empty", target)
		}
	} else if err := os.MkdirAll(target, 0o755); err != nil {
		return failure(err, "volume: make "+target)
	}
	if err := m.makeImage(ctx, target, img, max(bytes, MinBytes)); err != nil {
		return err
	}
	if err := m.mountLocked(ctx, target, img); err != nil {
		_ = os.Remove(img)
		_ = os.Remove(m.record(target))
		return err
	}
	// ext4 makes lost+found; a worktree must start empty (git refuses a
	// directory holding anything), and e2fsck makes it again when needed.
	_ = os.Remove(filepath.Join(target, "lost+found"))
	m.log.Info("volume: made", "target", target, "bytes", bytes)
	return nil
}

// makeImage writes target's record and a sparse image of size bytes
// holding an empty ext4 file system.
func (m *Manager) makeImage(ctx context.Context, target, img string, bytes int64) error {
	if err := os.WriteFile(m.record(target), []byte(target+"\n"), 0o600); err != nil {
		return failure(err, "volume: record")
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return failure(err, "volume: image")
	}
	err = f.Truncate(bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// -m 0: no blocks kept for root (the sandbox may be root inside);
		// nodiscard: the image is sparse already; lazy init: no zeroing.
		err = run(ctx, m.mkfs, "-q", "-F", "-m", "0", "-L", "sandboxcore",
			"-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", img)
	}
	if err != nil {
		_ = os.Remove(img)
		_ = os.Remove(m.record(target))
		return failure(err, "volume: make the file system")
	}
	return nil
}

// mountLocked mounts img at target unless it is mounted there already; it
// refuses an image a loop device holds (mounted elsewhere, or being
// unmounted), which a second mount would corrupt.
func (m *Manager) mountLocked(ctx context.Context, target, img string) error {
	if Mounted(target) {
		return nil
	}
	if dev := loopOf(img); dev != "" {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "volume: the image of %s is in use by %s; not mounting it twice", target, dev)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return failure(err, "volume: make "+target)
	}
	if !Empty(target) {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "volume: %s holds files while its volume is not mounted; refusing to hide them", target)
	}
	if err := m.check(ctx, target, img); err != nil {
		return err
	}
	if err := run(ctx, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,discard,noinit_itable", img, target); err != nil {
		return failure(err, "volume: mount "+target)
	}
	return nil
}

// check runs `e2fsck -p` (the repairs that need no decision) on img
// before it is mounted: a volume whose backing file system filled up, or
// whose host crashed, may hold errors that mounting would spread. Exit
// codes 0–2 (clean, or repaired) pass; above that the image is kept and
// left unmounted: sandboxapi.ErrWorkspaceUnavailable naming it.
func (m *Manager) check(ctx context.Context, target, img string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.fsck, "-p", img)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() > 0 && exit.ExitCode() <= 2:
		m.log.Warn("volume: file system repaired before mounting", "target", target, "e2fsck", strings.TrimSpace(clip(out)))
		return nil
	}
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable,
		"volume: the file system of %s has errors that e2fsck -p does not repair (%v: %s); its image %s is kept unmounted: run e2fsck -f on it",
		target, err, strings.TrimSpace(clip(out)), img)
}

// Mount mounts target's volume when it has one that is not mounted (a
// remount that failed when the worker started), so that nothing reads or
// writes the empty directory beneath it. A target without a volume, or
// mounted, is success. Errors: those of Attach for an existing volume
// (sandboxapi.ErrConflict: target holds files of its own while unmounted,
// or the image is in use elsewhere; ErrWorkspaceUnavailable).
func (m *Manager) Mount(ctx context.Context, target string) error {
	target = filepath.Clean(target)
	m.mu.Lock()
	defer m.mu.Unlock()
	img := m.image(target)
	if _, err := os.Lstat(img); err != nil {
		return nil
	}
	return m.mountLocked(ctx, target, img)
}

// Detach unmounts target's volume (lazily when files on it are open: the
// space comes back when the last one closes) and deletes its image: what
// target held is gone, mounted or not (a caller keeping work calls Mount
// and saves it first). A target without a volume is success. Errors:
// sandboxapi.ErrWorkspaceUnavailable.
func (m *Manager) Detach(target string) error {
	target = filepath.Clean(target)
	m.mu.Lock()
	defer m.mu.Unlock()
	img := m.image(target)
	if _, err := os.Lstat(img); err != nil {
		return nil
	}
	if Mounted(target) {
		err := unix.Unmount(target, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return failure(err, "volume: unmount "+target)
		}
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failure(err, "volume: delete image")
	}
	_ = os.Remove(m.record(target))
	m.log.Info("volume: deleted", "target", target)
	return nil
}

// Remount mounts every volume of this Manager that is not mounted (after a
// host reboot), making its directory when missing and checking its file
// system first (e2fsck -p), and deletes the volume of a probe that New did
// not finish. It returns the first error after trying all; each is logged.
func (m *Manager) Remount(ctx context.Context) error {
	records, err := filepath.Glob(filepath.Join(m.dir, "*.target"))
	if err != nil {
		return err
	}
	var first error
	for _, rec := range records {
		b, err := os.ReadFile(rec)
		if err != nil {
			continue
		}
		target := strings.TrimSpace(string(b))
		if !filepath.IsAbs(target) || m.record(target) != rec {
			m.log.Warn("volume: record names another path; skipped", "record", rec)
			continue
		}
		if !m.Has(target) {
			_ = os.Remove(rec)
			continue
		}
		if filepath.Dir(target) == m.dir {
			// A probe that New did not finish (the worker was killed).
			if err := m.Detach(target); err == nil {
				_ = os.Remove(target)
			}
			continue
		}
		m.mu.Lock()
		err = m.mountLocked(ctx, target, m.image(target))
		m.mu.Unlock()
		if err != nil {
			m.log.Error("volume: cannot mount again", "target", target, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// HostDir returns the directory whose file system holds what is written
// under dir: Dir() when dir is one of this Manager's mounted volumes, else
// dir. The host's free space is judged there.
func (m *Manager) HostDir(dir string) string {
	if m != nil && m.Has(dir) && Mounted(dir) {
		return m.dir
	}
	return dir
}

// Mounted reports whether dir is a mount point (its device differs from
// its parent's).
func Mounted(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// loopOf returns the loop device whose backing file is img ("" when none),
// from /sys/block/loop*/loop/backing_file.
func loopOf(img string) string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

// run runs a system program, its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(name), err, strings.TrimSpace(clip(out)))
	}
	return nil
}

func clip(b []byte) string {
	s := bufio.NewScanner(strings.NewReader(string(b)))
	var lines []string
	for s.Scan() && len(lines) < 5 {
		lines = append(lines, s.Text())
	}
	return strings.Join(lines, "; ")
}

// failure types a file-system error: ENOSPC and EDQUOT are
// ErrInsufficientDisk, the rest ErrWorkspaceUnavailable.
func failure(err error, what string) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "%s: %v", what, err)
	}
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "%s: %v", what, err)
}

// Empty reports whether dir is a directory that can be read and holds no
// name; false for a missing or unreadable one, or one holding anything.
func Empty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
