package sandboxapi

import (
	"strings"
	"time"
)

// TaskFanoutWorkflow's wire contract (docs/API.md "Task fan-out").
const (
	// TaskFanoutWorkflowType is the registered name of TaskFanoutWorkflow.
	TaskFanoutWorkflowType = "TaskFanoutWorkflow"
	// FanoutWorkflowIDPrefix starts every fan-out's workflow id
	// (FanoutWorkflowID, and LegacyFanoutWorkflowID of earlier fan-outs).
	FanoutWorkflowIDPrefix = "sandbox-fanout/"
	// SignalCompleteTask (payload CompleteTaskSignal) tells the fan-out that
	// an externally driven task is done.
	SignalCompleteTask = "complete_task"
	// QueryProgress returns a FanoutReport without patches.
	QueryProgress = "progress"
)

// Fan-out limits. They keep the workflow's result and history well under
// Temporal's 2 MB payload limit (docs/DESIGN.md "Payload discipline"): at most
// MaxFanoutTasks × (TaskDiffBytes + 2 × TaskOutputTailBytes) ≈ 640 KiB.
const (
	// MaxFanoutTasks bounds FanoutInput.Tasks.
	MaxFanoutTasks = 32
	// DefaultFanoutParallel applies when FanoutInput.MaxParallel is 0.
	DefaultFanoutParallel = 4
	// MaxFanoutParallel bounds FanoutInput.MaxParallel.
	MaxFanoutParallel = 16
	// DefaultTaskTimeout applies when FanoutInput.TaskTimeoutS is 0.
	DefaultTaskTimeout = 30 * time.Minute
	// MaxTaskTimeout bounds FanoutInput.TaskTimeoutS (the exec limit).
	MaxTaskTimeout = MaxExecTimeout
	// MaxTaskScriptBytes bounds TaskSpec.Script, in bytes.
	MaxTaskScriptBytes = 64 << 10
	// MaxTaskInstructionsBytes bounds TaskSpec.Instructions, in bytes.
	MaxTaskInstructionsBytes = 8 << 10
	// TaskDiffBytes caps TaskDiff.Patch, in bytes (whole file sections kept: sandbox.TruncatePatch).
	TaskDiffBytes = 16 << 10
	// TaskOutputTailBytes caps TaskResult.StdoutTail and StderrTail: the last bytes of each stream.
	TaskOutputTailBytes = 2 << 10
)

// FanoutWorkflowID returns the workflow id of tenant's fan-out fanoutID:
// "sandbox-fanout/<tenant segment>/<fanoutID>" (docs/API.md "Identity"), so
// that two tenants' fan-outs with one fan-out id are two workflows. The
// fan-out id follows the id rule (ValidateID: 1–128 of [A-Za-z0-9_-]).
// Errors: ErrInvalidArgument naming user_id, project_id or fanout_id.
func FanoutWorkflowID(tenant Tenant, fanoutID string) (string, error) {
	if err := tenant.Validate(); err != nil {
		return "", err
	}
	if err := ValidateID("fanout_id", fanoutID); err != nil {
		return "", err
	}
	return FanoutWorkflowIDPrefix + tenant.Segment() + "/" + fanoutID, nil
}

// LegacyFanoutWorkflowID returns "sandbox-fanout/<fanoutID>", the workflow
// id of a fan-out started by a client from before tenant segments (the
// worker still runs such fan-outs). A client looks a fan-out up under it
// only when FanoutWorkflowID names none, and uses that run only when its
// conversation belongs to the caller's tenant (docs/API.md "Task fan-out":
// legacy ids). Errors: ErrInvalidArgument naming fanout_id.
func LegacyFanoutWorkflowID(fanoutID string) (string, error) {
	if err := ValidateID("fanout_id", fanoutID); err != nil {
		return "", err
	}
	return FanoutWorkflowIDPrefix + fanoutID, nil
}

