package hostworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// servedWorkflows are the workflow types a worker serves, by the names
// their histories record (startWorkers and wireEviction register them).
var servedWorkflows = map[string]any{
	sandboxapi.SessionWorkflowType:       workflows.SessionWorkflow,
	sandboxapi.TaskFanoutWorkflowType:    workflows.TaskFanoutWorkflow,
	sandboxapi.ProcessStreamWorkflowType: workflows.ProcessStreamWorkflow,
	sandboxapi.CleanupWorkflowType:       workflows.CleanupWorkflow,
	sandboxapi.EvictionCronWorkflowType:  workflows.EvictionCronWorkflow,
}

// ReplayCheck is what CheckReplay found: the open runs it replayed and
// those this build's workflow code cannot replay.
type ReplayCheck struct {
	// Replayed counts the open runs whose histories were replayed.
	Replayed int
	// Failures are the runs that did not replay, in listing order.
	Failures []ReplayFailure
}

// ReplayFailure is one open run this build cannot replay: a worker of this
// build would fail its next workflow task (docs/PRODUCTION.md "Upgrading
// workers").
type ReplayFailure struct {
	WorkflowType, WorkflowID, RunID string
	// Reason is the replayer's error (a non-determinism error names the
	// event the code no longer produces).
	Reason string
}

// CheckReplay finds every open run of the workflows a worker serves through
// visibility (ExecutionStatus = 'Running') in cfg's namespace, and replays
// each one's history, each with a fresh replayer, against this binary's
// workflow code with the worker's data converter and workflow
// interceptors. Run before a deploy (sandbox-worker check-replay): a
// failure is a run that predates a change this build no longer replays —
// a retired GetVersion branch (docs/DESIGN.md "Retiring a change") — and
// the build must not serve it. It needs TEMPORAL_ADDRESS (the embedded
// server of a running worker is reached at its address). Errors: the
// connection's, or the listing's; a history that cannot be read counts as
// a failure.
func CheckReplay(ctx context.Context, cfg Config, log *slog.Logger) (ReplayCheck, error) {
	if cfg.TemporalAddress == "" {
		return ReplayCheck{}, errors.New("check-replay reads the Temporal service the workers use: set TEMPORAL_ADDRESS (a running `make run` worker's embedded server is 127.0.0.1:7233)")
	}
	conn, copts, err := clientOptions(cfg, cfg.TemporalAddress, false, log)
	if err != nil {
		return ReplayCheck{}, err
	}
	// The worker's converters: its histories' payloads decode as it wrote them.
	ropts := worker.WorkflowReplayerOptions{DataConverter: copts.DataConverter, FailureConverter: copts.FailureConverter}
	if cfg.Security.RequirePayloadEncryption {
		ropts.Interceptors = []interceptor.WorkerInterceptor{argumentsRequired()}
	}
	c, err := temporalconn.Dial(ctx, conn, copts)
	if err != nil {
		return ReplayCheck{}, err
	}
	defer c.Close()
	// The replayer's own log of a failure (a panic and its stack) says
	// what the failure's Reason says: it is not repeated.
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	return checkOpenRuns(ctx, c, cfg.Namespace, ropts, quiet)
}

// checkOpenRuns lists the open runs of servedWorkflows page by page and
// replays each (replayRun).
func checkOpenRuns(ctx context.Context, c client.Client, namespace string, ropts worker.WorkflowReplayerOptions, logger sdklog.Logger) (ReplayCheck, error) {
	var res ReplayCheck
	types := make([]string, 0, len(servedWorkflows))
	for name := range servedWorkflows {
		types = append(types, "'"+name+"'")
	}
	slices.Sort(types)
	req := &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace,
		Query: fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowType IN (%s)", strings.Join(types, ", "))}
	for {
		page, err := c.ListWorkflow(ctx, req)
		if err != nil {
			return res, fmt.Errorf("list the open runs: %w", err)
		}
		for _, e := range page.GetExecutions() {
			f := ReplayFailure{WorkflowType: e.GetType().GetName(), WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()}
			if err := replayRun(ctx, c, f, ropts, logger); err != nil {
				f.Reason = err.Error()
				res.Failures = append(res.Failures, f)
			}
			res.Replayed++
		}
		if len(page.GetNextPageToken()) == 0 {
			return res, nil
		}
		req.NextPageToken = page.GetNextPageToken()
	}
}

// replayRun replays one open run's history as far as its last completed
// workflow task (settled).
func replayRun(ctx context.Context, c client.Client, run ReplayFailure, ropts worker.WorkflowReplayerOptions, logger sdklog.Logger) error {
	wf, ok := servedWorkflows[run.WorkflowType]
	if !ok {
		return fmt.Errorf("workflow type %q is not served by this build", run.WorkflowType)
	}
	iter := c.GetWorkflowHistory(ctx, run.WorkflowID, run.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return fmt.Errorf("read its history: %w", err)
		}
		hist.Events = append(hist.Events, ev)
	}
	events, ok := settled(hist.Events)
	if !ok {
		return nil // no task completed yet: nothing this build could disagree with
	}
	hist.Events = events
	replayer, err := worker.NewWorkflowReplayerWithOptions(ropts)
	if err != nil {
		return err
	}
	replayer.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: run.WorkflowType})
	return replayer.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: run.WorkflowID, RunID: run.RunID}})
}

// settled returns events without a workflow task still in flight at their
// end (from its WORKFLOW_TASK_SCHEDULED on): replaying that task would
// produce commands the history does not hold yet (an update's completion,
// say), which the replayer reports as non-determinism. The last completed
// task's own commands follow its WORKFLOW_TASK_COMPLETED and are kept, and
// so is what arrived after them (a signal), for which the replayer runs no
// task. false when no task has completed.
func settled(events []*historypb.HistoryEvent) ([]*historypb.HistoryEvent, bool) {
	scheduled, completed := -1, -1
	for i, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			scheduled = i
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			completed = i
		}
	}
	if completed < 0 {
		return nil, false
	}
	if scheduled > completed {
		return events[:scheduled], true
	}
	return events, true
}
