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

// Fanout is a handle on one TaskFanoutWorkflow of the caller's tenant
// (docs/API.md "Task fan-out"): StartFanout's, or one Client.Fanout found.
type Fanout struct {
	c    *Client
	id   string
	wfID string
	// runID is "" for the tenant's workflow id, and the run a legacy id
	// was checked for (Client.Fanout): every call goes to that run only.
	runID string
}

// StartFanout validates in and starts tenant's fan-out fanoutID (workflow
// id sandbox-fanout/<tenant segment>/<fanoutID>: sandboxapi.FanoutWorkflowID),
// on the client's task queue, with the search attributes SandboxWorkspace
// (the conversation), SandboxUser and SandboxProject (the tenant). A fan-out
// id is used once per tenant; another tenant may use the same one at the
// same time. The fan-out works only on the tenant's conversation: a
// conversation request of another user or project is refused here, a
// conversation workspace id of another tenant fails the fan-out with
// ErrWorkspaceNotFound. Errors: ErrInvalidArgument (input, ids, a
// conversation request of another tenant), ErrConflict (the tenant has or
// had a fan-out with that id), ErrRuntimeUnavailable (Temporal
// unreachable).
func (c *Client) StartFanout(ctx context.Context, tenant sandboxapi.Tenant, fanoutID string, in sandboxapi.FanoutInput) (*Fanout, error) {
	wfID, err := sandboxapi.FanoutWorkflowID(tenant, fanoutID)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if r := in.Conversation; r != nil && (r.UserID != tenant.UserID || r.ProjectID != tenant.ProjectID) {
		return nil, sandboxapi.FieldError("conversation", "conversation: its user_id and project_id must be the fan-out's tenant (%s, %s)", tenant.UserID, tenant.ProjectID)
	}
	ws, _ := in.ConversationWorkspace()
	_, err = c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       wfID,
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrWorkspace).ValueSet(ws),
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrUser).ValueSet(tenant.UserID),
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrProject).ValueSet(tenant.ProjectID)),
		StaticSummary: sandboxapi.FanoutSummary(fanoutID, in),
	}, sandboxapi.TaskFanoutWorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "fan-out %s already exists", fanoutID)
	}
	if err != nil {
		return nil, FromTemporal(err)
	}
	return &Fanout{c: c, id: fanoutID, wfID: wfID}, nil
}

// Fanout finds tenant's fan-out fanoutID: the one under the tenant's
// workflow id (sandboxapi.FanoutWorkflowID), else one that a client from
// before tenant ids started under the legacy id sandbox-fanout/<fanoutID>,
// but only when that run's conversation belongs to the tenant (the user and
// project of its conversation request, or of its conversation workspace's
// session); the handle then addresses that run only. Another tenant's
// fan-out is never returned, and the error does not tell it apart from a
// missing one. Errors: ErrInvalidArgument (malformed ids),
// ErrWorkspaceNotFound (no such fan-out of the tenant),
// ErrRuntimeUnavailable.
func (c *Client) Fanout(ctx context.Context, tenant sandboxapi.Tenant, fanoutID string) (*Fanout, error) {
	wfID, err := sandboxapi.FanoutWorkflowID(tenant, fanoutID)
	if err != nil {
		return nil, err
	}
	_, err = c.tc.DescribeWorkflowExecution(ctx, wfID, "")
	if err == nil {
		return &Fanout{c: c, id: fanoutID, wfID: wfID}, nil
	}
	if !isNotFound(err) {
		return nil, FromTemporal(err)
	}
	legacy, _ := sandboxapi.LegacyFanoutWorkflowID(fanoutID)
	runID, owned, err := c.legacyFanoutRun(ctx, legacy, tenant)
	if err != nil {
		return nil, err
	}
	if !owned {
		return nil, noSuchFanout(fanoutID)
	}
	return &Fanout{c: c, id: fanoutID, wfID: legacy, runID: runID}, nil
}

// noSuchFanout is the error of a fan-out id the caller's tenant has no
// fan-out of: the same whether no fan-out has that id or another tenant's
// has, and naming only the caller's own id.
func noSuchFanout(fanoutID string) error {
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "fan-out %s: this user and project have no fan-out with that id", fanoutID)
}