// ParseFanoutWorkflowID splits a fan-out's workflow id: FanoutWorkflowID's
// form gives its tenant segment (TenantSegmentLen lowercase hex digits) and
// fan-out id, LegacyFanoutWorkflowID's form "" and the fan-out id. ok is
// false for any other string.
func ParseFanoutWorkflowID(wfID string) (segment, fanoutID string, ok bool) {
	rest, found := strings.CutPrefix(wfID, FanoutWorkflowIDPrefix)
	if !found {
		return "", "", false
	}
	seg, id, nested := strings.Cut(rest, "/")
	if !nested {
		seg, id = "", rest
	} else if !isTenantSegment(seg) {
		return "", "", false
	}
	if ValidateID("fanout_id", id) != nil {
		return "", "", false
	}
	return seg, id, true
}

// TaskSpec is one task of a fan-out.
type TaskSpec struct {
	// TaskID names the task's workspace (key task|user|project|task_id) and
	// branch agent/<tenant>/task-<task_id> (TaskBranch); ValidateID. Reusing a task id reuses
	// its workspace: a task id whose workspace started from another commit
	// fails the task with SandboxConflict.
	TaskID string `json:"task_id"`
	// Script, when set, runs as ["sh","-c",Script] in the task's own runtime
	// (exit 0 → the task succeeded and its changes are committed). Empty: the
	// task waits for an external agent to drive its session and send
	// complete_task. At most MaxTaskScriptBytes.
	Script string `json:"script,omitempty"`
	// Instructions are metadata for whoever does the task: kept in the input
	// (visible in Temporal) and in the body of the task's commit. At most
	// MaxTaskInstructionsBytes.
	Instructions string `json:"instructions,omitempty"`
}

// FanoutInput starts a TaskFanoutWorkflow. The conversation is given by
// ConversationWorkspaceID (an existing edit workspace, resumed by id) or by
// Conversation (its edit-mode acquire request; the workspace is created when
// missing); when both are set they must name the same workspace.
type FanoutInput struct {
	ConversationWorkspaceID string            `json:"conversation_workspace_id,omitempty"`
	Conversation            *WorkspaceRequest `json:"conversation,omitempty"`
	// Tasks run in this order (started in order, at most MaxParallel at once)
	// and are merged in this order; 1 to MaxFanoutTasks, unique task ids.
	Tasks []TaskSpec `json:"tasks"`
	// AcceptTaskIDs lists the tasks to merge when they succeed; empty means
	// every task that succeeded. Each must be one of Tasks.
	AcceptTaskIDs []string `json:"accept_task_ids,omitempty"`
	// MaxParallel bounds the tasks in progress at once; 0 = DefaultFanoutParallel.
	MaxParallel int `json:"max_parallel,omitempty"`
	// TaskTimeoutS bounds each task, in seconds, from when its workspace is
	// ready: the script's run (exit 124, timed out) or the wait for
	// complete_task; 0 = DefaultTaskTimeout, at most MaxTaskTimeout.
	TaskTimeoutS int `json:"task_timeout_s,omitempty"`
	// FromFork starts each task as a fork of the conversation (its session's
	// fork update: the task workspace holds the conversation's uncommitted
	// and untracked files as uncommitted changes) instead of committing the
	// conversation first and branching the tasks at that commit (false, the
	// default). StartCommit is then the conversation's HEAD; each task is
	// forked when it starts (docs/API.md "Task fan-out").
	FromFork bool `json:"from_fork,omitempty"`
}

// Validate checks every field; it returns ErrInvalidArgument naming the first
// bad one (repository URL schemes are checked again by the worker's policy).
func (in FanoutInput) Validate() error {
	if _, err := in.ConversationWorkspace(); err != nil {
		return err
	}
	if len(in.Tasks) == 0 || len(in.Tasks) > MaxFanoutTasks {
		return Errorf(ErrInvalidArgument, "a fan-out takes 1 to %d tasks, got %d", MaxFanoutTasks, len(in.Tasks))
	}
	ids := make(map[string]bool, len(in.Tasks))
	for _, t := range in.Tasks {
		if err := ValidateID("task_id", t.TaskID); err != nil {
			return err
		}
		if ids[t.TaskID] {
			return Errorf(ErrInvalidArgument, "task_id %q is listed twice", t.TaskID)
		}
		ids[t.TaskID] = true
		if len(t.Script) > MaxTaskScriptBytes || strings.IndexByte(t.Script, 0) >= 0 {
			return Errorf(ErrInvalidArgument, "task %s: script: at most %d bytes, no NUL", t.TaskID, MaxTaskScriptBytes)
		}
		if len(t.Instructions) > MaxTaskInstructionsBytes || strings.IndexByte(t.Instructions, 0) >= 0 {
			return Errorf(ErrInvalidArgument, "task %s: instructions: at most %d bytes, no NUL", t.TaskID, MaxTaskInstructionsBytes)
		}
	}
	for _, id := range in.AcceptTaskIDs {
		if !ids[id] {
			return Errorf(ErrInvalidArgument, "accept_task_ids: %q is not one of the tasks", id)
		}
	}
	if in.MaxParallel < 0 || in.MaxParallel > MaxFanoutParallel {
		return Errorf(ErrInvalidArgument, "max_parallel must be between 0 and %d", MaxFanoutParallel)
	}
	// Compared in seconds: a count of seconds so large that it overflows a
	// time.Duration would wrap below the bound.
	if in.TaskTimeoutS < 0 || in.TaskTimeoutS > int(MaxTaskTimeout/time.Second) {
		return Errorf(ErrInvalidArgument, "task_timeout_s must be between 0 and %d", int(MaxTaskTimeout/time.Second))
	}
	return nil
}

