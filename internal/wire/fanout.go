package wire

import "github.com/sandboxcore/sandboxcore/sandboxapi"

// FanoutPrepareInput is fanout.Prepare's argument: resume (or acquire) the
// conversation session and commit its uncommitted changes.
type FanoutPrepareInput struct {
	// OpID prefixes the update ids the activity sends ("<workflow id>/<run id>").
	OpID              string                       `json:"op_id"`
	WorkspaceID       string                       `json:"workspace_id"`
	Request           *sandboxapi.WorkspaceRequest `json:"request,omitempty"`
	CheckpointMessage string                       `json:"checkpoint_message"`
	// Fork: the tasks are forks of the conversation (FanoutInput.FromFork):
	// nothing is committed, the start commit is the conversation's HEAD.
	Fork bool `json:"fork,omitempty"`
	// TenantSegment, when set, is the fan-out's tenant (the segment of its
	// workflow id): a conversation workspace of another tenant is refused
	// as not found before anything is sent to it but the resume. Empty for
	// a legacy fan-out id and in runs recorded before tenant ids.
	TenantSegment string `json:"tenant_segment,omitempty"`
}

// FanoutPrepareResult is fanout.Prepare's result.
type FanoutPrepareResult struct {
	Handle       sandboxapi.Handle `json:"handle"`
	StartCommit  string            `json:"start_commit"`
	Checkpointed bool              `json:"checkpointed"`
}

// AcquireTaskInput is fanout.AcquireTask's argument: the task session is
// started (update-with-start acquire) on HostID's task queue so that its
// workspace shares the conversation's repository cache.
type AcquireTaskInput struct {
	HostID      string                      `json:"host_id"`
	StartCommit string                      `json:"start_commit"`
	Request     sandboxapi.WorkspaceRequest `json:"request"`
}

// RunScriptInput is fanout.RunScript's argument.
type RunScriptInput struct {
	OpID        string `json:"op_id"`
	TaskID      string `json:"task_id"`
	HostID      string `json:"host_id"`
	WorkspaceID string `json:"workspace_id"`
	Script      string `json:"script"`
	TimeoutS    int    `json:"timeout_s"`
}

// RunScriptResult is fanout.RunScript's result (tails bounded by sandboxapi.TaskOutputTailBytes).
type RunScriptResult struct {
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out"`
	StdoutTail string `json:"stdout_tail"`
	StderrTail string `json:"stderr_tail"`
	DurationMS int64  `json:"duration_ms"`
}

// FinishTaskInput is fanout.FinishTask's argument: commit the task's changes
// (when Commit) and take its diff.
type FinishTaskInput struct {
	OpID        string `json:"op_id"`
	TaskID      string `json:"task_id"`
	HostID      string `json:"host_id"`
	WorkspaceID string `json:"workspace_id"`
	Commit      bool   `json:"commit"`
	Message     string `json:"message,omitempty"`
}

// FinishTaskResult is fanout.FinishTask's result.
type FinishTaskResult struct {
	// Commit is the task branch's HEAD afterwards.
	Commit string              `json:"commit"`
	Diff   sandboxapi.TaskDiff `json:"diff"`
}

// FanoutMergeInput is fanout.Merge's argument: the merge_branches update sent
// to the conversation's session.
type FanoutMergeInput struct {
	OpID        string                  `json:"op_id"`
	WorkspaceID string                  `json:"workspace_id"`
	Request     sandboxapi.MergeRequest `json:"request"`
}

// FanoutMergeResult is fanout.Merge's result: the merge's (its fields at
// the top level, as results recorded before Preview existed hold them) and
// the preview taken before it (nil when none was: recorded before previews,
// or the preview failed).
type FanoutMergeResult struct {
	sandboxapi.MergeResult
	Preview *sandboxapi.MergeResult `json:"preview,omitempty"`
}
