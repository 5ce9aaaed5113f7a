package depcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Prepared trees (docs/RUNTIMES.md "Prepared trees"): the directories of a
// worktree a successful setup produced (node_modules, .venv, vendor), kept
// under Root/prepared/<key> by the hash of what produced them (TreeKey) and
// given to a new workspace of the same scope whose lockfiles hash the same,
// which then skips its setup. They are listed, sized and evicted with the
// dependency caches (Entry.Scope PreparedScope).
//
// A tree is written once, to a temporary directory renamed into place, and
// never changed after: a restore reads a complete tree or none. Its files
// are read-only; when the worker runs as root they belong to LinkOwnerUID,
// a user no runtime's commands run as, so a hard link to them in a
// worktree is a file the sandboxed command can read and replace but never
// change in place (RestoreTree's ModeLink).

// PreparedScope is the directory under Root holding the prepared trees and
// the Scope of their entries in List.
const PreparedScope Scope = "prepared"

// LinkOwnerUID and LinkOwnerGID own a root worker's prepared-tree files
// (sandbox.SharedFileUID): no runtime runs commands as them, so commands
// without capabilities cannot write or chmod a hard link to them.
const (
	LinkOwnerUID = sandbox.SharedFileUID
	LinkOwnerGID = sandbox.SharedFileGID
)

// Limits of one prepared tree, in bytes (apparent sizes of its regular
// files) and entries (files, directories and links): a setup that produced
// more is not kept (sandboxapi.ErrResourceLimit from SaveTree).
const (
	MaxTreeBytes   = 8 << 30
	MaxTreeEntries = 1 << 20
)

// Restore modes (PreparedStats.Mode).
const (
	// ModeReflink: each file a copy-on-write clone (FICLONE; btrfs, xfs…).
	ModeReflink = "reflink"
	// ModeLink: each file a hard link to the tree's read-only file.
	ModeLink = "link"
	// ModeCopy: each file copied.
	ModeCopy = "copy"
)

// ErrNoTree is RestoreTree's error when no tree is kept under the key.
var ErrNoTree = errors.New("no prepared tree")

// ErrPathExists is RestoreTree's error when a path to restore already
// exists in the worktree (nothing is replaced).
var ErrPathExists = errors.New("already in the worktree")

const (
	treeDir      = "tree"
	manifestFile = "manifest.json"
	tmpPrefix    = ".tmp-"
)

// manifest describes a kept tree (Root/prepared/<key>/manifest.json).
type manifest struct {
	Paths   []string  `json:"paths"`
	Files   int64     `json:"files"`
	Entries int64     `json:"entries"`
	Bytes   int64     `json:"bytes"`
	Created time.Time `json:"created"`
}

// PreparedStats says what a save or restore wrote: Files regular files of
// Bytes bytes, in Mode (restore only).
type PreparedStats struct {
	Files int64
	Bytes int64
	Mode  string
}

// TreeKey returns the key of ws's prepared tree: a hash of the cache scope's
// key (Key: the tree is shared exactly as the caches are), the lockfiles'
// hash, the setup commands, the prepared paths and the runtime (kind and
// image: a tree built in one toolchain is not another's), KeyLen lowercase
// hex digits.
func (c *Caches) TreeKey(ws sandboxapi.Workspace, lockfilesHash string, setup [][]string, paths []string, runtime string) string {
	b, _ := json.Marshal([]any{"prepared/v1", string(c.scope()), Key(c.scope(), ws), lockfilesHash, setup, paths, runtime})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:KeyLen]
}

func (c *Caches) treeRoot() string { return filepath.Join(c.Root, string(PreparedScope)) }

// HasTree reports whether a complete tree is kept under key.
func (c *Caches) HasTree(key string) bool {
	if !validKey(key) {
		return false
	}
	_, err := os.Stat(filepath.Join(c.treeRoot(), key, manifestFile))
	return err == nil
}

