package replica

import (
	"archive/tar"
	"crypto/sha1" //nolint:gosec // git's object ids are SHA-1
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// Git modes of the files the replica syncs.
const (
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeSymlink = 0o120000
	modeGitlink = 0o160000
)

// hostFile is one file found by a walk of the worktree.
type hostFile struct {
	entry
	perm fs.FileMode // permission bits (regular files)
}

// gitMode returns the git mode of fi (0 for a type that is not synced).
func gitMode(fi fs.FileInfo) uint32 {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return modeSymlink
	case fi.Mode().IsRegular():
		if fi.Mode().Perm()&0o100 != 0 {
			return modeExec
		}
		return modeFile
	}
	return 0
}

func statSig(fi fs.FileInfo) (mtime, ctime int64, ino uint64) {
	mtime = fi.ModTime().UnixNano()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		ino = st.Ino
	}
	return
}

// sameStat reports whether a recorded entry still describes fi.
func sameStat(e entry, fi fs.FileInfo) bool {
	m, c, i := statSig(fi)
	return e.Mode == gitMode(fi) && e.Size == fi.Size() && e.Mtime == m && e.Ctime == c && e.Ino == i
}

// blobHasher returns a SHA-1 primed with git's blob header for size bytes.
func blobHasher(size int64) hash.Hash {
	h := sha1.New() //nolint:gosec // git's object ids are SHA-1
	fmt.Fprintf(h, "blob %d\x00", size)
	return h
}

// walk lists the worktree's files and symbolic links (slash paths), skipping
// every ".git" entry in any case and special files. Files whose stat
// signature matches the manifest keep their recorded blob; others are
// hashed. It never follows a symbolic link.
func (r *Replica) walk(root *os.Root, known map[string]entry) (map[string]hostFile, []string, error) {
	files := map[string]hostFile{}
	var warnings []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			warnings = append(warnings, fmt.Sprintf("%s: %v", p, err))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p == "." {
			return nil
		}
		if strings.EqualFold(d.Name(), ".git") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", p, err))
			return nil
		}
		gm := gitMode(fi)
		if gm == 0 {
			return nil
		}
		m, c, ino := statSig(fi)
		hf := hostFile{entry: entry{Mode: gm, Size: fi.Size(), Mtime: m, Ctime: c, Ino: ino}, perm: fi.Mode().Perm()}
		if e, ok := known[p]; ok && sameStat(e, fi) {
			hf.Blob = e.Blob
		} else {
			blob, err := hashFile(root, p, fi)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: %v", p, err))
				return nil
			}
			hf.Blob = blob
		}
		files[p] = hf
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return files, warnings, nil
}

// hashFile returns the git blob id of a file or a symbolic link's text.
func hashFile(root *os.Root, p string, fi fs.FileInfo) (string, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(p)
		if err != nil {
			return "", err
		}
		h := blobHasher(int64(len(target)))
		io.WriteString(h, target)
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := blobHasher(fi.Size())
	n, err := io.Copy(h, io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return "", err
	}
	if n != fi.Size() {
		return "", errShort
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// addToTar writes one file of the worktree as "w/<p>" and returns its blob id
// (of the bytes written, which may differ from the walk's if the file
// changed meanwhile).
func addToTar(tw *tar.Writer, root *os.Root, p string) (blob string, gm uint32, err error) {
	fi, err := root.Lstat(p)
	if err != nil {
		return "", 0, err
	}
	gm = gitMode(fi)
	switch gm {
	case modeSymlink:
		target, err := root.Readlink(p)
		if err != nil {
			return "", 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "w/" + p, Linkname: target, Mode: 0o777, Format: tar.FormatPAX}); err != nil {
			return "", 0, err
		}
		h := blobHasher(int64(len(target)))
		io.WriteString(h, target)
		return hex.EncodeToString(h.Sum(nil)), gm, nil
	case modeFile, modeExec:
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return "", 0, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return "", 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "w/" + p, Size: st.Size(), Mode: int64(st.Mode().Perm()), Format: tar.FormatPAX}); err != nil {
			return "", 0, err
		}
		h := blobHasher(st.Size())
		n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, st.Size()))
		if err != nil {
			return "", 0, err
		}
		if n != st.Size() {
			return "", 0, errShort
		}
		return hex.EncodeToString(h.Sum(nil)), gitMode(st), nil
	}
	return "", 0, fmt.Errorf("not a file or symbolic link")
}

