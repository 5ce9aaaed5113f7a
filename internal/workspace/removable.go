package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// CheckRemovable walks the worktree (symlinks not followed) and fails on the
// first directory whose entries this process could not delete even after
// making its own directories writable: a directory owned by another uid that
// grants us no write and search permission, or a sticky directory holding
// another uid's entry. Nothing is changed. Errors: ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath), ErrWorkspaceUnavailable naming the obstacle.
func (b *Backups) CheckRemovable(ctx context.Context, ws sandboxapi.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	if !isDir(l.wt) {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s: worktree directory is missing", ws.ID)
	}
	if b.euid == 0 {
		return nil
	}
	n := 0
	return filepath.WalkDir(l.wt, func(p string, d fs.DirEntry, werr error) error {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if werr != nil {
			if d != nil && d.IsDir() && p != l.wt {
				// Unreadable: fine when it is ours (it is made writable first).
				if fi, err := os.Lstat(p); err == nil && b.owns(fi) {
					return fs.SkipDir
				}
				return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s: %s cannot be listed by uid %d", ws.ID, bkRel(l.wt, p), b.euid)
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		if why := b.undeletableEntries(p, fi); why != "" {
			return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s: entries of %s cannot be deleted by uid %d: %s", ws.ID, bkRel(l.wt, p), b.euid, why)
		}
		return nil
	})
}

func bkRel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil || r == "." {
		return "the worktree root"
	}
	return r
}

func (b *Backups) owns(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == b.euid
}

// undeletableEntries says why the entries of directory p (info fi) cannot be
// deleted by b.euid, or "" when they can.
func (b *Backups) undeletableEntries(p string, fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	perm := fi.Mode().Perm()
	if int(st.Uid) != b.euid {
		bits := perm & 0o007
		for _, g := range b.groups {
			if uint32(g) == st.Gid {
				bits = (perm >> 3) & 0o007
				break
			}
		}
		if bits&0o3 != 0o3 { // write and search
			return fmt.Sprintf("owned by uid %d, mode %o", st.Uid, perm)
		}
	}
	if fi.Mode()&fs.ModeSticky != 0 && int(st.Uid) != b.euid {
		entries, err := os.ReadDir(p)
		if err != nil {
			return "sticky and unreadable"
		}
		for _, e := range entries {
			if efi, err := e.Info(); err == nil && !b.owns(efi) {
				return fmt.Sprintf("sticky, and %s belongs to another uid", e.Name())
			}
		}
	}
	return ""
}