// SaveTree keeps the directories paths (clean relative paths, as
// RepoEnvironment.Prepared) of the worktree at worktree as the tree key,
// copying them (reflinks where the file system clones) into a temporary
// directory renamed into place; a tree already kept under key stays and
// SaveTree returns its counts. A path missing from the worktree or not a
// directory is left out; symbolic links are kept as links and never
// followed, special files are left out, and nothing outside the worktree
// is read (the tree is the output of repository code: hostile). When
// owned (a root worker), the files are given to LinkOwnerUID; they are
// always read-only, and always copies: the worktree's own files are never
// taken over (a process of the workspace may hold one open for writing).
// Only the paths present are kept (the manifest names them); none present
// keeps no tree. Errors: sandboxapi.ErrResourceLimit beyond MaxTreeBytes or
// MaxTreeEntries, sandboxapi.ErrInsufficientDisk,
// sandboxapi.ErrRuntimeUnavailable.
func (c *Caches) SaveTree(key, worktree string, paths []string, owned bool) (PreparedStats, error) {
	if !validKey(key) {
		return PreparedStats{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "prepared tree key %q", key)
	}
	final := filepath.Join(c.treeRoot(), key)
	if m, err := readManifest(final); err == nil {
		return PreparedStats{Files: m.Files, Bytes: m.Bytes}, nil
	}
	if err := os.MkdirAll(c.treeRoot(), 0o700); err != nil {
		return PreparedStats{}, fsError(err, "prepared tree root")
	}
	c.removeStaleTemps()
	tmp, err := os.MkdirTemp(c.treeRoot(), tmpPrefix)
	if err != nil {
		return PreparedStats{}, fsError(err, "prepared tree")
	}
	keep := false
	defer func() {
		if !keep {
			_ = removeAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return PreparedStats{}, fsError(err, "prepared tree")
	}
	src, err := os.OpenRoot(worktree)
	if err != nil {
		return PreparedStats{}, sandboxapi.Wrap(sandboxapi.ErrWorkspaceUnavailable, err, "open the worktree")
	}
	defer src.Close()
	cp := &copier{mode: ModeReflink, readOnly: true, maxBytes: MaxTreeBytes, maxEntries: MaxTreeEntries, uid: -1, gid: -1}
	if owned {
		cp.uid, cp.gid = LinkOwnerUID, LinkOwnerGID
	}
	m := manifest{Paths: []string{}, Created: c.now().UTC()}
	for _, p := range paths {
		fi, err := src.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		sd, err := openDirIn(src, p)
		if err != nil {
			return PreparedStats{}, fsError(err, "read "+p)
		}
		dst := filepath.Join(tmp, treeDir, filepath.FromSlash(p))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			sd.Close()
			return PreparedStats{}, fsError(err, "prepared tree")
		}
		dd, err := os.Open(dst)
		if err != nil {
			sd.Close()
			return PreparedStats{}, fsError(err, "prepared tree")
		}
		err = cp.dir(sd, dd, p)
		sd.Close()
		dd.Close()
		if err != nil {
			return PreparedStats{}, err
		}
		m.Paths = append(m.Paths, p)
	}
	if len(m.Paths) == 0 {
		return PreparedStats{}, nil // nothing to keep
	}
	m.Files, m.Entries, m.Bytes = cp.files, cp.entries, cp.bytes
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(tmp, manifestFile), data, 0o644); err != nil {
		return PreparedStats{}, fsError(err, "prepared tree manifest")
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, merr := readManifest(final); merr == nil {
			return PreparedStats{Files: m.Files, Bytes: m.Bytes}, nil // another save won
		}
		return PreparedStats{}, fsError(err, "prepared tree")
	}
	keep = true
	c.touch(final)
	return PreparedStats{Files: m.Files, Bytes: m.Bytes, Mode: cp.mode}, nil
}

