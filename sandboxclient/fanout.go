package sandboxclient

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

type updateIDKey struct{}

// WithUpdateID returns a context whose session operations (Exec, Commit,
// MergeBranches, … — not Acquire) are sent with this Temporal update id
// instead of a random one. While the session run that received an update is
// open, another update with the same id is not run again: it returns the
// first one's outcome (success or failure). Used by the fan-out's activities
// so that a retried step does not repeat a command.
func WithUpdateID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, updateIDKey{}, id)
}

// updateIDFrom returns the update id set by WithUpdateID, "" (random) when none.
func updateIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(updateIDKey{}).(string)
	return id
}

// UpdateOutcome waits for the outcome of the update updateID sent earlier to
// the session's current run and stores its result in out. Errors: the
// update's own failure (a sandbox typed error), or ErrWorkspaceNotFound when
// the current run has no such update (never sent, or sent to an earlier run).
func (s *Session) UpdateOutcome(ctx context.Context, updateID string, out any) error {
	return FromTemporal(s.rpc.Outcome(ctx, updateID, out))
}

// Fanout is a handle on one TaskFanoutWorkflow (docs/API.md "Task fan-out").
type Fanout struct {
	c    *Client
	id   string
	wfID string
}

// StartFanout validates in and starts the fan-out fanoutID (workflow id
// sandbox-fanout/<fanoutID>, on the client's task queue). A fan-out id is
// used once. Errors: ErrInvalidArgument (input, id), ErrConflict (a fan-out
// with that id exists or existed), ErrRuntimeUnavailable (Temporal unreachable).
func (c *Client) StartFanout(ctx context.Context, fanoutID string, in sandboxapi.FanoutInput) (*Fanout, error) {
	f, err := c.Fanout(fanoutID)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	ws, _ := in.ConversationWorkspace()
	_, err = c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       f.wfID,
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrWorkspace).ValueSet(ws)),
		StaticSummary:                            sandboxapi.FanoutSummary(fanoutID, in),
	}, sandboxapi.TaskFanoutWorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "fan-out %s already exists", fanoutID)
	}
	if err != nil {
		return nil, FromTemporal(err)
	}
	return f, nil
}

// Fanout returns the handle of an existing fan-out (no call is made).
// Errors: ErrInvalidArgument for a malformed id.
func (c *Client) Fanout(fanoutID string) (*Fanout, error) {
	wfID, err := sandboxapi.FanoutWorkflowID(fanoutID)
	if err != nil {
		return nil, err
	}
	return &Fanout{c: c, id: fanoutID, wfID: wfID}, nil
}

// ID returns the fan-out id.
func (f *Fanout) ID() string { return f.id }

// WorkflowID returns the fan-out's workflow id.
func (f *Fanout) WorkflowID() string { return f.wfID }

// Progress queries the fan-out (query progress): the report without
// patches. Errors: ErrWorkspaceNotFound (no such fan-out), ErrRuntimeUnavailable.
func (f *Fanout) Progress(ctx context.Context) (sandboxapi.FanoutReport, error) {
	return query[sandboxapi.FanoutReport](ctx, f.c.tc, f.wfID, sandboxapi.QueryProgress)
}

// Result waits for the fan-out to finish and returns its report (patches
// included). Errors: the workflow's failure as a sandbox typed error (e.g.
// ErrInvalidArgument, ErrWorkspaceNotFound for an unknown conversation).
func (f *Fanout) Result(ctx context.Context) (sandboxapi.FanoutReport, error) {
	return workflowResult[sandboxapi.FanoutReport](ctx, f.c.tc, f.wfID)
}

// CompleteTask sends complete_task for a task that waits for an external
// agent: succeeded = its work may be merged. The signal of a task that is
// unknown, runs a script or was already completed is ignored by the workflow.
func (f *Fanout) CompleteTask(ctx context.Context, taskID string, succeeded bool, message string) error {
	if err := sandboxapi.ValidateID("task_id", taskID); err != nil {
		return err
	}
	err := f.c.tc.SignalWorkflow(ctx, f.wfID, "", sandboxapi.SignalCompleteTask,
		sandboxapi.CompleteTaskSignal{TaskID: taskID, Succeeded: succeeded, Message: message})
	return FromTemporal(err)
}

// Watch polls Progress every interval (0 = 1 s) and calls fn with each
// report that differs from the last one, until the fan-out closes; it then
// returns the final report (Result, patches included), after calling fn with
// it unless the last progress already showed it. Errors: as Result, or ctx's.
func (f *Fanout) Watch(ctx context.Context, interval time.Duration, fn func(sandboxapi.FanoutReport)) (sandboxapi.FanoutReport, error) {
	if interval <= 0 {
		interval = time.Second
	}
	last := ""
	for {
		d, err := f.c.tc.DescribeWorkflowExecution(ctx, f.wfID, "")
		if err != nil {
			return sandboxapi.FanoutReport{}, FromTemporal(err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			res, err := f.Result(ctx)
			if b, _ := json.Marshal(res.WithoutPatches()); err == nil && string(b) != last {
				fn(res)
			}
			return res, err
		}
		if p, err := f.Progress(ctx); err == nil {
			if b, _ := json.Marshal(p); string(b) != last {
				last = string(b)
				fn(p)
			}
		}
		select {
		case <-ctx.Done():
			return sandboxapi.FanoutReport{}, FromTemporal(ctx.Err())
		case <-time.After(interval):
		}
	}
}
