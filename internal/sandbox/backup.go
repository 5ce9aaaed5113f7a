package sandbox

import (
	"context"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"time"
)

// EvictedRefPrefix + workspace id is the ref, in the workspace's repo cache,
// that holds the backup commit of an evicted workspace's work (docs/DESIGN.md
// "Eviction policy": "Before deleting a dirty workspace … commit to an
// internal branch"; DESIGN.md "Non-negotiables": eviction never loses work).
const EvictedRefPrefix = "refs/sandbox/evicted/"

// EvictedRef returns EvictedRefPrefix + wsID, e.g.
// "refs/sandbox/evicted/ws-0123456789abcdef01234567".
func EvictedRef(wsID string) string { return EvictedRefPrefix + wsID }

// UnsavedWork says which of a workspace's work exists only in its worktree, or
// only on this host (docs/DESIGN.md "Eviction policy": dirty workspaces).
type UnsavedWork struct {
	// Dirty: tracked changes (staged or not) or untracked, not ignored, files.
	Dirty bool `json:"dirty"`
	// UnpushedCommits counts the commits of HEAD that no remote-tracking
	// branch (refs/remotes/origin/*) and no tag contains.
	UnpushedCommits int `json:"unpushed_commits"`
	// Checkpointed: the worktree is dirty, but its exact content and HEAD
	// are those of its newest checkpoint (CheckpointRef), so nothing
	// uncommitted exists only in the worktree.
	Checkpointed bool `json:"checkpointed,omitempty"`
}

// Any reports whether anything would be lost by deleting the worktree
// without a backup: uncommitted work no checkpoint holds (Dirty and not
// Checkpointed), or UnpushedCommits > 0. Checkpoints count as saved work
// (docs/API.md "Checkpoints").
func (u UnsavedWork) Any() bool { return (u.Dirty && !u.Checkpointed) || u.UnpushedCommits > 0 }

// NeedsBackup reports whether an eviction must save the worktree before
// removing it so that the next acquire restores it exactly (Dirty or
// UnpushedCommits > 0): a checkpointed dirty worktree is saved too — its
// objects are already in the repo cache, so the save is cheap.
func (u UnsavedWork) NeedsBackup() bool { return u.Dirty || u.UnpushedCommits > 0 }

// WorkspaceBackup describes the saved work of one workspace (the manifest of
// an eviction backup, docs/DESIGN.md "Eviction policy": patch artifact plus internal
// branch). Commit is a commit whose tree is the worktree's exact content
// (tracked and untracked, not ignored, files; bytes as on disk, no filters or
// end-of-line conversion) and whose only parent is Head, so unpushed commits
// stay reachable through Ref as well as through the workspace branch.
type WorkspaceBackup struct {
	WorkspaceID string `json:"workspace_id"`
	// Ref is EvictedRef(WorkspaceID), in the repo cache.
	Ref string `json:"ref"`
	// Commit is the backup commit (hex); Tree its tree; Head its parent, the
	// worktree's HEAD when the backup was taken.
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
	Head   string `json:"head"`
	// Branch is the worktree's branch then ("" when detached: analysis).
	Branch string `json:"branch"`
	// PatchPath is the absolute path of the binary-safe patch artifact
	// (`git diff --binary Head Commit`), on the workspace's host; PatchBytes
	// its size in bytes and PatchSHA256 its lowercase hex SHA-256.
	PatchPath   string `json:"patch_path"`
	PatchBytes  int64  `json:"patch_bytes"`
	PatchSHA256 string `json:"patch_sha256"`
	// Files counts the regular files and symlinks saved in Tree.
	Files int `json:"files"`
	// Modes holds the permission bits (e.g. 0o600) of saved regular files
	// whose bits are neither 0o644 nor 0o755, which git alone cannot record.
	Modes map[string]uint32 `json:"modes,omitempty"`
	// BaseCommit is the workspace's recorded base commit when the backup
	// was taken (destroy backups: restore gives it back; docs/API.md "Destroy").
	BaseCommit string `json:"base_commit,omitempty"`
	// Unsaved is what made the backup necessary.
	Unsaved   UnsavedWork `json:"unsaved"`
	CreatedAt time.Time   `json:"created_at"`
	// RestoredAt is set once the backup was written back into a worktree;
	// nil means the backup is pending (the workspace is evicted).
	RestoredAt *time.Time `json:"restored_at,omitempty"`
}

// WorkspaceBackupProvider is the optional capability of a WorkspaceProvider
// that saves a workspace's work before eviction and writes it back afterwards
// (docs/DESIGN.md "Eviction policy"; DESIGN.md "Non-negotiables": a dirty or unpushed
// workspace is saved — backup ref in the mirror plus patch artifact — before
// its directory goes; if saving fails the workspace stays). Every method
// expects the caller to hold the workspace's session lock (no command runs in
// the worktree meanwhile).
type WorkspaceBackupProvider interface {
	// UnsavedWork inspects the worktree without changing it. Errors:
	// ErrWorkspaceNotFound, ErrWorkspaceUnavailable.
	UnsavedWork(ctx context.Context, ws sandboxapi.Workspace) (UnsavedWork, error)
	// Backup saves the worktree's content as EvictedRef(ws.ID) plus the patch
	// artifact and a manifest, verifies all three (the ref resolves to the
	// commit, the commit's tree equals a fresh snapshot of the worktree, the
	// patch is present, has the recorded digest and applies onto Head giving
	// that tree) and returns the manifest. It never touches the workspace's
	// own index. Errors: ErrWorkspaceDirty (something cannot be saved, e.g. a
	// nested repository, or the worktree changed during the backup),
	// ErrInsufficientDisk, ErrWorkspaceUnavailable (any other failure).
	Backup(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, error)
	// PendingBackup returns the manifest of a backup not yet restored, and
	// false when there is none.
	PendingBackup(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, bool, error)
	// Restore writes a pending backup into the (re-created) worktree byte for
	// byte and marks it restored; the index is left alone, so every saved
	// change shows as unstaged or untracked. It returns false when no backup
	// is pending. Errors: ErrConflict (the branch moved since the backup),
	// ErrWorkspaceUnavailable (the backup is missing or cannot be verified).
	Restore(ctx context.Context, ws sandboxapi.Workspace) (WorkspaceBackup, bool, error)
	// CheckRemovable reports, without changing anything, whether this process
	// can delete every entry of the worktree (directories owned by another
	// uid that are not writable by us are the usual obstacle). Errors:
	// ErrWorkspaceUnavailable naming the first obstacle.
	CheckRemovable(ctx context.Context, ws sandboxapi.Workspace) error
	// RepoCacheHoldsUnsavedWork reports whether the bare mirror holds commits
	// that only it has: on a local branch (refs/heads/*), a backup ref
	// (EvictedRefPrefix, DestroyedRefPrefix) or a checkpoint
	// (CheckpointRefPrefix) but on no remote-tracking branch or tag.
	RepoCacheHoldsUnsavedWork(ctx context.Context, cache RepoCache) (bool, error)
}