// isNotFound reports whether err is Temporal's NotFound (no such workflow).
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// legacyFanoutRun looks at the fan-out run under the legacy id wfID and
// reports its run id and whether it is tenant's: its start input's
// conversation request is tenant's, or the session of its conversation
// workspace is (search attributes SandboxUser and SandboxProject, else its
// memo's handle). Anything it cannot read (no such workflow, another
// workflow type, an input it cannot decode, a conversation session that is
// gone) is not tenant's. Errors: Temporal's other failures (FromTemporal).
func (c *Client) legacyFanoutRun(ctx context.Context, wfID string, tenant sandboxapi.Tenant) (string, bool, error) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, wfID, "")
	if isNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, FromTemporal(err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != sandboxapi.TaskFanoutWorkflowType {
		return "", false, nil
	}
	runID := info.GetExecution().GetRunId()
	iter := c.tc.GetWorkflowHistory(ctx, wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return "", false, nil
	}
	ev, err := iter.Next()
	if isNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, FromTemporal(err)
	}
	var in sandboxapi.FanoutInput
	if c.dc.FromPayloads(ev.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in) != nil {
		return "", false, nil
	}
	if r := in.Conversation; r != nil {
		return runID, r.UserID == tenant.UserID && r.ProjectID == tenant.ProjectID, nil
	}
	sessionID, err := sandboxapi.SessionWorkflowID(in.ConversationWorkspaceID)
	if err != nil {
		return "", false, nil
	}
	sd, err := c.tc.DescribeWorkflowExecution(ctx, sessionID, "")
	if isNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, FromTemporal(err)
	}
	s := c.summaryOf(sd.GetWorkflowExecutionInfo())
	user, project := s.User, s.Project
	if user == "" || project == "" {
		user, project = s.Handle.UserID, s.Handle.ProjectID
	}
	return runID, user == tenant.UserID && project == tenant.ProjectID, nil
}

// ID returns the fan-out id.
func (f *Fanout) ID() string { return f.id }

// WorkflowID returns the fan-out's workflow id: the tenant's
// (sandbox-fanout/<tenant segment>/<fan-out id>), or the legacy
// sandbox-fanout/<fan-out id> of a fan-out started before tenant ids.
func (f *Fanout) WorkflowID() string { return f.wfID }

// fromTemporal is FromTemporal, except that Temporal's NotFound (the run is
// gone, e.g. past the namespace's retention) is noSuchFanout.
func (f *Fanout) fromTemporal(err error) error {
	if isNotFound(err) {
		return noSuchFanout(f.id)
	}
	return FromTemporal(err)
}

// Progress queries the fan-out (query progress): the report without
// patches. Errors: ErrWorkspaceNotFound (the fan-out is gone), ErrRuntimeUnavailable.
func (f *Fanout) Progress(ctx context.Context) (sandboxapi.FanoutReport, error) {
	var out sandboxapi.FanoutReport
	v, err := f.c.tc.QueryWorkflow(ctx, f.wfID, f.runID, sandboxapi.QueryProgress)
	if err == nil {
		err = v.Get(&out)
	}
	return out, f.fromTemporal(err)
}

// Result waits for the fan-out to finish and returns its report (patches
// included). Errors: the workflow's failure as a sandbox typed error (e.g.
// ErrInvalidArgument, ErrWorkspaceNotFound for an unknown conversation or
// one of another tenant).
func (f *Fanout) Result(ctx context.Context) (sandboxapi.FanoutReport, error) {
	var out sandboxapi.FanoutReport
	err := f.c.tc.GetWorkflow(ctx, f.wfID, f.runID).Get(ctx, &out)
	return out, f.fromTemporal(err)
}

// CompleteTask sends complete_task for a task that waits for an external
// agent: succeeded = its work may be merged. The signal of a task that is
// unknown, runs a script or was already completed is ignored by the workflow.
// Errors: ErrInvalidArgument (task id), ErrWorkspaceNotFound (the fan-out is
// gone or closed), ErrRuntimeUnavailable.
func (f *Fanout) CompleteTask(ctx context.Context, taskID string, succeeded bool, message string) error {
	if err := sandboxapi.ValidateID("task_id", taskID); err != nil {
		return err
	}
	err := f.c.tc.SignalWorkflow(ctx, f.wfID, f.runID, sandboxapi.SignalCompleteTask,
		sandboxapi.CompleteTaskSignal{TaskID: taskID, Succeeded: succeeded, Message: message})
	return f.fromTemporal(err)
}

// Cancel asks Temporal to cancel the fan-out: the run ends cancelled, its
// task sessions go on (docs/API.md "Task fan-out"). Cancelling a closed
// fan-out is ErrWorkspaceNotFound. Errors: ErrWorkspaceNotFound,
// ErrRuntimeUnavailable.
func (f *Fanout) Cancel(ctx context.Context) error {
	return f.fromTemporal(f.c.tc.CancelWorkflow(ctx, f.wfID, f.runID))
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
		d, err := f.c.tc.DescribeWorkflowExecution(ctx, f.wfID, f.runID)
		if err != nil {
			return sandboxapi.FanoutReport{}, f.fromTemporal(err)
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
