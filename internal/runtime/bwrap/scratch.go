package bwrap

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// makeScratch creates the runtime's /tmp (0700, owned by the sandbox's user).
func (p *Provider) makeScratch(cfg sandboxConfig) error {
	if err := os.Mkdir(cfg.scratch, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
	}
	if cfg.cred != nil && !cfg.idmap { // idmapped: root's, shown as the sandbox's
		if err := os.Chown(cfg.scratch, int(cfg.cred.Uid), int(cfg.cred.Gid)); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
		}
	}
	return nil
}

// removeScratch deletes a scratch directory, making read-only directories
// the sandbox left writable first.
func removeScratch(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: remove scratch directory: %v", err)
	}
	return nil
}
