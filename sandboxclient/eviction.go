package sandboxclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Eviction (docs/API.md "Eviction"): runs of EvictionCronWorkflow
// and the pin, unpin and restore of one workspace.

// manualEvictionPrefix starts the workflow id of runs started by RunEviction;
// runtimesGCPrefix that of runs started by CollectOrphanRuntimes (never a
// "last eviction": they only look at orphan runtimes).
const (
	manualEvictionPrefix = "sandbox-eviction-manual-"
	runtimesGCPrefix     = "sandbox-runtimes-gc-"
)

// RunEviction starts an EvictionCronWorkflow run now on the client's task
// queue (workflow id "sandbox-eviction-manual-[dryrun-]<unix nanoseconds>")
// and waits for its result. With in.DryRun the run only plans. Errors: the
// sandbox typed errors of FromTemporal.
func (c *Client) RunEviction(ctx context.Context, in sandboxapi.EvictionInput) (sandboxapi.EvictionRunResult, error) {
	id := manualEvictionPrefix
	if in.DryRun {
		id += "dryrun-"
	}
	return c.runEviction(ctx, id+fmt.Sprint(time.Now().UnixNano()), in)
}

// CollectOrphanRuntimes starts an eviction run limited to orphan runtimes
// (remote sandboxes of a host whose workspace no longer exists; action
// delete_orphan_runtime, docs/API.md "Eviction") on the given hosts (none:
// all), workflow id "sandbox-runtimes-gc-[dryrun-]<unix nanoseconds>", and
// waits for its result: with dryRun each host's plan lists them, else
// they are deleted. Errors: those of RunEviction.
func (c *Client) CollectOrphanRuntimes(ctx context.Context, dryRun bool, hosts []string) (sandboxapi.EvictionRunResult, error) {
	id := runtimesGCPrefix
	if dryRun {
		id += "dryrun-"
	}
	return c.runEviction(ctx, id+fmt.Sprint(time.Now().UnixNano()), sandboxapi.EvictionInput{
		DryRun: dryRun, Hosts: hosts, Actions: []sandboxapi.EvictionActionKind{sandboxapi.EvictionDeleteOrphanRuntime}})
}

func (c *Client) runEviction(ctx context.Context, id string, in sandboxapi.EvictionInput) (sandboxapi.EvictionRunResult, error) {
	run, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: c.taskQueue, WorkflowExecutionTimeout: 2 * time.Hour,
		StaticSummary: sandboxapi.EvictionRunSummary("manual", in),
	}, sandboxapi.EvictionCronWorkflowType, in)
	if err != nil {
		return sandboxapi.EvictionRunResult{}, FromTemporal(err)
	}
	var out sandboxapi.EvictionRunResult
	if err := run.Get(ctx, &out); err != nil {
		return out, FromTemporal(err)
	}
	return out, nil
}

// LastEviction returns the result of the most recently closed, completed
// EvictionCronWorkflow run on the client's task queue (scheduled or manual;
// dry runs only when includeDryRun; never a CollectOrphanRuntimes run). Errors:
// ErrNotFound when there is none.
func (c *Client) LastEviction(ctx context.Context, includeDryRun bool) (sandboxapi.EvictionRunResult, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND TaskQueue = '%s' AND ExecutionStatus = 'Completed'", sandboxapi.EvictionCronWorkflowType, c.taskQueue)
	var bestID, bestRun string
	var best time.Time
	var token []byte
	for pages := 0; pages < 20; pages++ {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: 100})
		if err != nil {
			return sandboxapi.EvictionRunResult{}, FromTemporal(err)
		}
		for _, e := range resp.Executions {
			id := e.GetExecution().GetWorkflowId()
			if !includeDryRun && strings.HasPrefix(id, manualEvictionPrefix+"dryrun-") || strings.HasPrefix(id, runtimesGCPrefix) {
				continue
			}
			if t := e.GetCloseTime().AsTime(); t.After(best) {
				best, bestID, bestRun = t, id, e.GetExecution().GetRunId()
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	if bestID == "" {
		return sandboxapi.EvictionRunResult{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "no completed eviction run on task queue %s yet", c.taskQueue)
	}
	var out sandboxapi.EvictionRunResult
	if err := c.tc.GetWorkflow(ctx, bestID, bestRun).Get(ctx, &out); err != nil {
		return out, FromTemporal(err)
	}
	return out, nil
}

// signal sends signal to the session by signal-with-start: a session that is
// not running starts on the client's task queue, handles it and completes.
func (s *Session) signal(ctx context.Context, name string, arg any) error {
	_, err := s.c.tc.SignalWithStartWorkflow(ctx, s.wfID, name, arg, client.StartWorkflowOptions{
		ID:                    s.wfID,
		TaskQueue:             s.c.taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrWorkspace).ValueSet(s.wsID),
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrState).ValueSet(sandboxapi.StateAcquiring)),
		StaticSummary: sandboxapi.SessionSummary(s.wsID, nil),
		StaticDetails: sandboxapi.SessionDetails(s.wsID, nil),
	}, sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: s.wsID})
	return FromTemporal(err)
}

// Pin keeps the workspace from eviction until until (signal "pin" through
// its SessionWorkflow, started when not running) and waits until the session
// applied it. Errors: ErrInvalidArgument (until not in the future),
// ErrWorkspaceNotFound, ErrTimeout (ctx ended before the session answered).
func (s *Session) Pin(ctx context.Context, until time.Time) (sandboxapi.EvictionState, error) {
	if !until.After(time.Now()) {
		return sandboxapi.EvictionState{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "pin until %s: must be in the future", until.UTC().Format(time.RFC3339))
	}
	u := until.UTC()
	return s.pinSignal(ctx, sandboxapi.SignalPin, &u)
}

// Unpin drops the workspace's pin (signal "unpin") and waits until the
// session applied it. Errors: as Pin.
func (s *Session) Unpin(ctx context.Context) (sandboxapi.EvictionState, error) {
	return s.pinSignal(ctx, sandboxapi.SignalUnpin, nil)
}

func (s *Session) pinSignal(ctx context.Context, name string, until *time.Time) (sandboxapi.EvictionState, error) {
	req := sandboxapi.PinRequest{RequestID: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), Until: until}
	if err := s.signal(ctx, name, req); err != nil {
		return sandboxapi.EvictionState{}, err
	}
	for {
		st, err := s.EvictionState(ctx)
		if err == nil && st.LastPinRequest == req.RequestID {
			if st.PinError != "" {
				kind := sandboxapi.KindByType(st.PinErrorType)
				if kind == nil {
					kind = sandboxapi.ErrSandbox
				}
				return st, sandboxapi.Errorf(kind, "%s", st.PinError)
			}
			return st, nil
		}
		select {
		case <-ctx.Done():
			return sandboxapi.EvictionState{}, sandboxapi.Errorf(sandboxapi.ErrTimeout, "%s of workspace %s not confirmed: %v", name, s.wsID, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EvictionState queries the session's eviction state (pin, last eviction).
// A completed run answers with its final state.
func (s *Session) EvictionState(ctx context.Context) (sandboxapi.EvictionState, error) {
	return query[sandboxapi.EvictionState](ctx, s.c.tc, s.wfID, sandboxapi.QueryEviction)
}
