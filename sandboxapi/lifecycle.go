package sandboxapi

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The lifecycle operations of a workspace (docs/API.md "Checkpoints",
// "Fork", "Destroy"): checkpoints of its exact state and rollbacks to them,
// forks into a new workspace, and its deliberate destruction.

// Refs in the repo cache that hold a workspace's saved states. Each is the
// prefix of one ref per workspace (and, for checkpoints, per checkpoint).
const (
	// CheckpointRefPrefix + "<workspace id>/<n>" holds checkpoint n of a
	// workspace: a commit whose tree is the worktree's exact content
	// (tracked, untracked and deleted files; not ignored ones) and whose only
	// parent is HEAD when it was taken.
	CheckpointRefPrefix = "refs/sandbox/checkpoints/"
	// DestroyedRefPrefix + "<workspace id>" holds the work a destroy saved
	// (the same kind of commit), until restore brings it back or a destroy
	// with discard drops it.
	DestroyedRefPrefix = "refs/sandbox/destroyed/"
)

// CheckpointRef returns "refs/sandbox/checkpoints/<wsID>/<n>".
func CheckpointRef(wsID string, n int) string {
	return CheckpointRefPrefix + wsID + "/" + strconv.Itoa(n)
}

// DestroyedRef returns "refs/sandbox/destroyed/<wsID>".
func DestroyedRef(wsID string) string { return DestroyedRefPrefix + wsID }

// Checkpoint limits.
const (
	// MaxCheckpointLabelBytes bounds CheckpointInput.Label, in bytes.
	MaxCheckpointLabelBytes = 256
	// MaxCheckpoints bounds the checkpoints one workspace keeps; taking one
	// more is SandboxResourceLimit (a destroy with discard drops them).
	MaxCheckpoints = 1000
)

// CheckpointInput is the checkpoint update's argument.
type CheckpointInput struct {
	// Label is free text shown by checkpoints (at most
	// MaxCheckpointLabelBytes bytes of UTF-8, one line, no control characters).
	Label string `json:"label,omitempty"`
}

// Validate checks the label. Errors: ErrInvalidArgument naming "label".
func (in CheckpointInput) Validate() error { return validateLabel("label", in.Label) }

func validateLabel(field, s string) error {
	if len(s) > MaxCheckpointLabelBytes || !utf8.ValidString(s) {
		return FieldError(field, "%s: at most %d bytes of UTF-8", field, MaxCheckpointLabelBytes)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return FieldError(field, "%s: one line, no control characters", field)
		}
	}
	return nil
}

// Checkpoint is one recorded state of a workspace.
type Checkpoint struct {
	// ID is the checkpoint's number (1, 2, …, in the order taken); rollback
	// names it.
	ID int `json:"id"`
	// Label is the label it was taken with ("" when none).
	Label string `json:"label,omitempty"`
	// CreatedAt is when it was taken.
	CreatedAt time.Time `json:"created_at"`
	// FilesChanged counts the paths whose content or git mode differ from
	// Head's tree (uncommitted changes, untracked files, deletions).
	FilesChanged int `json:"files_changed"`
	// Commit is the checkpoint commit (its tree is the recorded content);
	// Ref the ref holding it (CheckpointRef).
	Commit string `json:"commit"`
	Ref    string `json:"ref"`
	// Head is the commit HEAD was at; Branch the branch HEAD was on ("" when detached).
	Head   string `json:"head"`
	Branch string `json:"branch"`
}

// CheckpointList is the checkpoints update's result, oldest first.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// RollbackInput is the rollback update's argument.
type RollbackInput struct {
	// Checkpoint is the ID of the checkpoint to go back to (≥ 1).
	Checkpoint int `json:"checkpoint"`
}

// Validate checks the checkpoint id. Errors: ErrInvalidArgument naming "checkpoint".
func (in RollbackInput) Validate() error {
	if in.Checkpoint < 1 {
		return FieldError("checkpoint", "checkpoint: want the id of a checkpoint (1 or more), got %d", in.Checkpoint)
	}
	return nil
}

// RollbackResult says what a rollback did.
type RollbackResult struct {
	// Checkpoint is the checkpoint the workspace is now at.
	Checkpoint Checkpoint `json:"checkpoint"`
	// Undo is the checkpoint taken of the state just left: rolling back to
	// it undoes this rollback.
	Undo Checkpoint `json:"undo"`
	// Head and Branch are HEAD afterwards (Checkpoint.Head, Checkpoint.Branch).
	Head   string `json:"head"`
	Branch string `json:"branch"`
}

