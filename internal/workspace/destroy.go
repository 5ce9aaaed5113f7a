package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SaveForDestroy saves ws's work before a destroy (sandbox.LifecycleProvider):
// a ready workspace whose worktree is dirty or has unpushed commits is
// backed up (Backup's mechanism and verification) onto DestroyedRef with its
// patch and manifest under <Dir>/destroyed; an evicted workspace's pending
// eviction backup is moved there (same commit; ref, patch and manifest
// renamed). It returns false when nothing needed saving. Errors:
// ErrConflict (an earlier destroy backup of this id was never restored:
// restore it, or destroy with discard), the errors of Backup.
func (b *Backups) SaveForDestroy(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	dk := b.destroyed()
	if prev, ok, err := b.pending(ws.ID, dk); err != nil {
		return sandbox.WorkspaceBackup{}, false, err
	} else if ok {
		return prev, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s still has the unrestored backup of an earlier destroy (%s): restore it first, or destroy with discard", ws.ID, prev.Ref)
	}
	if ws.State == sandboxapi.WorkspaceEvicted {
		return b.adoptEvicted(ctx, ws)
	}
	if ok, err := b.m.Exists(ctx, ws); err != nil || !ok {
		return sandbox.WorkspaceBackup{}, false, err
	}
	un, err := b.UnsavedWork(ctx, ws)
	if err != nil {
		return sandbox.WorkspaceBackup{}, false, err
	}
	if !un.NeedsBackup() {
		return sandbox.WorkspaceBackup{}, false, nil
	}
	man, err := b.backupAs(ctx, ws, dk)
	return man, err == nil, err
}

// adoptEvicted moves the pending eviction backup of ws to the destroy backups.
func (b *Backups) adoptEvicted(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	ek, dk := b.evicted(), b.destroyed()
	man, ok, err := b.pending(ws.ID, ek)
	if err != nil || !ok {
		return man, false, err
	}
	l, err := locate(ws)
	if err != nil {
		return man, false, err
	}
	bg := b.m.bareGit(l.bare)
	if err := b.checkBackupCommit(ctx, bg, man, ws.ID); err != nil {
		return man, false, err
	}
	if err := os.MkdirAll(dk.dir, 0o700); err != nil {
		return man, false, fsError(err, "backup directory")
	}
	if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: destroy backup (from eviction)", dk.ref(ws.ID), man.Commit); err != nil {
		return man, false, gitx.Classify(err, "git update-ref "+dk.ref(ws.ID), sandboxapi.ErrWorkspaceUnavailable)
	}
	oldPatch := man.PatchPath
	man.Ref, man.PatchPath = dk.ref(ws.ID), dk.patchPath(ws.ID)
	if err := os.Rename(oldPatch, man.PatchPath); err != nil {
		return man, false, fsError(err, "move patch artifact")
	}
	if !isHex(man.BaseCommit) {
		man.BaseCommit = ws.BaseCommit
	}
	if err := b.writeManifest(dk, man); err != nil {
		return man, false, err
	}
	if err := os.Remove(ek.manifestPath(ws.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return man, false, fsError(err, "remove eviction manifest")
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "--end-of-options", ek.ref(ws.ID), man.Commit); err != nil {
		b.m.log.Warn("workspace: drop eviction ref after moving it", "workspace_id", ws.ID, "err", err)
	}
	return man, true, nil
}

// PendingDestroyed returns ws's destroy backup not yet restored
// (sandbox.LifecycleProvider). Errors: ErrInvalidArgument, ErrWorkspaceUnavailable.
func (b *Backups) PendingDestroyed(_ context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	return b.pending(ws.ID, b.destroyed())
}

