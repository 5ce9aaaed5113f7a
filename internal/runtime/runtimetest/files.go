package runtimetest

import (
	"os"
	"path/filepath"
)

// Files is a view of a runtime's workdir for the suite: paths are relative
// to the workdir ("../x" names its parent's entry). A host-directory runtime
// uses HostFiles; a remote one implements it over its backend, reaching
// into the sandbox without going through the runtime's own sync.
type Files interface {
	// WriteFile creates or replaces a file with perm (parents must exist).
	WriteFile(rel string, data []byte, perm os.FileMode) error
	// ReadFile returns a file's bytes.
	ReadFile(rel string) ([]byte, error)
	// MkdirAll creates a directory and its parents.
	MkdirAll(rel string) error
	// Symlink makes rel a symbolic link to target.
	Symlink(target, rel string) error
	// Exists reports whether rel exists (a dangling symlink exists).
	Exists(rel string) bool
	// Size returns a file's size in bytes, -1 when it does not exist.
	Size(rel string) int64
}

// HostFiles is Files over a host directory.
func HostFiles(dir string) Files { return hostFiles(dir) }

type hostFiles string

func (h hostFiles) p(rel string) string { return filepath.Join(string(h), rel) }

func (h hostFiles) WriteFile(rel string, data []byte, perm os.FileMode) error {
	return os.WriteFile(h.p(rel), data, perm)
}
func (h hostFiles) ReadFile(rel string) ([]byte, error) { return os.ReadFile(h.p(rel)) }
func (h hostFiles) MkdirAll(rel string) error           { return os.MkdirAll(h.p(rel), 0o755) }
func (h hostFiles) Symlink(target, rel string) error    { return os.Symlink(target, h.p(rel)) }
func (h hostFiles) Exists(rel string) bool {
	_, err := os.Lstat(h.p(rel))
	return err == nil
}
func (h hostFiles) Size(rel string) int64 {
	fi, err := os.Stat(h.p(rel))
	if err != nil {
		return -1
	}
	return fi.Size()
}
