package sandbox

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ForkTarget names the workspace a fork creates (docs/API.md "Fork").
type ForkTarget struct {
	// ID is the new workspace's id; Branch the branch it will check out.
	ID     string `json:"id"`
	Branch string `json:"branch"`
	// OpID identifies the fork (the fork update's id): a retried fork that
	// finds a fork manifest of the same OpID already used knows its target was made
	// by itself.
	OpID string `json:"op_id"`
}

// ForkManifest is what a fork leaves for the acquire that creates its target
// workspace: the source's checkpoint to write into the new worktree as
// uncommitted changes, on a branch that starts at Head.
type ForkManifest struct {
	TargetID     string `json:"target_id"`
	TargetBranch string `json:"target_branch"`
	SourceID     string `json:"source_id"`
	// Checkpoint is the source's checkpoint (number, commit, tree, parent).
	Checkpoint int       `json:"checkpoint"`
	Ref        string    `json:"ref"`
	Commit     string    `json:"commit"`
	Tree       string    `json:"tree"`
	Head       string    `json:"head"`
	OpID       string    `json:"op_id"`
	CreatedAt  time.Time `json:"created_at"`
	// ConsumedAt is set once the fork manifest was written into the target.
	ConsumedAt *time.Time `json:"consumed_at,omitempty"`
}

// LifecycleProvider is the optional capability of a WorkspaceBackupProvider
// that records checkpoints, rolls back to them, prepares forks, and saves,
// restores or drops the work of destroyed workspaces (docs/API.md
// "Checkpoints", "Fork", "Destroy"). It reuses the backup mechanism: every
// recorded state is a commit whose tree is the worktree's exact content
// (built in a temporary index, never the workspace's own), and every write
// back goes through raw file writes, so no git filter or end-of-line
// conversion changes a byte. Every method expects the caller to hold the
// workspace's session lock.
type LifecycleProvider interface {
	// Checkpoint records ws's state as the next CheckpointRef(ws.ID, n), without
	// touching the branch, the index or the files. Errors:
	// ErrInvalidArgument (label), ErrResourceLimit (MaxCheckpoints reached),
	// ErrWorkspaceDirty (a nested repository cannot be recorded),
	// ErrWorkspaceNotFound, ErrWorkspaceUnavailable.
	Checkpoint(ctx context.Context, ws sandboxapi.Workspace, label string) (sandboxapi.Checkpoint, error)
	// Checkpoints lists ws's checkpoints, oldest first (unreadable ones skipped).
	Checkpoints(ctx context.Context, ws sandboxapi.Workspace) ([]sandboxapi.Checkpoint, error)
	// Rollback takes a checkpoint of the current state, then brings the
	// files, their permission bits and HEAD (branch and commit) back to
	// checkpoint id, resetting the index to HEAD. Errors: ErrNotFound (no
	// such checkpoint), ErrConflict (its branch is checked out in another
	// worktree), ErrWorkspaceDirty (an operation such as a merge is in
	// progress), the errors of Checkpoint.
	Rollback(ctx context.Context, ws sandboxapi.Workspace, id int) (sandboxapi.RollbackResult, error)
	// PrepareFork takes a checkpoint of src (labelled for the fork) and
	// leaves a ForkManifest for target. Errors: ErrConflict (target's branch
	// exists already), the errors of Checkpoint.
	PrepareFork(ctx context.Context, src sandboxapi.Workspace, target ForkTarget) (sandboxapi.Checkpoint, ForkManifest, error)
	// ForkManifest returns the fork manifest left for workspace targetID (false: none).
	ForkManifest(ctx context.Context, targetID string) (ForkManifest, bool, error)
	// ApplyFork writes the pending fork manifest of ws (just created by Ensure at
	// the manifest's Head) into its worktree as uncommitted changes and marks it
	// consumed; it returns the fork manifest (ok false when there is none). A fork manifest
	// already consumed is returned without writing anything. Errors:
	// ErrConflict (the worktree is not at the fork manifest's Head on its branch),
	// ErrWorkspaceUnavailable.
	ApplyFork(ctx context.Context, ws sandboxapi.Workspace) (ForkManifest, bool, error)
	// DropForkManifest deletes the fork manifest of targetID (missing: success).
	DropForkManifest(ctx context.Context, targetID string) error
	// SaveForDestroy saves ws's unsaved work as a destroy backup
	// (DestroyedRef, patch, manifest; verified like an eviction backup), or
	// moves a pending eviction backup of an evicted ws there; it returns false
	// when there was nothing to save. Errors: as Backup.
	SaveForDestroy(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, bool, error)
	// PendingDestroyed returns the manifest of ws's destroy backup not yet
	// restored (false: none).
	PendingDestroyed(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, bool, error)
	// RestoreDestroyed brings a pending destroy backup back into ws, whose
	// worktree must be fresh (clean, its branch at its base commit): the
	// branch is moved to the backup's parent, the index reset to it, the
	// files written back byte for byte with their permission bits, the base
	// commit recorded in the manifest put back, and the backup ref dropped.
	// Returns false when none is pending. Errors: ErrWorkspaceDirty (the
	// worktree is not fresh), ErrWorkspaceUnavailable.
	RestoreDestroyed(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, bool, error)
	// DeleteBranch deletes ws's branch from the repo cache (missing:
	// success). Errors: ErrConflict (checked out in a worktree).
	DeleteBranch(ctx context.Context, ws sandboxapi.Workspace) error
	// Discard drops everything kept for ws: its checkpoints, its eviction and
	// destroy backups (refs, patches, manifests) and its fork manifest.
	Discard(ctx context.Context, ws sandboxapi.Workspace) error
}