// ForkInput is the fork update's argument: exactly one of TaskID (the fork
// is the task workspace task|<user>|<project>|<task_id>) or ConversationID
// (the edit workspace edit|<user>|<project>|<conversation_id>), same user,
// project and repository as the source.
type ForkInput struct {
	TaskID         string `json:"task_id,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
}

// Validate checks that exactly one id is set and valid. Errors:
// ErrInvalidArgument naming the field.
func (in ForkInput) Validate() error {
	switch {
	case in.TaskID != "" && in.ConversationID != "":
		return FieldError("task_id", "fork takes task_id or conversation_id, not both")
	case in.TaskID != "":
		return ValidateID("task_id", in.TaskID)
	case in.ConversationID != "":
		return ValidateID("conversation_id", in.ConversationID)
	}
	return FieldError("task_id", "fork needs task_id (a task workspace) or conversation_id (an edit workspace)")
}

// Request returns the acquire request of the fork of a workspace of user and
// project on repoURL, its branch starting at head (the source's HEAD).
func (in ForkInput) Request(userID, projectID, repoURL, head string) WorkspaceRequest {
	r := WorkspaceRequest{UserID: userID, ProjectID: projectID, RepoURL: repoURL, BaseRef: head}
	if in.TaskID != "" {
		r.Mode, r.TaskID = ModeTask, in.TaskID
	} else {
		r.Mode, r.ConversationID = ModeEdit, in.ConversationID
	}
	return r
}

// ForkResult is the fork update's result.
type ForkResult struct {
	// Handle is the new workspace's (acquire it again, or send it updates,
	// by its workspace id like any other).
	Handle Handle `json:"handle"`
	// Checkpoint is the checkpoint of the source the fork was made from.
	Checkpoint Checkpoint `json:"checkpoint"`
}

// DestroyInput is the destroy update's argument.
type DestroyInput struct {
	// Discard drops the workspace's unsaved work, its checkpoints and any
	// saved backup instead of keeping them restorable.
	Discard bool `json:"discard,omitempty"`
}

// DestroyResult says what a destroy did.
type DestroyResult struct {
	WorkspaceID string `json:"workspace_id"`
	// Existed is false when there was no such workspace (nothing was done).
	Existed bool `json:"existed"`
	// Discarded: the destroy dropped the unsaved work, checkpoints and backups.
	Discarded bool `json:"discarded"`
	// BackupRef and PatchPath name the saved work (DestroyedRef and the
	// binary patch on the workspace's host) when there was some to save;
	// restore brings it back.
	BackupRef string `json:"backup_ref,omitempty"`
	PatchPath string `json:"patch_path,omitempty"`
	// CheckpointsKept counts the checkpoints kept (0 when discarded).
	CheckpointsKept int `json:"checkpoints_kept"`
	// BranchDeleted is the branch deleted from the repo cache ("" when none).
	BranchDeleted string `json:"branch_deleted,omitempty"`
	// HostID is the host the workspace lived on.
	HostID string `json:"host_id,omitempty"`
	// Message says in words what happened.
	Message string `json:"message"`
}

// The cleanup workflow (docs/API.md "Cleanup"): destroys every workspace of
// a user (and project) across hosts, each through its own session.
const (
	// CleanupWorkflowType is the registered name of CleanupWorkflow.
	CleanupWorkflowType = "CleanupWorkflow"
	// CleanupWorkflowIDPrefix starts the workflow id of every cleanup run
	// sandboxctl and sandboxclient start ("sandbox-cleanup/<user>/…").
	CleanupWorkflowIDPrefix = "sandbox-cleanup/"
	// DefaultCleanupParallel is how many workspaces a cleanup destroys at once.
	DefaultCleanupParallel = 4
	// MaxCleanupParallel bounds CleanupInput.MaxParallel.
	MaxCleanupParallel = 16
	// DefaultCleanupHostTimeout is how long a host's worker may take to pick
	// up the listing of its workspaces before the host is reported unreachable.
	DefaultCleanupHostTimeout = time.Minute
)

// CleanupInput is CleanupWorkflow's argument.
type CleanupInput struct {
	// UserID is required; ProjectID, when set, narrows the cleanup to one project.
	UserID    string `json:"user_id"`
	ProjectID string `json:"project_id,omitempty"`
	// Discard destroys with discard (DestroyInput.Discard) and also purges
	// what earlier destroys of the user's workspaces kept.
	Discard bool `json:"discard,omitempty"`
	// DryRun lists what would be destroyed and destroys nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// MaxParallel bounds the destroys in flight; 0 = DefaultCleanupParallel.
	MaxParallel int `json:"max_parallel,omitempty"`
	// HostTimeout (nanoseconds) bounds how long each host may take to pick up
	// the listing of its workspaces; 0 = DefaultCleanupHostTimeout.
	HostTimeout time.Duration `json:"host_timeout,omitempty"`
}

// Validate checks every field. Errors: ErrInvalidArgument naming the field.
func (in CleanupInput) Validate() error {
	if err := ValidateID("user_id", in.UserID); err != nil {
		return err
	}
	if in.ProjectID != "" {
		if err := ValidateID("project_id", in.ProjectID); err != nil {
			return err
		}
	}
	if in.MaxParallel < 0 || in.MaxParallel > MaxCleanupParallel {
		return FieldError("max_parallel", "max_parallel must be between 0 and %d", MaxCleanupParallel)
	}
	if in.HostTimeout < 0 {
		return FieldError("host_timeout", "host_timeout must not be negative")
	}
	return nil
}

// Parallel is MaxParallel with its default applied.
func (in CleanupInput) Parallel() int {
	if in.MaxParallel == 0 {
		return DefaultCleanupParallel
	}
	return in.MaxParallel
}

// Query returns the visibility filter of the sessions of in's user (and
// project), to AND onto ListWorkspacesQuery. The ids are validated (no quote
// can occur in them).
func (in CleanupInput) Query() string {
	q := SearchAttrUser + " = '" + in.UserID + "'"
	if in.ProjectID != "" {
		q += " AND " + SearchAttrProject + " = '" + in.ProjectID + "'"
	}
	return q
}

// Cleanup outcomes (CleanupOutcome.Outcome).
const (
	// CleanupDestroyed: the workspace was destroyed (DestroyResult in Result).
	CleanupDestroyed = "destroyed"
	// CleanupWouldDestroy: a dry run found it.
	CleanupWouldDestroy = "would_destroy"
	// CleanupGone: it no longer existed when its destroy ran.
	CleanupGone = "gone"
	// CleanupFailed: its destroy failed (Message says why); it was left as it was.
	CleanupFailed = "failed"
)

// CleanupOutcomes lists every outcome, for documentation and schemas.
var CleanupOutcomes = []string{CleanupDestroyed, CleanupWouldDestroy, CleanupGone, CleanupFailed}

// CleanupOutcome is what a cleanup did to one workspace.
type CleanupOutcome struct {
	WorkspaceID string `json:"workspace_id"`
	HostID      string `json:"host_id,omitempty"`
	Mode        string `json:"mode,omitempty"`
	ProjectID   string `json:"project_id,omitempty"`
	// State is the session state (or the store row's state) when it was found.
	State string `json:"state,omitempty"`
	// Outcome is one of CleanupOutcomes.
	Outcome string `json:"outcome"`
	// Result is the destroy's result (nil for a dry run or a failure).
	Result *DestroyResult `json:"result,omitempty"`
	// Message: the failure, or what was done.
	Message string `json:"message,omitempty"`
}

// CleanupHost is one host a cleanup listed workspaces on.
type CleanupHost struct {
	HostID string `json:"host_id"`
	// Unreachable: its worker did not pick up the listing within HostTimeout;
	// its workspaces that have sessions are still destroyed through them.
	Unreachable bool   `json:"unreachable,omitempty"`
	Error       string `json:"error,omitempty"`
	// Workspaces counts the rows of the user it listed.
	Workspaces int `json:"workspaces"`
}

// CleanupSummary counts a cleanup's outcomes.
type CleanupSummary struct {
	Found     int `json:"found"`
	Destroyed int `json:"destroyed"`
	Gone      int `json:"gone"`
	Failed    int `json:"failed"`
	// Backups counts the destroys that kept a restorable backup.
	Backups int `json:"backups"`
}

// CleanupReport is CleanupWorkflow's result (and its progress query's answer).
type CleanupReport struct {
	WorkflowID string           `json:"workflow_id"`
	UserID     string           `json:"user_id"`
	ProjectID  string           `json:"project_id,omitempty"`
	DryRun     bool             `json:"dry_run"`
	Discard    bool             `json:"discard"`
	Done       bool             `json:"done"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt time.Time        `json:"finished_at"`
	Hosts      []CleanupHost    `json:"hosts"`
	Workspaces []CleanupOutcome `json:"workspaces"`
	Summary    CleanupSummary   `json:"summary"`
}

// CleanupWorkflowID returns a fresh-looking workflow id for a cleanup of
// user (and project) started at nanos: "sandbox-cleanup/<user>[/<project>]/<nanos>".
func CleanupWorkflowID(userID, projectID string, nanos int64) string {
	var b strings.Builder
	b.WriteString(CleanupWorkflowIDPrefix + userID)
	if projectID != "" {
		b.WriteString("/" + projectID)
	}
	b.WriteString("/" + strconv.FormatInt(nanos, 10))
	return b.String()
}