// RestoreDestroyed brings ws's pending destroy backup back into its fresh
// worktree (sandbox.LifecycleProvider): the worktree must be clean, on the
// backup's branch, at the workspace's base commit (no commits of its own);
// the branch is moved to the backup's parent, the index reset to it, the
// files written back with their permission bits (bringTo), the backup's base
// commit recorded again, the manifest marked restored and DestroyedRef
// deleted (the work is in the worktree again; the patch stays). Errors:
// ErrWorkspaceDirty (not fresh), ErrConflict (another branch),
// ErrWorkspaceUnavailable, ErrWorkspaceNotFound.
func (b *Backups) RestoreDestroyed(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	dk := b.destroyed()
	man, w, bg, err := b.openPending(ctx, ws, dk)
	if err != nil || w == nil {
		return man, false, err
	}
	st, err := b.m.Status(ctx, ws)
	if err != nil {
		return man, false, err
	}
	if st.Branch != man.Branch {
		return man, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s is on %q, its destroyed work on %q", ws.ID, st.Branch, man.Branch)
	}
	if st.Dirty || st.Head != st.BaseCommit {
		return man, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s has changes of its own since it was created (%d commits, dirty=%t); restore needs it fresh: destroy it with discard first, or keep working and leave the backup at %s",
			ws.ID, st.CommitsSinceBase, st.Dirty, man.Ref)
	}
	g := w.git
	if man.Branch != "" {
		if _, err := g.run(ctx, "update-ref", "-m", "sandboxcore: restore destroyed work", "--end-of-options", "refs/heads/"+man.Branch, man.Head, st.Head); err != nil {
			return man, false, gitx.Classify(err, "git update-ref refs/heads/"+man.Branch, sandboxapi.ErrWorkspaceUnavailable)
		}
	} else if _, err := g.run(ctx, "update-ref", "--no-deref", "-m", "sandboxcore: restore destroyed work", "HEAD", man.Head); err != nil {
		return man, false, gitx.Classify(err, "git update-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
		return man, false, gitx.Classify(err, "git read-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	if err := b.bringTo(ctx, w, bg, man.Tree, man.Modes); err != nil {
		return man, false, err
	}
	if isHex(man.BaseCommit) {
		if err := writeBase(w.admin, man.BaseCommit, b.m.now()); err != nil {
			return man, false, err
		}
	}
	at := b.m.now().UTC()
	man.RestoredAt = &at
	if err := b.writeManifest(dk, man); err != nil {
		return man, false, err
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "--end-of-options", man.Ref, man.Commit); err != nil {
		b.m.log.Warn("workspace: drop destroy backup ref after restoring it", "workspace_id", ws.ID, "err", err)
	}
	b.m.log.Info("workspace: destroyed work restored", "workspace_id", ws.ID, "commit", man.Commit, "files", man.Files)
	return man, true, nil
}

// DeleteBranch deletes ws's branch (edit, task) from the repo cache under
// the repository lock (sandbox.LifecycleProvider); a missing branch or
// repo cache is success. Errors: ErrConflict (the branch is checked out in
// a worktree), ErrRepoLocked, ErrWorkspaceUnavailable.
func (b *Backups) DeleteBranch(ctx context.Context, ws sandboxapi.Workspace) error {
	if ws.BranchName == "" {
		return nil
	}
	if err := sandboxapi.ValidateRef(ws.BranchName); err != nil {
		return err
	}
	l, err := locate(ws)
	if err != nil {
		return err
	}
	if !isDir(l.bare) {
		return nil
	}
	unlock, err := b.m.locker.LockRepo(ctx, ws.Repo)
	if err != nil {
		if sandboxapi.KindOf(err) == nil {
			err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", ws.Repo.Key(), err)
		}
		return err
	}
	defer unlock()
	bg := b.m.bareGit(l.bare)
	ref := "refs/heads/" + ws.BranchName
	tip, err := b.m.firstCommit(ctx, bg, ref)
	if err != nil || tip == "" {
		return err
	}
	entries, err := b.m.listWorktrees(ctx, bg)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Branch == ref {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s is checked out by another workspace", ws.BranchName)
		}
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "-m", "sandboxcore: destroy", "--end-of-options", ref, tip); err != nil {
		return gitx.Classify(err, "git update-ref -d "+ref, sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}

// Discard drops everything kept for ws (sandbox.LifecycleProvider): its
// checkpoint refs, its eviction and destroy backup refs, patches and
// manifests, and its fork manifest. Errors: ErrWorkspaceUnavailable.
func (b *Backups) Discard(ctx context.Context, ws sandboxapi.Workspace) error {
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return err
	}
	var files []string
	for _, k := range []bkKind{b.evicted(), b.destroyed()} {
		files = append(files, k.manifestPath(ws.ID), k.patchPath(ws.ID))
	}
	files = append(files, b.forkManifestPath(ws.ID))
	if l, err := locate(ws); err == nil && isDir(l.bare) {
		bg := b.m.bareGit(l.bare)
		refs, err := b.checkpointRefs(ctx, bg, ws.ID)
		if err != nil {
			return err
		}
		var in strings.Builder
		for n := range refs {
			in.WriteString("delete " + sandboxapi.CheckpointRef(ws.ID, n) + "\n")
		}
		for _, r := range []string{sandbox.EvictedRef(ws.ID), sandboxapi.DestroyedRef(ws.ID)} {
			if c, _ := b.m.firstCommit(ctx, bg, r); c != "" {
				in.WriteString("delete " + r + "\n")
			}
		}
		if in.Len() > 0 {
			if _, err := bg.runIO(ctx, strings.NewReader(in.String()), nil, "update-ref", "-m", "sandboxcore: discard", "--stdin"); err != nil {
				return gitx.Classify(err, "git update-ref --stdin (discard)", sandboxapi.ErrWorkspaceUnavailable)
			}
		}
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "discard "+f)
		}
	}
	b.m.log.Info("workspace: discarded saved work", "workspace_id", ws.ID)
	return nil
}
