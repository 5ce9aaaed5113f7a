package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// DefaultSandboxUID and DefaultSandboxGID are the host user and group a root
// worker's sandboxes run as (Options.SandboxUID, SANDBOX_RUNTIME_UID): the
// unprivileged "nobody"/"nogroup" ids, never the host's root
// (docs/SECURITY.md "What each runtime isolates").
const (
	DefaultSandboxUID = 65534
	DefaultSandboxGID = 65534
)

// stageRoot is where a root worker stages the idmapped mounts a sandbox is
// built from: below /run (root-owned, tmpfs, every ancestor traversable by
// the sandbox's unprivileged user, gone with a reboot like the mounts).
const stageRoot = "/run/sandboxcore-bwrap"

// idmapper makes idmapped mounts for a root worker's sandboxes (Linux 5.12+,
// a file system that supports them: ext4, xfs, btrfs, tmpfs, overlayfs…).
// Through such a mount a host directory whose files belong to root (the
// worktree, the repository cache, the scratch /tmp the worker creates)
// appears to belong to the sandbox's unprivileged user: the sandbox writes
// its worktree without ever being the host's root, and what it creates is
// stored as root's, as host-side git expects. Ids other than root's appear
// as the overflow id and are not the sandbox's.
type idmapper struct {
	uid, gid uint32
	// userns is a user namespace mapping 0 to uid and 0 to gid (its
	// /proc/<pid>/ns/user, held open: the namespace lives while it is).
	userns *os.File
	// dir is this provider's staging directory (stageRoot/<hash of the
	// scratch directory>, 0711): one directory per sandbox start, removed
	// once the sandbox is built.
	dir string
}

// newIDMapper creates the user namespace of the mapping and the staging
// directory of the provider whose scratch directory is scratch, unmounting
// whatever an earlier worker left staged there. Errors say why idmapped
// mounts cannot be made here.
func newIDMapper(scratch string, uid, gid uint32) (*idmapper, error) {
	// A process in a new user namespace with the mapping, kept only until
	// the namespace is open (an open namespace file keeps it alive).
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(gid), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if uid != sandbox.SharedFileUID && gid != sandbox.SharedFileGID {
		// Shared read-only files stay their owner's (not the sandbox's,
		// and not unmapped: the kernel refuses to delete a file whose
		// owner an idmapped mount does not map).
		cmd.SysProcAttr.UidMappings = append(cmd.SysProcAttr.UidMappings, syscall.SysProcIDMap{ContainerID: sandbox.SharedFileUID, HostID: sandbox.SharedFileUID, Size: 1})
		cmd.SysProcAttr.GidMappings = append(cmd.SysProcAttr.GidMappings, syscall.SysProcIDMap{ContainerID: sandbox.SharedFileGID, HostID: sandbox.SharedFileGID, Size: 1})
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("user namespace for the id mapping: %v", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("user namespace for the id mapping: %v", err)
	}
	sum := sha256.Sum256([]byte(scratch))
	m := &idmapper{uid: uid, gid: gid, userns: ns, dir: filepath.Join(stageRoot, hex.EncodeToString(sum[:6]))}
	for _, d := range []string{stageRoot, m.dir} {
		if err := os.Mkdir(d, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
			_ = ns.Close()
			return nil, fmt.Errorf("staging directory: %v", err)
		}
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			_ = ns.Close()
			return nil, fmt.Errorf("staging directory %s is not a directory of root's", d)
		}
		_ = os.Chmod(d, 0o711)
	}
	m.sweep()
	return m, nil
}

// staging is the idmapped mounts of one sandbox start, in their own
// directory (0711) below the provider's.
type staging struct {
	dir   string
	paths []string
}

// begin makes the staging directory of one sandbox start of runtime id.
func (m *idmapper) begin(id string) (*staging, error) {
	dir, err := os.MkdirTemp(m.dir, id+".")
	if err != nil {
		return nil, fmt.Errorf("staging directory: %v", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("staging directory: %v", err)
	}
	return &staging{dir: dir}, nil
}

// mount stages src (a directory) as an idmapped mount, read-only when ro,
// and returns the host path bwrap binds it from.
func (m *idmapper) mount(st *staging, src string, ro bool) (string, error) {
	dst := filepath.Join(st.dir, strconv.Itoa(len(st.paths)))
	if err := os.Mkdir(dst, 0o700); err != nil {
		return "", fmt.Errorf("idmapped mount of %s: %v", src, err)
	}
	st.paths = append(st.paths, dst)
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return "", fmt.Errorf("idmapped mount of %s: open_tree: %v", src, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(m.userns.Fd())}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return "", fmt.Errorf("idmapped mount of %s (does its file system support idmapped mounts?): %v", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("idmapped mount of %s: move_mount: %v", src, err)
	}
	return dst, nil
}

// release unmounts a start's staged mounts (the sandbox holds its own
// copies once built) and removes its directory.
func (st *staging) release() {
	if st == nil {
		return
	}
	for _, p := range st.paths {
		_ = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		_ = os.Remove(p)
	}
	_ = os.Remove(st.dir)
}

// sweep unmounts and removes every staging directory below the provider's
// (an earlier worker killed while building a sandbox leaves one).
func (m *idmapper) sweep() {
	starts, _ := os.ReadDir(m.dir)
	for _, s := range starts {
		dir := filepath.Join(m.dir, s.Name())
		mounts, _ := os.ReadDir(dir)
		st := &staging{dir: dir}
		for _, e := range mounts {
			if !strings.HasPrefix(e.Name(), ".") {
				st.paths = append(st.paths, filepath.Join(dir, e.Name()))
			}
		}
		st.release()
	}
}
