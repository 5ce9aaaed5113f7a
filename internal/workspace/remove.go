package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Exists reports whether the workspace's directory is present and registered
// as a worktree of its repository (sandbox.WorkspaceProvider), on its
// volume when it has one (onVolume). Errors: ErrInvalidArgument when
// ws.LocalPath is not a worktree path of this layout; those of onVolume.
func (m *Manager) Exists(ctx context.Context, ws sandboxapi.Workspace) (bool, error) {
	l, err := locate(ws)
	if err != nil {
		return false, err
	}
	if err := m.onVolume(ctx, l.wt); err != nil {
		return false, err
	}
	return isDir(l.wt) && adminDir(l) != "", nil
}

// Remove deletes the worktree directory and its registration under the
// repository lock, keeping the branch and its commits (sandbox.WorkspaceProvider;
// docs/DESIGN.md "Eviction policy" saves work before calling it). A missing worktree
// is success. The directory goes first (read-only subdirectories are made
// writable), then the registration (`git worktree remove --force --force`, with
// `git worktree prune` as fallback). Errors: ErrInvalidArgument (bad
// LocalPath), ErrRepoLocked, ErrWorkspaceUnavailable or ErrInsufficientDisk
// when the directory or registration cannot be deleted; ErrWorkspaceUnavailable
// when its volume cannot be mounted (onVolume), and then nothing is
// deleted. ws.Repo (as Ensure returned it) names the repository lock to
// take.
func (m *Manager) Remove(ctx context.Context, ws sandboxapi.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	unlock, err := m.locker.LockRepo(ctx, ws.Repo)
	if err != nil {
		if sandboxapi.KindOf(err) == nil {
			err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", ws.Repo.Key(), err)
		}
		return err
	}
	defer unlock()
	// A volume that cannot be mounted is never deleted: the work saved
	// before this call was read from its directory, not from the volume.
	if err := m.onVolume(ctx, l.wt); err != nil {
		return err
	}
	if err := m.removeTree(l.wt); err != nil {
		return fsError(err, "remove worktree "+ws.ID)
	}
	if !isDir(l.bare) {
		return nil
	}
	if admin := filepath.Join(l.bare, WorktreesDir, l.name); adminMatches(admin, l.wt) {
		// The directory is gone and its registration is the one of its
		// name: deleting it is what `git worktree remove --force --force`
		// would do, without git's scan of every registered worktree.
		if err := os.RemoveAll(admin); err != nil {
			return fsError(err, "remove the registration of "+ws.ID)
		}
	} else if err := m.unregister(ctx, m.bareGit(l.bare), l); err != nil {
		return err
	}
	m.log.Info("workspace: removed worktree", "workspace_id", ws.ID, "path", l.wt, "branch", ws.BranchName)
	return nil
}

// EnsureMounted mounts ws's worktree volume again when it has one that is
// not mounted (activities.VolumeMounter; onVolume). Errors:
// ErrInvalidArgument (LocalPath), ErrWorkspaceUnavailable.
func (m *Manager) EnsureMounted(ctx context.Context, ws sandboxapi.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	return m.onVolume(ctx, l.wt)
}

// onVolume makes sure the worktree wt is on its volume when it has one:
// mounted again when it is not (a remount that failed when the worker
// started). Nothing may read, write or save the empty directory beneath a
// volume: that is the agent's work missing, and a .git file written there
// would keep the volume from ever being mounted again. Errors:
// sandboxapi.ErrWorkspaceUnavailable (naming the volume and why it cannot
// be mounted); nil without volumes.
func (m *Manager) onVolume(ctx context.Context, wt string) error {
	if m.volumes == nil || !m.volumes.Has(wt) {
		return nil
	}
	if err := m.volumes.Mount(ctx, wt); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "worktree %s is on a volume that is not mounted, and cannot be: %v", wt, err)
	}
	return nil
}

// removeTree deletes a worktree's directory: its volume, when it has one
// (unmounted and its image deleted), then the directory (forceRemoveAll).
func (m *Manager) removeTree(dir string) error {
	if m.volumes != nil {
		if err := m.volumes.Detach(dir); err != nil {
			return err
		}
	}
	return forceRemoveAll(dir)
}

// forceRemoveAll deletes dir without following symlinks; when that fails
// (read-only directories, e.g. a Go module cache), it makes every directory
// writable through an os.Root and retries.
func forceRemoveAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	r, rerr := os.OpenRoot(dir)
	if rerr != nil {
		return err
	}
	_ = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, werr error) error {
		if d != nil && d.IsDir() {
			_ = r.Chmod(p, 0o700)
		}
		return nil
	})
	_ = r.Close()
	return os.RemoveAll(dir)
}