// ConversationWorkspace returns the conversation's workspace id (from
// ConversationWorkspaceID, or derived from Conversation's key). Errors:
// ErrInvalidArgument when neither is set, the request is not a valid edit
// request, or the two disagree.
func (in FanoutInput) ConversationWorkspace() (string, error) {
	id := in.ConversationWorkspaceID
	if r := in.Conversation; r != nil {
		if r.Mode != ModeEdit {
			return "", Errorf(ErrInvalidArgument, "conversation: mode must be edit, got %q", r.Mode)
		}
		if _, err := r.Validate(PermissiveURLs); err != nil {
			return "", err
		}
		derived := WorkspaceIDForKey(r.Key())
		if id != "" && id != derived {
			return "", Errorf(ErrInvalidArgument, "conversation_workspace_id %s does not match the conversation request's workspace %s", id, derived)
		}
		id = derived
	}
	if id == "" {
		return "", Errorf(ErrInvalidArgument, "a fan-out needs conversation_workspace_id or conversation")
	}
	return id, ValidateWorkspaceID(id)
}

// Parallel returns the effective MaxParallel.
func (in FanoutInput) Parallel() int {
	if in.MaxParallel == 0 {
		return DefaultFanoutParallel
	}
	return in.MaxParallel
}

// TaskTimeout returns the effective per-task timeout.
func (in FanoutInput) TaskTimeout() time.Duration {
	if in.TaskTimeoutS == 0 {
		return DefaultTaskTimeout
	}
	return time.Duration(in.TaskTimeoutS) * time.Second
}

// CompleteTaskSignal is complete_task's payload. Only the first signal for a
// task that waits for one (no script) counts; others are ignored.
type CompleteTaskSignal struct {
	TaskID string `json:"task_id"`
	// Succeeded: the task's work is done and may be merged (its uncommitted
	// changes are committed); false: the task failed and is not merged.
	Succeeded bool `json:"succeeded"`
	// Message is kept in the task's result (clipped to 1 KiB).
	Message string `json:"message,omitempty"`
}

// Fan-out states (FanoutReport.State).
const (
	FanoutPreparing = "preparing" // checkpointing the conversation workspace
	FanoutRunning   = "running"   // tasks in progress
	FanoutMerging   = "merging"   // merging accepted tasks into the conversation
	FanoutCompleted = "completed"
	FanoutFailed    = "failed" // FanoutReport.Error says why
)

// Task states (TaskResult.Status).
const (
	TaskPending   = "pending"   // waiting for a parallelism slot
	TaskAcquiring = "acquiring" // creating or resuming the task workspace
	TaskRunning   = "running"   // its script runs
	TaskWaiting   = "waiting"   // waiting for complete_task
	TaskFinishing = "finishing" // committing and taking the diff
	TaskSucceeded = "succeeded"
	TaskFailed    = "failed"    // non-zero exit, or complete_task with succeeded=false
	TaskTimedOut  = "timed_out" // the script or the wait ran out of time
	TaskError     = "error"     // the service could not run the task (Message says why)
)

// Task kinds (TaskResult.Kind).
const (
	TaskKindScript = "script" // runs TaskSpec.Script
	TaskKindAgent  = "agent"  // waits for complete_task
)

