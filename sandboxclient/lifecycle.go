package sandboxclient

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The lifecycle of a workspace (docs/API.md "Checkpoints", "Fork",
// "Destroy", "Cleanup").

// Checkpoint records the workspace's exact state (files, permission bits,
// HEAD; not ignored files) as a new checkpoint; nothing in the workspace
// changes. Errors: ErrInvalidArgument (label), ErrCommandRejected (analysis
// workspace), ErrResourceLimit (sandboxapi.MaxCheckpoints).
func (s *Session) Checkpoint(ctx context.Context, label string) (sandboxapi.Checkpoint, error) {
	in := sandboxapi.CheckpointInput{Label: label}
	if err := in.Validate(); err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	return Call(ctx, s, sandboxapi.OpCheckpoint, in)
}

// Checkpoints lists the workspace's checkpoints, oldest first.
func (s *Session) Checkpoints(ctx context.Context) ([]sandboxapi.Checkpoint, error) {
	out, err := Call(ctx, s, sandboxapi.OpCheckpoints, sandboxapi.None{})
	return out.Checkpoints, err
}

// Rollback brings the workspace's files and HEAD back to checkpoint id,
// after checkpointing the state it leaves (RollbackResult.Undo: roll back to
// that to undo). Errors: ErrNotFound (no such checkpoint),
// ErrCommandRejected (analysis workspace), ErrConflict.
func (s *Session) Rollback(ctx context.Context, id int) (sandboxapi.RollbackResult, error) {
	in := sandboxapi.RollbackInput{Checkpoint: id}
	if err := in.Validate(); err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpRollback, in)
}

// Fork creates a new task (in.TaskID) or edit (in.ConversationID)
// workspace whose files are exactly this workspace's current ones, on its
// own branch from this workspace's HEAD, with its own session and runtime;
// this workspace is not changed. The result's Handle is the new one's.
// Errors: ErrInvalidArgument, ErrCommandRejected (analysis workspace),
// ErrConflict (the new key's workspace or branch exists: use a new id).
func (s *Session) Fork(ctx context.Context, in sandboxapi.ForkInput) (sandboxapi.ForkResult, error) {
	if err := in.Validate(); err != nil {
		return sandboxapi.ForkResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpFork, in)
}

// Destroy ends the workspace for good (docs/API.md "Destroy"): unless
// discard, its unsaved work is saved restorably (DestroyResult.BackupRef);
// the runtime, the worktree, the branch and the record go and the session
// completes. It is sent by update-with-start, so it also reaches a
// workspace whose session is not running (nothing there: Existed false).
// Errors: ErrConflict (an earlier destroy's backup was never restored and
// there is new work to save: restore, or discard), ErrWorkspaceUnavailable
// (host down, or the worktree cannot be deleted), the backup's errors.
func (s *Session) Destroy(ctx context.Context, discard bool) (sandboxapi.DestroyResult, error) {
	var out sandboxapi.DestroyResult
	return out, s.updateWithStart(ctx, sandboxapi.UpdateDestroy, sandboxapi.DestroyInput{Discard: discard}, &out)
}

// Restore brings back saved work (docs/API.md "Destroy", "Eviction"): the
// work a destroy saved (into a fresh workspace of the same key, or
// re-creating the destroyed one), or an evicted workspace's. The handle's
// RestoredFrom names the backup ref ("" when nothing was pending). Sent by
// update-with-start, so it reaches a destroyed workspace's completed
// session. Errors: ErrWorkspaceNotFound (nothing of the workspace is kept),
// ErrWorkspaceDirty (the fresh workspace has changes of its own),
// ErrConflict (an evicted workspace's branch moved).
func (s *Session) Restore(ctx context.Context) (sandboxapi.Handle, error) {
	var out sandboxapi.Handle
	return out, s.updateWithStart(ctx, sandboxapi.UpdateRestore, nil, &out)
}

// Cleanup is a handle on one CleanupWorkflow run.
type Cleanup struct {
	c    *Client
	wfID string
}

// StartCleanup validates in and starts a CleanupWorkflow (workflow id
// sandboxapi.CleanupWorkflowID of the user, project and the current time)
// on the client's task queue. Errors: ErrInvalidArgument, as FromTemporal.
func (c *Client) StartCleanup(ctx context.Context, in sandboxapi.CleanupInput) (*Cleanup, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	id := sandboxapi.CleanupWorkflowID(in.UserID, in.ProjectID, time.Now().UnixNano())
	_, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: c.taskQueue, WorkflowExecutionTimeout: 24 * time.Hour,
		StaticSummary: sandboxapi.CleanupRunSummary(in),
	}, sandboxapi.CleanupWorkflowType, in)
	if err != nil {
		return nil, FromTemporal(err)
	}
	return &Cleanup{c: c, wfID: id}, nil
}

// WorkflowID returns the cleanup's workflow id.
func (cl *Cleanup) WorkflowID() string { return cl.wfID }

// Progress queries the cleanup (query progress).
func (cl *Cleanup) Progress(ctx context.Context) (sandboxapi.CleanupReport, error) {
	return query[sandboxapi.CleanupReport](ctx, cl.c.tc, cl.wfID, sandboxapi.QueryProgress)
}

// Result waits for the cleanup and returns its report (one outcome per
// workspace). Errors: the workflow's failure (ErrInvalidArgument), as FromTemporal.
func (cl *Cleanup) Result(ctx context.Context) (sandboxapi.CleanupReport, error) {
	return workflowResult[sandboxapi.CleanupReport](ctx, cl.c.tc, cl.wfID)
}
