package workflows

import (
	"errors"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// CleanupWorkflow destroys every workspace of a user, or of one of the
// user's projects, across hosts (docs/API.md "Cleanup"). Being a workflow,
// it survives a worker restart: its steps are activities, retried on
// another (or the restarted) worker, and each destroy is sent with an update
// id derived from this run, so a retried step collects the earlier attempt's
// outcome instead of destroying twice.
//
//  1. Find the workspaces: the running sessions whose SandboxUser (and
//     SandboxProject) match, and, on every host (the hosts eviction plans
//     for), the store rows of the user that live there — a host whose
//     worker does not pick the listing up within HostTimeout is reported
//     unreachable. With Discard, rows that earlier destroys kept
//     (tombstones) are included, so what they kept is purged.
//  2. Unless DryRun, destroy each, in workspace id order with at most
//     MaxParallel at once, through its own session (update-with-start
//     "destroy"): the destroy runs under the session's lock, after any
//     running command, on the workspace's host.
//
// The result (and the progress query) reports every workspace's outcome.
// Repo caches left without workspaces follow the normal eviction rules.
// Errors: InvalidArgument (input) only; everything else is in the report.
func CleanupWorkflow(ctx workflow.Context, raw converter.RawValue) (sandboxapi.CleanupReport, error) {
	info := workflow.GetInfo(ctx)
	// Decoded strictly: a misspelt dry_run must not become a real cleanup.
	in, decodeErr := decodeInput[sandboxapi.CleanupInput](ctx, sandboxapi.CleanupWorkflowType, raw)
	rep := sandboxapi.CleanupReport{WorkflowID: info.WorkflowExecution.ID, UserID: in.UserID, ProjectID: in.ProjectID,
		DryRun: in.DryRun, Discard: in.Discard, StartedAt: workflow.Now(ctx),
		Hosts: []sandboxapi.CleanupHost{}, Workspaces: []sandboxapi.CleanupOutcome{}}
	if err := workflow.SetQueryHandler(ctx, sandboxapi.QueryProgress, func() (sandboxapi.CleanupReport, error) { return rep, nil }); err != nil {
		return rep, err
	}
	if decodeErr != nil {
		rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
		return rep, appError(decodeErr)
	}
	if err := in.Validate(); err != nil {
		rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
		return rep, appError(err)
	}
	watchDetails(ctx, func() string { return cleanupDetails(&rep) })
	hostTimeout := in.HostTimeout
	if hostTimeout <= 0 {
		hostTimeout = sandboxapi.DefaultCleanupHostTimeout
	}
	shared := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})

	// 1. Sessions and store rows.
	found := map[string]*sandboxapi.CleanupOutcome{}
	var order []string
	addCandidates := func(list []wire.CleanupCandidate) {
		for _, c := range list {
			o := found[c.WorkspaceID]
			if o == nil {
				o = &sandboxapi.CleanupOutcome{WorkspaceID: c.WorkspaceID}
				found[c.WorkspaceID] = o
				order = append(order, c.WorkspaceID)
			}
			if o.HostID == "" {
				o.HostID = c.HostID
			}
			if o.Mode == "" {
				o.Mode = c.Mode
			}
			if o.ProjectID == "" {
				o.ProjectID = c.ProjectID
			}
			if o.State == "" {
				o.State = c.State
			}
		}
	}
	sessionsF := workflow.ExecuteActivity(shared, wire.ActivityCleanupSessions, wire.CleanupSessionsInput{Query: in.Query()})
	var hosts wire.EvictionHostsResult
	hostsErr := workflow.ExecuteActivity(shared, wire.ActivityEvictionHosts).Get(ctx, &hosts)
	var sessions wire.CleanupCandidates
	if err := sessionsF.Get(ctx, &sessions); err != nil {
		rep.Hosts = append(rep.Hosts, sandboxapi.CleanupHost{HostID: "", Error: "listing sessions: " + appError(err).Error()})
	}
	addCandidates(sessions.Workspaces)
	if hostsErr != nil {
		rep.Hosts = append(rep.Hosts, sandboxapi.CleanupHost{HostID: "", Error: "listing hosts: " + appError(hostsErr).Error()})
	}
	ids := slices.Clone(hosts.Hosts)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	futures := make([]workflow.Future, len(ids))
	for i, h := range ids {
		hctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              wire.HostTaskQueue(h),
			ScheduleToStartTimeout: hostTimeout,
			StartToCloseTimeout:    5 * time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
		})
		futures[i] = workflow.ExecuteActivity(hctx, wire.ActivityCleanupList, wire.CleanupListInput{
			HostID: h, UserID: in.UserID, ProjectID: in.ProjectID, IncludeRemoved: in.Discard})
	}
	for i, h := range ids {
		hr := sandboxapi.CleanupHost{HostID: h}
		var list wire.CleanupCandidates
		if err := futures[i].Get(ctx, &list); err != nil {
			var to *temporal.TimeoutError
			if errors.As(err, &to) && to.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				hr.Unreachable = true
			}
			hr.Error = appError(err).Error()
		}
		hr.Workspaces = len(list.Workspaces)
		addCandidates(list.Workspaces)
		rep.Hosts = append(rep.Hosts, hr)
	}
	slices.Sort(order)
	for _, id := range order {
		o := *found[id]
		o.Outcome = sandboxapi.CleanupWouldDestroy
		rep.Workspaces = append(rep.Workspaces, o)
	}
	rep.Summary.Found = len(rep.Workspaces)
	if in.DryRun {
		rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
		return rep, nil
	}

	// 2. Destroy each through its session, at most MaxParallel at once.
	opPrefix := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/"
	running := 0
	wg := workflow.NewWaitGroup(ctx)
	for i := range rep.Workspaces {
		if err := workflow.Await(ctx, func() bool { return running < in.Parallel() }); err != nil {
			return rep, err
		}
		running++
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			defer func() { running-- }()
			o := &rep.Workspaces[i]
			dctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				// A destroy may save a large worktree first; the activity heartbeats.
				StartToCloseTimeout: 2 * time.Hour,
				HeartbeatTimeout:    time.Minute,
				RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 3},
			})
			var res sandboxapi.DestroyResult
			err := workflow.ExecuteActivity(dctx, wire.ActivityCleanupDestroy, wire.CleanupDestroyInput{
				OpID: opPrefix + o.WorkspaceID + "/destroy", TaskQueue: info.TaskQueueName, WorkspaceID: o.WorkspaceID, Discard: in.Discard,
			}).Get(ctx, &res)
			switch {
			case err != nil:
				o.Outcome, o.Message = sandboxapi.CleanupFailed, errorMessage(err)
			case !res.Existed:
				o.Outcome, o.Result, o.Message = sandboxapi.CleanupGone, &res, res.Message
			default:
				o.Outcome, o.Result, o.Message = sandboxapi.CleanupDestroyed, &res, res.Message
			}
		})
	}
	wg.Wait(ctx)
	for _, o := range rep.Workspaces {
		switch o.Outcome {
		case sandboxapi.CleanupDestroyed:
			rep.Summary.Destroyed++
			if o.Result != nil && o.Result.BackupRef != "" {
				rep.Summary.Backups++
			}
		case sandboxapi.CleanupGone:
			rep.Summary.Gone++
		case sandboxapi.CleanupFailed:
			rep.Summary.Failed++
		}
	}
	rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
	workflow.GetLogger(ctx).Info("cleanup finished", "user", in.UserID, "project", in.ProjectID,
		"destroyed", rep.Summary.Destroyed, "failed", rep.Summary.Failed, "hosts", strings.Join(ids, ","))
	return rep, nil
}