// Per-task merge outcomes (TaskResult.Merge).
const (
	TaskMergeMerged      = MergeMerged    // merged into the conversation branch
	TaskMergeConflict    = MergeConflict  // left out: conflicts (ConflictFiles)
	TaskMergeNotAccepted = "not_accepted" // succeeded but not in AcceptTaskIDs
	TaskMergeSkipped     = "skipped"      // did not succeed
	TaskMergeNoChanges   = "no_changes"   // succeeded without changing anything
	TaskMergeFailed      = "failed"       // the merge failed (Message says why)
)

// TaskDiff is a task's change against the commit it started from, bounded.
type TaskDiff struct {
	// Patch is cut at TaskDiffBytes (Truncated set).
	Patch string `json:"patch"`
	// Files are the changed paths (capped by the workspace's diff limits).
	Files      []string `json:"files"`
	Truncated  bool     `json:"truncated"`
	TotalBytes int64    `json:"total_bytes"` // full patch size
}

// TaskResult is one task's progress and outcome.
type TaskResult struct {
	TaskID string `json:"task_id"`
	// Kind is TaskKindScript or TaskKindAgent.
	Kind        string `json:"kind"`
	Status      string `json:"status"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	WorkflowID  string `json:"workflow_id,omitempty"`
	Branch      string `json:"branch,omitempty"`
	// ExitCode, TimedOut and the tails are set for scripts.
	ExitCode   *int   `json:"exit_code,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	StdoutTail string `json:"stdout_tail,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	// Commit is the task branch's tip once finished.
	Commit string `json:"commit,omitempty"`
	// Diff is omitted from the progress query.
	Diff *TaskDiff `json:"diff,omitempty"`
	// Message: the agent's complete_task message, or what went wrong.
	Message string `json:"message,omitempty"`
	// Merge is one of the TaskMerge* outcomes, "" until the merge phase.
	Merge         string   `json:"merge,omitempty"`
	ConflictFiles []string `json:"conflict_files,omitempty"`
	// MergePreview is this task's outcome in the preview taken before any
	// task was merged (MergeClean, MergeConflict, … of merge_branches with
	// dry_run, in the order that conflicts least: docs/API.md "Merge
	// preview"); PreviewConflictFiles the files it said would conflict.
	// Empty when no preview was taken.
	MergePreview         string    `json:"merge_preview,omitempty"`
	PreviewConflictFiles []string  `json:"preview_conflict_files,omitempty"`
	StartedAt            time.Time `json:"started_at,omitzero"`
	FinishedAt           time.Time `json:"finished_at,omitzero"`
}

// FanoutReport is the progress query's result (without patches) and the
// workflow's result.
type FanoutReport struct {
	FanoutID                string `json:"fanout_id"`
	State                   string `json:"state"`
	ConversationWorkspaceID string `json:"conversation_workspace_id"`
	// Branch is the conversation's branch; StartCommit the commit every task
	// branch starts from (the branch tip after the checkpoint commit).
	Branch      string `json:"branch,omitempty"`
	StartCommit string `json:"start_commit,omitempty"`
	// Checkpointed: the fan-out committed the conversation's uncommitted changes first.
	Checkpointed bool `json:"checkpointed,omitempty"`
	// FromFork: the tasks are forks of the conversation (FanoutInput.FromFork).
	FromFork bool `json:"from_fork,omitempty"`
	// Head is the conversation's HEAD after the merge phase.
	Head        string       `json:"head,omitempty"`
	MaxParallel int          `json:"max_parallel"`
	Running     int          `json:"running"`
	Tasks       []TaskResult `json:"tasks"`
	// MergeOrder is the task ids in the order they were merged: the order
	// the merge preview found to conflict least (empty without a preview).
	MergeOrder []string `json:"merge_order,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// WithoutPatches returns a copy of r whose task diffs have no patch (the
// form of the progress query); r is not changed.
func (r FanoutReport) WithoutPatches() FanoutReport {
	tasks := make([]TaskResult, len(r.Tasks))
	for i, t := range r.Tasks {
		if t.Diff != nil {
			d := *t.Diff
			d.Patch = ""
			t.Diff = &d
		}
		tasks[i] = t
	}
	r.Tasks = tasks
	return r
}