// RestoreTree writes the tree key into the worktree at worktree: every path
// of paths must be missing there (those the tree holds are made), and its parents are made as
// needed, never through a symbolic link out of the worktree. Files are
// reflinked where the file system clones; else, when link, hard-linked
// (the caller's promise: the runtime's commands cannot write files owned
// by another user, and the worker writes worktree files only by replacing
// them); else copied. Copies are writable and belong to uid:gid (-1: the
// worker). The tree is checked complete after the walk (an eviction under
// it shows as missing files): on any failure what was written is removed
// and the worktree is as before. Errors: ErrNoTree, ErrPathExists (each
// wrapped), sandboxapi.ErrInsufficientDisk, sandboxapi.ErrRuntimeUnavailable.
func (c *Caches) RestoreTree(key, worktree string, paths []string, link bool, uid, gid int) (PreparedStats, error) {
	if !validKey(key) {
		return PreparedStats{}, fmt.Errorf("prepared tree %q: %w", key, ErrNoTree)
	}
	dir := filepath.Join(c.treeRoot(), key)
	m, err := readManifest(dir)
	if err != nil {
		return PreparedStats{}, fmt.Errorf("prepared tree %s: %w", key, ErrNoTree)
	}
	for _, p := range m.Paths {
		if !slices.Contains(paths, p) {
			return PreparedStats{}, fmt.Errorf("prepared tree %s holds %v, not %v: %w", key, m.Paths, paths, ErrNoTree)
		}
	}
	dst, err := os.OpenRoot(worktree)
	if err != nil {
		return PreparedStats{}, sandboxapi.Wrap(sandboxapi.ErrWorkspaceUnavailable, err, "open the worktree")
	}
	defer dst.Close()
	for _, p := range paths {
		if _, err := dst.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return PreparedStats{}, fmt.Errorf("%s: %w", p, ErrPathExists)
		}
	}
	// The paths the setup left (a path it did not make is not made).
	paths = m.Paths
	c.touch(dir)
	mode := ModeCopy
	if link {
		mode = ModeLink
	}
	cp := &copier{mode: ModeReflink, fallback: mode, uid: uid, gid: gid}
	var made []string
	fail := func(err error) (PreparedStats, error) {
		for _, p := range made {
			_ = dst.RemoveAll(p)
		}
		return PreparedStats{}, err
	}
	for _, p := range paths {
		if top := firstMissing(dst, path.Dir(p)); top != "" {
			made = append(made, top)
		}
		if err := dst.MkdirAll(path.Dir(p), 0o755); err != nil {
			return fail(fsError(err, "make the parent of "+p))
		}
		if err := dst.Mkdir(p, 0o755); err != nil {
			return fail(fsError(err, "make "+p))
		}
		made = append(made, p)
		if uid >= 0 {
			_ = dst.Lchown(p, uid, gid)
		}
		dd, err := openDirIn(dst, p)
		if err != nil {
			return fail(fsError(err, "open "+p))
		}
		sd, err := os.Open(filepath.Join(dir, treeDir, filepath.FromSlash(p)))
		if err != nil {
			dd.Close()
			return fail(fmt.Errorf("prepared tree %s: %w", key, ErrNoTree))
		}
		err = cp.dir(sd, dd, p)
		sd.Close()
		dd.Close()
		if err != nil {
			return fail(err)
		}
	}
	if cp.files != m.Files || cp.entries != m.Entries {
		return fail(fmt.Errorf("prepared tree %s: %d of %d entries read (removed meanwhile): %w", key, cp.entries, m.Entries, ErrNoTree))
	}
	return PreparedStats{Files: cp.files, Bytes: cp.bytes, Mode: cp.mode}, nil
}

// removeStaleTemps deletes the temporary directories of saves that ended
// without renaming them (a worker killed mid-save) an hour ago or more.
func (c *Caches) removeStaleTemps() {
	des, _ := os.ReadDir(c.treeRoot())
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), tmpPrefix) {
			continue
		}
		if fi, err := de.Info(); err == nil && c.now().Sub(fi.ModTime()) > time.Hour {
			_ = removeAll(filepath.Join(c.treeRoot(), de.Name()))
		}
	}
}

// firstMissing returns the shortest ancestor-or-self of dir (a clean
// relative path) missing from r, "" when dir exists.
func firstMissing(r *os.Root, dir string) string {
	if dir == "." {
		return ""
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if _, err := r.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p
		}
	}
	return ""
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

