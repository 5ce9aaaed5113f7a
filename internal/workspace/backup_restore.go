package workspace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Restoring a workspace backup, and bringing a worktree to a tree by raw
// writes (used by restore, rollback and fork; the format is described in
// backup.go).

// Restore writes the pending backup of ws into its worktree, which Ensure has
// just re-created at the branch tip (edit, task) or at the base commit
// (analysis: HEAD is then moved, detached, to the backup's parent). The
// backup commit must exist with the recorded tree and parent; the ref is
// re-created when missing. The worktree is brought to the backup's tree by
// raw writes and deletions through an os.Root (no git checkout, no filters,
// index untouched), checked with a fresh snapshot (up to three rounds), the
// recorded permission bits are applied, and the manifest is marked restored.
// Calling it again after a success returns false. Errors: ErrConflict (the
// branch is not at the backup's parent: it moved while the workspace was
// evicted; the backup stays in place), ErrWorkspaceUnavailable (backup
// missing or unverifiable, or the worktree cannot be brought to the tree),
// ErrInsufficientDisk, ErrWorkspaceNotFound.
func (b *Backups) Restore(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	man, w, bg, err := b.openPending(ctx, ws, b.evicted())
	if err != nil || w == nil {
		return man, false, err
	}
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return man, false, err
	}
	if headC != man.Head || branch != man.Branch {
		if branch != "" || man.Branch != "" {
			return man, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s: branch %q is at %s, but its eviction backup was taken on %q at %s; the work is kept at %s and %s",
				ws.ID, branch, headC, man.Branch, man.Head, man.Ref, man.PatchPath)
		}
		// Analysis (detached): move HEAD to the backup's parent, index following.
		if _, err := w.git.run(ctx, "update-ref", "--no-deref", "-m", "sandboxcore: restore", "HEAD", man.Head); err != nil {
			return man, false, gitx.Classify(err, "git update-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
		}
		if _, err := w.git.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
			return man, false, gitx.Classify(err, "git read-tree", sandboxapi.ErrWorkspaceUnavailable)
		}
	}
	if err := b.bringTo(ctx, w, bg, man.Tree, man.Modes); err != nil {
		return man, false, err
	}
	at := b.m.now().UTC()
	man.RestoredAt = &at
	if err := b.writeManifest(b.evicted(), man); err != nil {
		return man, false, err
	}
	b.m.log.Info("workspace: eviction backup restored", "workspace_id", ws.ID, "commit", man.Commit, "files", man.Files)
	return man, true, nil
}

// checkBackupCommit checks that man's commit exists with the recorded tree
// and parent, and re-creates its ref when missing. Errors: ErrWorkspaceUnavailable.
func (b *Backups) checkBackupCommit(ctx context.Context, bg gitCtx, man sandbox.WorkspaceBackup, wsID string) error {
	out, err := bg.run(ctx, "log", "-1", "--format=%T %P", "--end-of-options", man.Commit, "--")
	if f := strings.Fields(string(out)); err != nil || len(f) != 2 || f[0] != man.Tree || f[1] != man.Head {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "backup commit %s of workspace %s is missing or does not match its manifest; the patch is at %s", man.Commit, wsID, man.PatchPath)
	}
	if got, _ := b.m.firstCommit(ctx, bg, man.Ref); got != man.Commit {
		if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: restore backup ref", man.Ref, man.Commit); err != nil {
			return gitx.Classify(err, "git update-ref "+man.Ref, sandboxapi.ErrWorkspaceUnavailable)
		}
	}
	return nil
}

