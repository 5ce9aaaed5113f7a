package wire

import (
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// CheckpointActivityInput is the checkpoint activity's argument.
type CheckpointActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	Label       string `json:"label,omitempty"`
}

// RollbackActivityInput is the rollback activity's argument.
type RollbackActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	Checkpoint  int    `json:"checkpoint"`
}

// ForkPrepareInput is the fork's first activity (on the source's host,
// under the source's lock): checkpoint the source and leave the fork manifest.
type ForkPrepareInput struct {
	WorkspaceID string             `json:"workspace_id"`
	Target      sandbox.ForkTarget `json:"target"`
}

// ForkPrepareResult is the source's checkpoint and the fork manifest left for the target.
type ForkPrepareResult struct {
	Checkpoint sandboxapi.Checkpoint `json:"checkpoint"`
	Manifest   sandbox.ForkManifest  `json:"manifest"`
}

// ForkAcquireInput is the fork's second activity (on the source's host):
// acquire the target's session by update-with-start on that host's queue.
type ForkAcquireInput struct {
	SourceID string                      `json:"source_id"`
	HostID   string                      `json:"host_id"`
	Request  sandboxapi.WorkspaceRequest `json:"request"`
	OpID     string                      `json:"op_id"`
}

// DestroyActivityInput is the destroy activity's argument.
type DestroyActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	Discard     bool   `json:"discard,omitempty"`
}

// CleanupCandidate is one workspace a cleanup found.
type CleanupCandidate struct {
	WorkspaceID string `json:"workspace_id"`
	HostID      string `json:"host_id,omitempty"`
	Mode        string `json:"mode,omitempty"`
	ProjectID   string `json:"project_id,omitempty"`
	State       string `json:"state,omitempty"`
}

// CleanupSessionsInput lists the running sessions matching Query (ANDed
// onto sandboxapi.ListWorkspacesQuery).
type CleanupSessionsInput struct {
	Query string `json:"query"`
}

// CleanupListInput lists the store rows of a user (and project) on HostID;
// IncludeRemoved adds the rows destroys kept (tombstones).
type CleanupListInput struct {
	HostID         string `json:"host_id"`
	UserID         string `json:"user_id"`
	ProjectID      string `json:"project_id,omitempty"`
	IncludeRemoved bool   `json:"include_removed,omitempty"`
}

// CleanupCandidates is the result of both listing activities.
type CleanupCandidates struct {
	Workspaces []CleanupCandidate `json:"workspaces"`
}

// CleanupDestroyInput destroys one workspace through its session
// (update-with-start "destroy" on TaskQueue) with update id OpID/<attempt>.
type CleanupDestroyInput struct {
	OpID        string `json:"op_id"`
	TaskQueue   string `json:"task_queue"`
	WorkspaceID string `json:"workspace_id"`
	Discard     bool   `json:"discard,omitempty"`
}

// FanoutForkTaskInput forks task TaskID from the conversation WorkspaceID
// (its session's fork update, id OpID/<task>/fork/<attempt>).
type FanoutForkTaskInput struct {
	OpID        string `json:"op_id"`
	WorkspaceID string `json:"workspace_id"`
	TaskID      string `json:"task_id"`
	HostID      string `json:"host_id"`
}
