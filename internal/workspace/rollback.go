package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Rollback brings ws back to checkpoint id (sandbox.LifecycleProvider):
// first a checkpoint of the current state is taken (RollbackResult.Undo;
// when a rollback interrupted by a crash left RollbackMarkerFile and the
// worktree is still as it left it, that rollback's undo point is reported
// instead: interruptedUndo), then HEAD is put back — on a checkpoint taken on a branch, that branch is
// moved to the checkpoint's head and checked out; on a detached one, HEAD is
// detached there — the index is reset to HEAD (`git read-tree`), and the
// files are brought to the checkpoint's tree with their permission bits
// (bringTo). Changes show as unstaged or untracked afterwards: the
// staged/unstaged split is not recorded. Errors: ErrNotFound (no such
// checkpoint), ErrConflict (its branch is checked out in another worktree),
// ErrWorkspaceDirty (a merge, rebase, cherry-pick or revert is in progress:
// nothing is changed), ErrResourceLimit, ErrWorkspaceNotFound, ErrWorkspaceUnavailable.
func (b *Backups) Rollback(ctx context.Context, ws sandboxapi.Workspace, id int) (sandboxapi.RollbackResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	bg := b.m.bareGit(w.bare)
	target, err := b.checkpointByID(ctx, bg, ws.ID, id)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if c, _ := b.m.firstCommit(ctx, bg, target.cp.Head); c != target.cp.Head {
		return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "checkpoint %d: its head %s is missing from the repo cache", id, target.cp.Head)
	}
	// An operation the agent left in progress is never thrown away (as
	// merge_branches): its state is not part of a checkpoint.
	for _, f := range inProgressFiles {
		if _, err := os.Lstat(filepath.Join(w.admin, f)); err == nil {
			return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s: an operation is in progress (%s); finish or abort it before rolling back", ws.ID, f)
		}
	}
	if br := target.cp.Branch; br != "" {
		entries, err := b.m.listWorktrees(ctx, bg)
		if err != nil {
			return sandboxapi.RollbackResult{}, err
		}
		for _, e := range entries {
			if e.Branch == "refs/heads/"+br && e.Path != w.wt {
				return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "checkpoint %d is on branch %s, which another workspace has checked out", id, br)
			}
		}
	}
	undo, err := b.interruptedUndo(ctx, w, bg, ws.ID)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if undo == nil {
		rec, err := b.next(ctx, w, bg, ws.ID, fmt.Sprintf("before rollback to checkpoint %d", id))
		if err != nil {
			return sandboxapi.RollbackResult{}, err
		}
		undo = &rec
		if err := writeRollbackMarker(w.admin, rollbackMarker{Undo: rec.cp.ID, Target: id}); err != nil {
			return sandboxapi.RollbackResult{}, err
		}
	}
	g := w.git
	if br := target.cp.Branch; br != "" {
		if _, err := g.run(ctx, "update-ref", "-m", fmt.Sprintf("sandboxcore: rollback to checkpoint %d", id), "--end-of-options", "refs/heads/"+br, target.cp.Head); err != nil {
			return sandboxapi.RollbackResult{}, gitx.Classify(err, "git update-ref refs/heads/"+br, sandboxapi.ErrWorkspaceUnavailable)
		}
		if _, err := g.run(ctx, "symbolic-ref", "-m", "sandboxcore: rollback", "HEAD", "refs/heads/"+br); err != nil {
			return sandboxapi.RollbackResult{}, gitx.Classify(err, "git symbolic-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
		}
	} else if _, err := g.run(ctx, "update-ref", "--no-deref", "-m", fmt.Sprintf("sandboxcore: rollback to checkpoint %d", id), "HEAD", target.cp.Head); err != nil {
		return sandboxapi.RollbackResult{}, gitx.Classify(err, "git update-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "read-tree", "--end-of-options", target.cp.Head); err != nil {
		return sandboxapi.RollbackResult{}, gitx.Classify(err, "git read-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	b.m.crash("rollback-moved", w.wt)
	if err := b.bringTo(ctx, w, bg, target.tree, target.modes); err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if err := os.Remove(filepath.Join(w.admin, RollbackMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return sandboxapi.RollbackResult{}, fsError(err, "remove rollback marker")
	}
	b.m.log.Info("workspace: rolled back", "workspace_id", ws.ID, "checkpoint", id, "undo", undo.cp.ID, "head", target.cp.Head)
	return sandboxapi.RollbackResult{Checkpoint: target.cp, Undo: undo.cp, Head: target.cp.Head, Branch: target.cp.Branch}, nil
}

// RollbackMarkerFile, in a worktree's administrative directory, records a
// rollback in progress: the checkpoint of the state before it (its undo
// point) and its target, written once the undo checkpoint exists and
// removed when the files are the target's. A rollback interrupted by a
// crash leaves it behind, so the next rollback reports that undo point,
// not the half-rolled-back state (interruptedUndo).
const RollbackMarkerFile = "sandboxcore-rollback"

// rollbackMarker is the content of RollbackMarkerFile.
type rollbackMarker struct {
	Undo   int `json:"undo"`
	Target int `json:"target"`
}

func writeRollbackMarker(admin string, mk rollbackMarker) error {
	data, err := json.Marshal(mk)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode rollback marker: %v", err)
	}
	return writeFileAtomic(filepath.Join(admin, RollbackMarkerFile), append(data, '\n'))
}

// interruptedUndo returns the undo checkpoint of a rollback that was
// interrupted (RollbackMarkerFile) when the worktree is still in the state
// it left: HEAD at the undo point's or the target's head, and no path
// differing from both the undo point's and the target's trees (each path is
// one of the two, both saved). Then the state before that rollback is the
// one to report as the undo point. Otherwise (no marker, an unreadable one,
// a checkpoint gone, or the worktree changed since) the marker is dropped
// and nil returned: the caller checkpoints the state as it is.
func (b *Backups) interruptedUndo(ctx context.Context, w *wtRepo, bg gitCtx, wsID string) (*cpRecord, error) {
	path := filepath.Join(w.admin, RollbackMarkerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	drop := func(why string) (*cpRecord, error) {
		b.m.log.Info("workspace: stale rollback marker dropped", "workspace_id", wsID, "why", why)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fsError(err, "remove rollback marker")
		}
		return nil, nil
	}
	var mk rollbackMarker
	if err != nil || json.Unmarshal(data, &mk) != nil {
		return drop("unreadable")
	}
	undo, err := b.checkpointByID(ctx, bg, wsID, mk.Undo)
	if err != nil {
		return drop("undo checkpoint gone")
	}
	target, err := b.checkpointByID(ctx, bg, wsID, mk.Target)
	if err != nil {
		return drop("target checkpoint gone")
	}
	headC, _, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return nil, err
	}
	if headC != undo.cp.Head && headC != target.cp.Head {
		return drop("HEAD moved since")
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return nil, err
	}
	fromUndo, err := bkDiffTrees(ctx, bg, undo.tree, snap.tree)
	if err != nil {
		return nil, err
	}
	fromTarget, err := bkDiffTrees(ctx, bg, target.tree, snap.tree)
	if err != nil {
		return nil, err
	}
	changed := make(map[string]bool, len(fromUndo))
	for _, c := range fromUndo {
		changed[c.path] = true
	}
	for _, c := range fromTarget {
		if changed[c.path] {
			return drop("the worktree changed since")
		}
	}
	b.m.log.Warn("workspace: finishing an interrupted rollback", "workspace_id", wsID, "undo", undo.cp.ID, "interrupted_target", target.cp.ID)
	return &undo, nil
}

// matchesNewestCheckpoint reports whether ws's HEAD, content and permission
// bits are exactly those of its newest checkpoint.
func (b *Backups) matchesNewestCheckpoint(ctx context.Context, ws sandboxapi.Workspace, headC string) (bool, error) {
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return false, err
	}
	bg := b.m.bareGit(w.bare)
	refs, err := b.checkpointRefs(ctx, bg, ws.ID)
	if err != nil || len(refs) == 0 {
		return false, err
	}
	newest := 0
	for n := range refs {
		newest = max(newest, n)
	}
	rec, err := b.checkpointByID(ctx, bg, ws.ID, newest)
	if err != nil || rec.cp.Head != headC {
		return false, err
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return false, err
	}
	return snap.tree == rec.tree && maps.Equal(snap.modes, rec.modes), nil
}
