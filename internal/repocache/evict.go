package repocache

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RemoveUnused deletes repo's mirror like Remove, for eviction (docs/DESIGN.md
// "Eviction policy": never while a workspace uses it), but decides under the
// same repository lock that worktree creation takes, so no workspace can
// appear between the decision and the deletion. Under the lock it refuses,
// with ErrConflict, a mirror that still registers a worktree
// (<bare>/worktrees is not empty); then it calls check with the bare path
// (check may run git in the mirror but must not take the lock) and keeps the
// mirror when check fails, returning check's error. A missing mirror is
// success and check is not called. Errors: ErrInvalidArgument, ErrRepoLocked,
// ErrRepoCacheUnavailable, ErrConflict, or check's error.
func (c *Cache) RemoveUnused(ctx context.Context, repo sandboxapi.RepoIdentity, check func(bare string) error) error {
	id, err := identity(repo)
	if err != nil {
		return err
	}
	unlock, err := c.LockRepo(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	bare := filepath.Join(c.repoDir(id), bareDirName)
	if _, err := os.Lstat(bare); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if entries, err := os.ReadDir(filepath.Join(bare, "worktrees")); err == nil && len(entries) > 0 {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "repo cache %s still has %d registered worktree(s)", id.Key(), len(entries))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "inspect worktrees of "+bare)
	}
	if check != nil {
		if err := check(bare); err != nil {
			return err
		}
	}
	c.cleanLeftovers(id)
	if err := c.moveAside(id, bare); err != nil {
		return err
	}
	_ = os.Remove(c.repoDir(id)) // only succeeds when empty
	c.log.InfoContext(ctx, "repocache: removed unused mirror (eviction)", "repo", id.Key(), "path", bare)
	return nil
}
