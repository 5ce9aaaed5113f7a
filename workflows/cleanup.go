package workflows

import (
	"slices"
	"strings"
	"time"

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
	// 1. Sessions and store rows.
	ids := findCleanupWorkspaces(ctx, in, hostTimeout, &rep)
	if in.DryRun {
		rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
		return rep, nil
	}

	// 2. Destroy each through its session, at most MaxParallel at once.
	if err := destroyCleanupWorkspaces(ctx, in, &rep); err != nil {
		return rep, err
	}
	summarizeCleanup(&rep)
	rep.Done, rep.FinishedAt = true, workflow.Now(ctx)
	workflow.GetLogger(ctx).Info("cleanup finished", "user", in.UserID, "project", in.ProjectID,
		"destroyed", rep.Summary.Destroyed, "failed", rep.Summary.Failed, "hosts", strings.Join(ids, ","))
	return rep, nil
}

// findCleanupWorkspaces is the cleanup's step 1: it lists the matching
// sessions and the hosts (at once), then every host's store rows of the
// user (all hosts at once, each on its own queue), and records in rep one
// host row per listing (its error, Unreachable when no worker picked it up
// within hostTimeout) and one CleanupWouldDestroy outcome per workspace
// found, in workspace id order. It returns the hosts asked.
func findCleanupWorkspaces(ctx workflow.Context, in sandboxapi.CleanupInput, hostTimeout time.Duration, rep *sandboxapi.CleanupReport) []string {
	shared := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	found := cleanupCandidates{found: map[string]*sandboxapi.CleanupOutcome{}}
	sessionsF := workflow.ExecuteActivity(shared, wire.ActivityCleanupSessions, wire.CleanupSessionsInput{Query: in.Query()})
	var hosts wire.EvictionHostsResult
	hostsErr := workflow.ExecuteActivity(shared, wire.ActivityEvictionHosts).Get(ctx, &hosts)
	var sessions wire.CleanupCandidates
	if err := sessionsF.Get(ctx, &sessions); err != nil {
		rep.Hosts = append(rep.Hosts, sandboxapi.CleanupHost{HostID: "", Error: "listing sessions: " + appError(err).Error()})
	}
	found.add(sessions.Workspaces)
	if hostsErr != nil {
		rep.Hosts = append(rep.Hosts, sandboxapi.CleanupHost{HostID: "", Error: "listing hosts: " + appError(hostsErr).Error()})
	}
	ids := selectHosts(hosts.Hosts, nil)
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
			hr.Unreachable = notPickedUp(err)
			hr.Error = appError(err).Error()
		}
		hr.Workspaces = len(list.Workspaces)
		found.add(list.Workspaces)
		rep.Hosts = append(rep.Hosts, hr)
	}
	rep.Workspaces = append(rep.Workspaces, found.outcomes()...)
	rep.Summary.Found = len(rep.Workspaces)
	return ids
}

// cleanupCandidates gathers the workspaces a cleanup found, each once.
type cleanupCandidates struct {
	found map[string]*sandboxapi.CleanupOutcome
	order []string
}

// add records list: a workspace seen before keeps what it had and gains
// only the fields it lacked (host, mode, project, state).
func (c *cleanupCandidates) add(list []wire.CleanupCandidate) {
	for _, w := range list {
		o := c.found[w.WorkspaceID]
		if o == nil {
			o = &sandboxapi.CleanupOutcome{WorkspaceID: w.WorkspaceID}
			c.found[w.WorkspaceID] = o
			c.order = append(c.order, w.WorkspaceID)
		}
		if o.HostID == "" {
			o.HostID = w.HostID
		}
		if o.Mode == "" {
			o.Mode = w.Mode
		}
		if o.ProjectID == "" {
			o.ProjectID = w.ProjectID
		}
		if o.State == "" {
			o.State = w.State
		}
	}
}

// outcomes returns one CleanupWouldDestroy outcome per workspace, in
// workspace id order.
func (c *cleanupCandidates) outcomes() []sandboxapi.CleanupOutcome {
	slices.Sort(c.order)
	out := make([]sandboxapi.CleanupOutcome, 0, len(c.order))
	for _, id := range c.order {
		o := *c.found[id]
		o.Outcome = sandboxapi.CleanupWouldDestroy
		out = append(out, o)
	}
	return out
}

// destroyCleanupWorkspaces is the cleanup's step 2: it destroys each of
// rep's workspaces through its own session (the CleanupDestroy activity,
// update id "<workflow id>/<run id>/<workspace id>/destroy"), in order,
// at most in.Parallel() at once, and records each outcome. Errors: the
// workflow's cancellation only.
func destroyCleanupWorkspaces(ctx workflow.Context, in sandboxapi.CleanupInput, rep *sandboxapi.CleanupReport) error {
	info := workflow.GetInfo(ctx)
	opPrefix := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/"
	running := 0
	wg := workflow.NewWaitGroup(ctx)
	for i := range rep.Workspaces {
		if err := workflow.Await(ctx, func() bool { return running < in.Parallel() }); err != nil {
			return err
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
			recordDestroy(o, res, err)
		})
	}
	wg.Wait(ctx)
	return nil
}

// recordDestroy sets o's outcome from its destroy's result or error:
// CleanupFailed, CleanupGone (nothing existed) or CleanupDestroyed.
func recordDestroy(o *sandboxapi.CleanupOutcome, res sandboxapi.DestroyResult, err error) {
	switch {
	case err != nil:
		o.Outcome, o.Message = sandboxapi.CleanupFailed, errorMessage(err)
	case !res.Existed:
		o.Outcome, o.Result, o.Message = sandboxapi.CleanupGone, &res, res.Message
	default:
		o.Outcome, o.Result, o.Message = sandboxapi.CleanupDestroyed, &res, res.Message
	}
}

// summarizeCleanup counts rep's outcomes into its summary (destroyed,
// backups kept, gone, failed).
func summarizeCleanup(rep *sandboxapi.CleanupReport) {
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
}
