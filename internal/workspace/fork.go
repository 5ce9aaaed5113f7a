package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (b *Backups) forkManifestPath(targetID string) string {
	return filepath.Join(b.dir, "forks", targetID+".json")
}

// PrepareFork checkpoints src ("fork to <target>") and leaves a fork manifest for
// the target's first acquire (sandbox.LifecycleProvider). A pending fork manifest of
// the same OpID is returned as it is (a retried fork). Errors:
// ErrInvalidArgument (target), ErrConflict (the target's branch exists in
// the repo cache: the key was used before), the errors of Checkpoint.
func (b *Backups) PrepareFork(ctx context.Context, src sandboxapi.Workspace, target sandbox.ForkTarget) (sandboxapi.Checkpoint, sandbox.ForkManifest, error) {
	if err := sandboxapi.ValidateWorkspaceID(target.ID); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	if err := sandboxapi.ValidateRef(target.Branch); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	if prev, ok, err := b.ForkManifest(ctx, target.ID); err == nil && ok && prev.SourceID == src.ID && prev.OpID == target.OpID && target.OpID != "" {
		w, err := b.m.openWorktree(ctx, src)
		if err != nil {
			return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
		}
		rec, err := b.checkpointByID(ctx, b.m.bareGit(w.bare), src.ID, prev.Checkpoint)
		if err == nil {
			return rec.cp, prev, nil
		}
	}
	w, err := b.m.openWorktree(ctx, src)
	if err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	bg := b.m.bareGit(w.bare)
	if tip, err := b.m.firstCommit(ctx, bg, "refs/heads/"+target.Branch); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	} else if tip != "" {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s exists already in the repo cache (workspace %s was used before): fork to a new id", target.Branch, target.ID)
	}
	rec, err := b.next(ctx, w, bg, src.ID, "fork to "+target.ID)
	if err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	fm := sandbox.ForkManifest{TargetID: target.ID, TargetBranch: target.Branch, SourceID: src.ID, Checkpoint: rec.cp.ID,
		Ref: rec.cp.Ref, Commit: rec.cp.Commit, Tree: rec.tree, Head: rec.cp.Head, OpID: target.OpID, CreatedAt: b.m.now().UTC()}
	if err := b.writeForkManifest(fm); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	return rec.cp, fm, nil
}

func (b *Backups) writeForkManifest(fm sandbox.ForkManifest) error {
	data, err := json.MarshalIndent(fm, "", "  ")
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode fork manifest: %v", err)
	}
	return writeFileAtomic(b.forkManifestPath(fm.TargetID), append(data, '\n'))
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory (created 0700 when missing) and a rename.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fsError(err, "create "+dir)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fsError(err, "write "+path)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return fsError(err, "write "+path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fsError(err, "write "+path)
	}
	bkSyncDir(dir)
	return nil
}

// ForkManifest returns the fork manifest left for targetID (sandbox.LifecycleProvider).
// Errors: ErrInvalidArgument (id), ErrWorkspaceUnavailable (malformed fork manifest).
func (b *Backups) ForkManifest(_ context.Context, targetID string) (sandbox.ForkManifest, bool, error) {
	if err := sandboxapi.ValidateWorkspaceID(targetID); err != nil {
		return sandbox.ForkManifest{}, false, err
	}
	data, err := os.ReadFile(b.forkManifestPath(targetID))
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.ForkManifest{}, false, nil
	}
	if err != nil {
		return sandbox.ForkManifest{}, false, fsError(err, "read fork manifest")
	}
	var fm sandbox.ForkManifest
	if err := json.Unmarshal(data, &fm); err != nil || fm.TargetID != targetID || sandboxapi.ValidateWorkspaceID(fm.SourceID) != nil ||
		!isHex(fm.Commit) || !isHex(fm.Tree) || !isHex(fm.Head) || sandboxapi.ValidateRef(fm.TargetBranch) != nil || fm.Checkpoint < 1 {
		return sandbox.ForkManifest{}, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork manifest %s is malformed", b.forkManifestPath(targetID))
	}
	return fm, true, nil
}

// ApplyFork writes ws's pending fork manifest into its fresh worktree
// (sandbox.LifecycleProvider): HEAD must be the manifest's Head on the manifest's
// branch; the checkpoint's tree and permission bits are written with
// bringTo, the index is left at HEAD, so the source's uncommitted and
// untracked files show as unstaged and untracked changes. Errors:
// ErrConflict (HEAD is elsewhere), ErrWorkspaceUnavailable (the checkpoint
// is missing or unreadable), ErrWorkspaceNotFound.
func (b *Backups) ApplyFork(ctx context.Context, ws sandboxapi.Workspace) (sandbox.ForkManifest, bool, error) {
	fm, ok, err := b.ForkManifest(ctx, ws.ID)
	if err != nil || !ok {
		return fm, false, err
	}
	if fm.ConsumedAt != nil {
		return fm, true, nil
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return fm, false, err
	}
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return fm, false, err
	}
	if headC != fm.Head || branch != fm.TargetBranch {
		return fm, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s is on %q at %s, but its fork from %s starts on %q at %s", ws.ID, branch, headC, fm.SourceID, fm.TargetBranch, fm.Head)
	}
	bg := b.m.bareGit(w.bare)
	rec, err := b.checkpointByID(ctx, bg, fm.SourceID, fm.Checkpoint)
	if err != nil || rec.cp.Commit != fm.Commit || rec.tree != fm.Tree {
		return fm, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork of %s into %s: checkpoint %d of the source is missing or changed", fm.SourceID, ws.ID, fm.Checkpoint)
	}
	if err := b.bringTo(ctx, w, bg, rec.tree, rec.modes); err != nil {
		return fm, false, err
	}
	at := b.m.now().UTC()
	fm.ConsumedAt = &at
	if err := b.writeForkManifest(fm); err != nil {
		return fm, false, err
	}
	b.m.log.Info("workspace: fork written", "workspace_id", ws.ID, "source", fm.SourceID, "checkpoint", fm.Checkpoint)
	return fm, true, nil
}

// DropForkManifest deletes targetID's fork manifest; a missing one is success.
func (b *Backups) DropForkManifest(_ context.Context, targetID string) error {
	if err := sandboxapi.ValidateWorkspaceID(targetID); err != nil {
		return err
	}
	if err := os.Remove(b.forkManifestPath(targetID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "remove fork manifest")
	}
	return nil
}