// bringTo makes the worktree's content exactly tree, with the permission
// bits modes (paths absent from modes get 0o644, or 0o755 when executable):
// raw writes and deletions through an os.Root (no git checkout, no filters,
// the index untouched), checked with a fresh snapshot (up to three rounds),
// then every permission bit fixed. Ignored files are left alone. Errors:
// ErrWorkspaceUnavailable (the worktree cannot be brought to the tree),
// ErrInsufficientDisk.
func (b *Backups) bringTo(ctx context.Context, w *wtRepo, bg gitCtx, tree string, modes map[string]uint32) error {
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return fsError(err, "open worktree")
	}
	defer root.Close()
	var snap bkSnapshot
	done := false
	for round := 0; round < 3 && !done; round++ {
		if snap, err = b.snapshot(ctx, w); err != nil {
			return err
		}
		if snap.tree == tree {
			done = true
			break
		}
		changes, err := bkDiffTrees(ctx, bg, snap.tree, tree)
		if err != nil {
			return err
		}
		if err := b.apply(ctx, bg, root, changes, modes); err != nil {
			return err
		}
	}
	if !done {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "worktree %s does not match tree %s after writing it", w.wt, tree)
	}
	// The trees are equal, so every path's git mode is; fix the permission
	// bits git does not record.
	return fixPermissions(root, modes, snap.modes)
}

// fixPermissions sets the permission bits git does not record, on a
// worktree whose tree is already right: modes (path → bits) as wanted, and
// the default bits (0644, or 0755 when the owner may execute) on every path
// of current (the bits found now, outside the defaults) that modes does not
// name. Paths that are gone are skipped. Errors: an fsError.
func fixPermissions(root *os.Root, modes, current map[string]uint32) error {
	for p, perm := range modes {
		if err := root.Chmod(p, fs.FileMode(perm)&fs.ModePerm); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "set permissions of "+p)
		}
	}
	for p, cur := range current {
		if _, ok := modes[p]; ok {
			continue
		}
		want := fs.FileMode(0o644)
		if cur&0o100 != 0 {
			want = 0o755
		}
		if err := root.Chmod(p, want); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "set permissions of "+p)
		}
	}
	return nil
}

// bkTreeChange is one record of `git diff-tree -r -z`.
type bkTreeChange struct {
	newMode string
	newSHA  string
	status  byte
	path    string
}

// bkDiffTrees lists the changes from tree from to tree to (`git diff-tree
// -r -z --no-renames`, parseDiffTree). Errors: ErrWorkspaceUnavailable.
func bkDiffTrees(ctx context.Context, bg gitCtx, from, to string) ([]bkTreeChange, error) {
	out, err := bg.run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--end-of-options", from, to, "--")
	if err != nil {
		return nil, gitx.Classify(err, "git diff-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	return parseDiffTree(out)
}

// parseDiffTree parses the output of `git diff-tree -r -z` without renames:
// NUL-separated pairs of ":<old mode> <new mode> <old sha> <new sha>
// <status>" and a path. Errors: ErrWorkspaceUnavailable for a record of
// another shape.
func parseDiffTree(out []byte) ([]bkTreeChange, error) {
	var list []bkTreeChange
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) != 5 || len(meta[4]) == 0 {
			return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git diff-tree: unexpected record %q", fields[i])
		}
		list = append(list, bkTreeChange{newMode: meta[1], newSHA: meta[3], status: meta[4][0], path: fields[i+1]})
	}
	return list, nil
}

// apply performs changes on the worktree: deletions first, then writes.
func (b *Backups) apply(ctx context.Context, bg gitCtx, root *os.Root, changes []bkTreeChange, modes map[string]uint32) error {
	if err := applyDeletions(root, changes); err != nil {
		return err
	}
	for _, c := range changes {
		if c.status == 'D' || c.newMode == "160000" {
			continue
		}
		if err := b.m.volumes.Room(0); err != nil {
			return err
		}
		if err := writeChange(ctx, bg, root, c, modes); err != nil {
			return err
		}
	}
	return nil
}