// openDirIn opens the directory rel of r without following a symbolic link
// as its last component (os.Root keeps the rest inside r).
func openDirIn(r *os.Root, rel string) (*os.File, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// copier copies directory trees between open directories entry by entry
// through their descriptors (*at calls with AT_SYMLINK_NOFOLLOW/O_NOFOLLOW:
// nothing is followed out of either tree).
type copier struct {
	// mode is how files are written: ModeReflink until the file system
	// refuses a clone, then fallback (ModeCopy when "").
	mode, fallback string
	// readOnly: written files lose their write bits and gain read for all.
	readOnly bool
	// uid, gid own what is written (-1: the worker).
	uid, gid int
	// maxBytes and maxEntries bound the copy (0: unbounded).
	maxBytes, maxEntries int64

	files, entries, bytes int64
}

func (cp *copier) dir(src, dst *os.File, rel string) error {
	des, err := src.ReadDir(-1)
	if err != nil {
		return fsError(err, "read "+rel)
	}
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	for _, de := range des {
		name := de.Name()
		p := rel + "/" + name
		cp.entries++
		if cp.maxEntries > 0 && cp.entries > cp.maxEntries {
			return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "prepared tree: more than %d entries", cp.maxEntries)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fsError(err, "stat "+p)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := unix.Mkdirat(dfd, name, 0o755); err != nil {
				return fsError(err, "make "+p)
			}
			cp.chown(dfd, name)
			if err := cp.subdir(sfd, dfd, name, p); err != nil {
				return err
			}
		case unix.S_IFREG:
			cp.files++
			cp.bytes += st.Size
			if cp.maxBytes > 0 && cp.bytes > cp.maxBytes {
				return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "prepared tree: more than %d bytes", cp.maxBytes)
			}
			if err := cp.file(sfd, dfd, name, st.Mode&0o7777, st.Size); err != nil {
				return fsError(err, "write "+p)
			}
		case unix.S_IFLNK:
			target, err := readlinkat(sfd, name)
			if err != nil {
				return fsError(err, "read link "+p)
			}
			if err := unix.Symlinkat(target, dfd, name); err != nil {
				return fsError(err, "link "+p)
			}
			cp.chown(dfd, name)
		default:
			cp.entries-- // sockets, fifos, devices: not kept
		}
	}
	return nil
}

func (cp *copier) subdir(sfd, dfd int, name, p string) error {
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fsError(err, "open "+p)
	}
	sf := os.NewFile(uintptr(s), p)
	defer sf.Close()
	d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fsError(err, "open "+p)
	}
	df := os.NewFile(uintptr(d), p)
	defer df.Close()
	return cp.dir(sf, df, p)
}

// file writes the regular file name of sfd into dfd as cp.mode says.
func (cp *copier) file(sfd, dfd int, name string, perm uint32, size int64) error {
	if cp.mode == ModeLink {
		err := unix.Linkat(sfd, name, dfd, name, 0)
		switch {
		case errors.Is(err, unix.EXDEV):
			// The worktree is on another file system than the tree:
			// every file is a copy.
			cp.mode = ModeCopy
		case !errors.Is(err, unix.EMLINK):
			return err
		}
		// Else the inode has all the links it may: this one is a copy.
	}
	if cp.readOnly {
		perm = perm&0o555 | 0o444
	} else {
		perm |= 0o200
	}
	// O_NONBLOCK: a name swapped for a fifo since the stat must not hang
	// the open; what was opened is checked again below.
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	sf := os.NewFile(uintptr(s), name)
	defer sf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(s, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		return fmt.Errorf("%s changed while it was read", name)
	}
	d, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm&0o777)
	if err != nil {
		return err
	}
	df := os.NewFile(uintptr(d), name)
	defer df.Close()
	copied := false
	if cp.mode == ModeReflink {
		switch err := unix.IoctlFileClone(d, s); {
		case err == nil:
			copied = true
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.ENOSYS):
			cp.mode = cp.fallback
			if cp.mode == "" {
				cp.mode = ModeCopy
			}
			if cp.mode == ModeLink {
				df.Close()
				_ = unix.Unlinkat(dfd, name, 0)
				return cp.file(sfd, dfd, name, perm, size)
			}
		default:
			return err
		}
	}
	if !copied {
		// At most the size counted: a file growing meanwhile is cut, never
		// read past the tree's bounds.
		if _, err := io.CopyN(df, sf, size); err != nil {
			return err
		}
	}
	if err := df.Chmod(os.FileMode(perm & 0o777)); err != nil {
		return err
	}
	if cp.uid >= 0 {
		return df.Chown(cp.uid, cp.gid)
	}
	return nil
}

func (cp *copier) chown(dfd int, name string) {
	if cp.uid >= 0 && !cp.readOnly {
		_ = unix.Fchownat(dfd, name, cp.uid, cp.gid, unix.AT_SYMLINK_NOFOLLOW)
	}
}

func readlinkat(fd int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}
