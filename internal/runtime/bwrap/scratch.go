package bwrap

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// makeScratch creates the runtime's /tmp (0700, owned by the sandbox's
// user): with Options.Volumes and a disk quota, a volume of the quota's
// size (made once: a restart finds it).
func (p *Provider) makeScratch(ctx context.Context, cfg sandboxConfig) error {
	if p.volumes != nil && cfg.limits.DiskGB > 0 && (p.volumes.Has(cfg.scratch) || !holdsFiles(cfg.scratch)) {
		if err := p.volumes.Attach(ctx, cfg.scratch, cfg.limits.DiskGB<<30); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch volume: %v", err)
		}
		if err := os.Chmod(cfg.scratch, 0o700); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
		}
	} else if err := os.Mkdir(cfg.scratch, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
	}
	if cfg.cred != nil && !cfg.idmap { // idmapped: root's, shown as the sandbox's
		if err := os.Chown(cfg.scratch, int(cfg.cred.Uid), int(cfg.cred.Gid)); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
		}
	}
	return nil
}

// holdsFiles reports whether dir is a directory holding anything: a /tmp
// made before volumes were configured, which stays a plain directory.
func holdsFiles(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) > 0
}

// removeScratch deletes a scratch directory (its volume first, when it has
// one), making read-only directories the sandbox left writable first.
func (p *Provider) removeScratch(dir string) error {
	if p.volumes != nil {
		if err := p.volumes.Detach(dir); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: remove scratch volume: %v", err)
		}
	}
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
