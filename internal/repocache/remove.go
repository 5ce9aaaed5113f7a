package repocache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Remove deletes repo's mirror (sandbox.RepoCacheProvider.Remove): under
// LockRepo, the bare directory is renamed into <Root>/repos/.trash and deleted
// from there, so no reader ever sees a half-deleted mirror at the final path.
// A missing mirror is success. The lock file and the repository's worktrees
// directory are left alone (callers remove workspaces first; the repository
// directory itself is removed only when empty). Errors wrap
// ErrInvalidArgument, ErrRepoLocked, ErrRepoCacheUnavailable.
func (c *Cache) Remove(ctx context.Context, repo sandboxapi.RepoIdentity) error {
	id, err := identity(repo)
	if err != nil {
		return err
	}
	unlock, err := c.LockRepo(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	c.cleanLeftovers(id)
	bare := filepath.Join(c.repoDir(id), bareDirName)
	if _, err := os.Lstat(bare); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := c.moveAside(id, bare); err != nil {
		return err
	}
	_ = os.Remove(c.repoDir(id)) // only succeeds when empty
	c.log.InfoContext(ctx, "repocache: removed", "repo", id.Key(), "path", bare)
	return nil
}

// moveAside renames dir into the trash and deletes it there. A failed delete
// is retried by the next cleanLeftovers of the same repository.
func (c *Cache) moveAside(id sandboxapi.RepoIdentity, dir string) error {
	if err := os.MkdirAll(c.trashDir(), 0o755); err != nil {
		return fsError(err, "move aside "+dir)
	}
	dst := filepath.Join(c.trashDir(), sandbox.RepoCacheIDFor(c.hostID, id)+"-"+randomHex())
	if err := os.Rename(dir, dst); err != nil {
		return fsError(err, "move aside "+dir)
	}
	if err := os.RemoveAll(dst); err != nil {
		c.log.Warn("repocache: delete moved-aside mirror", "path", dst, "error", err)
	}
	return nil
}

// keepAside renames dir to <Root>/repos/.broken/<cache-id>-<unix-seconds>-<random>
// and keeps it (nothing ever deletes .broken) and returns the new path.
func (c *Cache) keepAside(id sandboxapi.RepoIdentity, dir string) (string, error) {
	broken := filepath.Join(c.reposDir, brokenDirName)
	if err := os.MkdirAll(broken, 0o755); err != nil {
		return "", fsError(err, "move aside "+dir)
	}
	dst := filepath.Join(broken, fmt.Sprintf("%s-%d-%s", sandbox.RepoCacheIDFor(c.hostID, id), c.now().Unix(), randomHex()))
	if err := os.Rename(dir, dst); err != nil {
		return "", fsError(err, "move aside "+dir)
	}
	return dst, nil
}

// holdsAgentWork reports whether a (broken) bare directory contains anything
// agents made: a registered worktree, a branch, or a saved state of a
// workspace (eviction and destroy backups, checkpoints: refs/sandbox/*),
// loose or packed.
func holdsAgentWork(bare string) bool {
	if entries, err := os.ReadDir(filepath.Join(bare, "worktrees")); err == nil && len(entries) > 0 {
		return true
	}
	for _, dir := range []string{"heads", "sandbox"} {
		found := false
		_ = filepath.WalkDir(filepath.Join(bare, "refs", dir), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		if found {
			return true
		}
	}
	if b, err := os.ReadFile(filepath.Join(bare, "packed-refs")); err == nil &&
		(strings.Contains(string(b), " refs/heads/") || strings.Contains(string(b), " refs/sandbox/")) {
		return true
	}
	return false
}

// cleanLeftovers deletes repo's staging directories (a clone killed
// mid-way: never trusted) and trash. Called under the repository lock, so no
// live clone of this repository can own them.
func (c *Cache) cleanLeftovers(id sandboxapi.RepoIdentity) {
	prefix := sandbox.RepoCacheIDFor(c.hostID, id) + "-"
	for _, dir := range []string{c.stagingDir(), c.trashDir()} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				p := filepath.Join(dir, e.Name())
				if err := os.RemoveAll(p); err != nil {
					c.log.Warn("repocache: delete leftover", "path", p, "error", err)
				} else {
					c.log.Info("repocache: deleted leftover", "repo", id.Key(), "path", p)
				}
			}
		}
	}
}