// applyDeletions removes the paths that changes delete (status D); a path
// already gone is fine, and a gitlink's directory is left alone. Errors: an
// fsError.
func applyDeletions(root *os.Root, changes []bkTreeChange) error {
	for _, c := range changes {
		if c.status != 'D' {
			continue
		}
		if err := root.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if fi, lerr := root.Lstat(c.path); lerr == nil && fi.IsDir() {
				continue // a gitlink's directory: left alone
			}
			return fsError(err, "restore: delete "+c.path)
		}
	}
	return nil
}

// writeChange writes one added or modified path of a change: its parents
// made directories, whatever is at the path removed, then the symlink
// (120000) or the regular file (100644, 100755) with the blob's raw bytes
// and changePerm's bits. Errors: an fsError, ErrWorkspaceUnavailable (the
// blob cannot be read).
func writeChange(ctx context.Context, bg gitCtx, root *os.Root, c bkTreeChange, modes map[string]uint32) error {
	if err := bkMakeParents(root, c.path); err != nil {
		return err
	}
	if fi, err := root.Lstat(c.path); err == nil {
		if fi.IsDir() {
			err = root.RemoveAll(c.path)
		} else {
			err = root.Remove(c.path)
		}
		if err != nil {
			return fsError(err, "restore: replace "+c.path)
		}
	}
	switch c.newMode {
	case "120000":
		var target bytes.Buffer
		if _, err := bg.runIO(ctx, nil, &target, "cat-file", "blob", c.newSHA); err != nil {
			return gitx.Classify(err, "git cat-file (restore)", sandboxapi.ErrWorkspaceUnavailable)
		}
		if err := root.Symlink(target.String(), c.path); err != nil {
			return fsError(err, "restore: symlink "+c.path)
		}
	case "100644", "100755":
		f, err := root.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fsError(err, "restore: create "+c.path)
		}
		_, err = bg.runIO(ctx, nil, f, "cat-file", "blob", c.newSHA)
		if cerr := f.Close(); err == nil && cerr != nil {
			return fsError(cerr, "restore: write "+c.path)
		}
		if err != nil {
			return gitx.Classify(err, "git cat-file (restore)", sandboxapi.ErrWorkspaceUnavailable)
		}
		if err := root.Chmod(c.path, changePerm(c, modes)); err != nil {
			return fsError(err, "restore: chmod "+c.path)
		}
	}
	return nil
}

// changePerm is the permission bits a regular file written for c gets: those
// recorded in modes, else 0755 for git mode 100755 and 0644 otherwise.
func changePerm(c bkTreeChange, modes map[string]uint32) fs.FileMode {
	if p, ok := modes[c.path]; ok {
		return fs.FileMode(p) & fs.ModePerm
	}
	if c.newMode == "100755" {
		return 0o755
	}
	return 0o644
}

// bkMakeParents creates the parent directories of rel, replacing any
// non-directory in the way.
func bkMakeParents(root *os.Root, rel string) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(dir)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := root.Remove(dir); err != nil {
				return fsError(err, "restore: replace "+dir)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "restore: "+dir)
		}
		if err := root.Mkdir(dir, 0o755); err != nil {
			return fsError(err, "restore: mkdir "+dir)
		}
	}
	return nil
}

// openPending finds ws's pending backup of kind k (pending) and, when
// there is one, opens the worktree and checks the backup's commit in the
// bare repository (checkBackupCommit), returning both places to run git.
// No pending backup: the manifest (restored, or zero) and a nil worktree.
// Errors: as pending, openWorktree and checkBackupCommit.
func (b *Backups) openPending(ctx context.Context, ws sandboxapi.Workspace, k bkKind) (sandbox.WorkspaceBackup, *wtRepo, gitCtx, error) {
	man, ok, err := b.pending(ws.ID, k)
	if err != nil || !ok {
		return man, nil, gitCtx{}, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return man, nil, gitCtx{}, err
	}
	bg := b.m.bareGit(w.bare)
	if err := b.checkBackupCommit(ctx, bg, man, ws.ID); err != nil {
		return man, nil, gitCtx{}, err
	}
	return man, w, bg, nil
}