// diffRecord is one line of `git diff-tree -r -z --raw`.
type diffRecord struct {
	oldMode, newMode uint32
	newBlob          string
	status           byte
	path             string
}

// parseDiff parses `git diff-tree -r -z --raw --no-renames` output
// (":<old mode> <new mode> <old id> <new id> <status>\0<path>\0"...).
func parseDiff(b []byte) ([]diffRecord, error) {
	var out []diffRecord
	fields := strings.Split(string(b), "\x00")
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("odd number of fields")
	}
	for i := 0; i < len(fields); i += 2 {
		meta, p := fields[i], fields[i+1]
		parts := strings.Fields(strings.TrimPrefix(meta, ":"))
		if !strings.HasPrefix(meta, ":") || len(parts) != 5 || len(parts[4]) != 1 {
			return nil, fmt.Errorf("malformed record %q", sandboxClip(meta))
		}
		om, err1 := strconv.ParseUint(parts[0], 8, 32)
		nm, err2 := strconv.ParseUint(parts[1], 8, 32)
		if err1 != nil || err2 != nil || !isHex40(parts[3]) {
			return nil, fmt.Errorf("malformed record %q", sandboxClip(meta))
		}
		out = append(out, diffRecord{oldMode: uint32(om), newMode: uint32(nm), newBlob: parts[3], status: parts[4][0], path: p})
	}
	return out, nil
}

func sandboxClip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

func isHex40(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// writeFile writes data (read from src, size bytes) at p inside root with
// perm, through a temporary file renamed over p, and returns the blob id of
// what it wrote. Parent directories are created; a non-directory in their
// place is removed first (the remote has a directory there).
func writeFile(root *os.Root, p string, src io.Reader, size int64, perm fs.FileMode) (string, error) {
	if err := ensureParent(root, p); err != nil {
		return "", err
	}
	tmp := path.Join(path.Dir(p), ".sandboxcore-sync-"+newID())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	h := blobHasher(size)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(src, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = replace(root, tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSymlink makes p a symbolic link to target inside root.
func writeSymlink(root *os.Root, p, target string) (string, error) {
	if err := ensureParent(root, p); err != nil {
		return "", err
	}
	tmp := path.Join(path.Dir(p), ".sandboxcore-sync-"+newID())
	if err := root.Symlink(target, tmp); err != nil {
		return "", err
	}
	if err := replace(root, tmp, p); err != nil {
		_ = root.Remove(tmp)
		return "", err
	}
	h := blobHasher(int64(len(target)))
	io.WriteString(h, target)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// replace renames tmp over p; an empty directory at p is removed first.
func replace(root *os.Root, tmp, p string) error {
	if fi, err := root.Lstat(p); err == nil && fi.IsDir() {
		if err := root.Remove(p); err != nil {
			return fmt.Errorf("a directory is in the way: %w", err)
		}
	}
	return root.Rename(tmp, p)
}

// ensureParent creates p's parent directories, replacing any file or
// symbolic link that stands where a directory must be.
func ensureParent(root *os.Root, p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		d := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(d)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := root.Remove(d); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// removePath deletes p (a file or symbolic link) and then its parent
// directories that became empty.
func removePath(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("is a directory")
	}
	if err := root.Remove(p); err != nil {
		return err
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if root.Remove(d) != nil { // not empty (or gone): stop
			break
		}
	}
	return nil
}
