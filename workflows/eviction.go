package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictionCronWorkflow is one eviction run (DESIGN.md "Temporal shape";
// docs/DESIGN.md "Eviction policy"). A Temporal Schedule (sandboxapi.EvictionScheduleIDFor
// the shared queue, created or updated by every worker at start) starts it
// every SANDBOX_EVICTION_INTERVAL with overlap policy SKIP; `sandboxctl
// eviction run` starts one by hand.
//
//  1. The hosts: every host id the store knows (workspace and repo cache
//     rows, plus the registered hosts: activities.Store ListHosts).
//  2. For each host, in parallel, the planning activity on that host's queue
//     measures its disk and plans (package eviction). A host whose worker
//     does not pick it up within HostTimeout is reported unreachable.
//  3. Unless DryRun: every runtime and workspace action is sent to that
//     workspace's SessionWorkflow by signal-with-start "evict" (ReplyTo = this
//     run's workflow id); each session carries it out under its mutating lock
//     (waiting for a running command) and signals "eviction_reply" back. The
//     run waits up to ReplyTimeout; an action without a reply is "pending"
//     (the session still carries it out later, re-checking its rules).
//  4. Each host deletes its planned orphan runtimes (remote sandboxes of
//     this host whose workspace no longer exists: no session exists to ask).
//  5. Then each host removes its planned repo caches, in order, while its
//     usage stays above the low water mark.
//
// The result (sandboxapi.EvictionRunResult) is the run's result; its Summary is also
// the memo field sandboxapi.MemoEviction, visible in the Web UI.
func EvictionCronWorkflow(ctx workflow.Context, raw converter.RawValue) (sandboxapi.EvictionRunResult, error) {
	info := workflow.GetInfo(ctx)
	in, err := decodeInput[sandboxapi.EvictionInput](ctx, sandboxapi.EvictionCronWorkflowType, raw)
	if err != nil {
		return sandboxapi.EvictionRunResult{WorkflowID: info.WorkflowExecution.ID, StartedAt: workflow.Now(ctx), FinishedAt: workflow.Now(ctx),
			Hosts: []sandboxapi.HostEvictionResult{}}, appError(err)
	}
	res := sandboxapi.EvictionRunResult{WorkflowID: info.WorkflowExecution.ID, DryRun: in.DryRun, StartedAt: workflow.Now(ctx), Hosts: []sandboxapi.HostEvictionResult{}}
	replyTimeout := in.ReplyTimeout
	if replyTimeout <= 0 {
		replyTimeout = sandboxapi.DefaultEvictionReplyTimeout
	}
	hostTimeout := in.HostTimeout
	if hostTimeout <= 0 {
		hostTimeout = sandboxapi.DefaultEvictionHostTimeout
	}
	phase := "listing hosts"
	watchDetails(ctx, func() string { return evictionDetails(phase, &res) })

	// 1. The hosts.
	ids, err := evictionHosts(ctx, in.Hosts)
	if err != nil {
		return res, err
	}

	// 2. Plan every host in parallel.
	phase = fmt.Sprintf("planning %d hosts", len(ids))
	res.Hosts = planHosts(ctx, ids, in.Actions, hostTimeout)
	if in.DryRun {
		phase = "finished (dry run: nothing was changed)"
		return finishEviction(ctx, &res), nil
	}
	phase = "evicting through the sessions"

	// 3. Runtime and workspace actions, through the sessions.
	reqs, where := sessionEvictions(res.Hosts, info.WorkflowExecution.ID)
	if len(reqs) > 0 {
		waiting := signalEvictions(ctx, res.Hosts, reqs, where, info.TaskQueueName)
		awaitEvictionReplies(ctx, res.Hosts, where, waiting, workflow.Now(ctx).Add(replyTimeout))
	}

	// 4. Orphan runtimes, on each host (runs recorded before this step
	// planned none).
	phase = "deleting orphan runtimes"
	if workflow.GetVersion(ctx, changeEvictionOrphans, workflow.DefaultVersion, 1) >= 1 {
		deleteOrphans(ctx, res.Hosts, hostTimeout)
	}

	// 5. Dependency caches, then repo caches, host by host, while
	// pressure remains (runs recorded before dependency caches planned
	// none).
	if workflow.GetVersion(ctx, changeEvictionDependencyCaches, workflow.DefaultVersion, 1) >= 1 {
		phase = "removing dependency caches"
		removeCaches(ctx, res.Hosts, hostTimeout, sandboxapi.EvictionRemoveDependencyCache, wire.ActivityRemoveDependencyCaches)
	}
	phase = "removing repo caches"
	removeCaches(ctx, res.Hosts, hostTimeout, sandboxapi.EvictionRemoveRepoCache, wire.ActivityRemoveRepoCaches)
	phase = "finished"
	return finishEviction(ctx, &res), nil
}

// evictionHosts lists the hosts to plan for (the EvictionHosts activity):
// every host the store knows, narrowed to only (and completed with) the
// hosts of only when it is not empty; sorted, each once. Errors: the
// activity's.
func evictionHosts(ctx workflow.Context, only []string) ([]string, error) {
	local := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var hosts wire.EvictionHostsResult
	if err := workflow.ExecuteActivity(local, wire.ActivityEvictionHosts).Get(ctx, &hosts); err != nil {
		return nil, err
	}
	return selectHosts(hosts.Hosts, only), nil
}

// selectHosts returns a copy of known narrowed to only (and completed
// with its hosts the store does not know) when only is not empty, sorted,
// each once.
func selectHosts(known, only []string) []string {
	ids := slices.Clone(known)
	if len(only) > 0 {
		ids = slices.DeleteFunc(ids, func(h string) bool { return !slices.Contains(only, h) })
		for _, h := range only {
			if !slices.Contains(ids, h) {
				ids = append(ids, h)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// planHosts runs the planning activity of every host in ids on that host's
// queue, all at once, and returns one result per host in ids' order: its
// plan, or its error (Unreachable when no worker picked the activity up
// within hostTimeout).
func planHosts(ctx workflow.Context, ids []string, actions []sandboxapi.EvictionActionKind, hostTimeout time.Duration) []sandboxapi.HostEvictionResult {
	futures := make([]workflow.Future, len(ids))
	for i, h := range ids {
		hctx := hostActivity(ctx, h, hostTimeout, 30*time.Minute)
		futures[i] = workflow.ExecuteActivity(hctx, wire.ActivityPlanEviction, wire.PlanEvictionInput{HostID: h, Actions: actions})
	}
	out := []sandboxapi.HostEvictionResult{}
	for i, h := range ids {
		hr := sandboxapi.HostEvictionResult{HostID: h}
		var plan sandboxapi.PlanEvictionResult
		if err := futures[i].Get(ctx, &plan); err != nil {
			hr.Unreachable = notPickedUp(err)
			hr.Error = appError(err).Error()
		} else {
			hr.Plan = &plan
		}
		out = append(out, hr)
	}
	return out
}

// resultSlot is where an eviction request's result lives: hosts[host].Results[idx].
type resultSlot struct{ host, idx int }

// sessionEvictions turns the hosts' planned runtime and workspace actions
// into evict requests for their sessions (ReplyTo replyTo), appending a
// pending result for each to its host's results; where maps each request
// id to that result. Repo cache and orphan runtime actions are left to the
// hosts.
func sessionEvictions(hosts []sandboxapi.HostEvictionResult, replyTo string) ([]wire.SessionRequest, map[string]resultSlot) {
	var reqs []wire.SessionRequest
	where := map[string]resultSlot{}
	for hi := range hosts {
		hr := &hosts[hi]
		if hr.Plan == nil {
			continue
		}
		for _, a := range hr.Plan.Plan.Actions {
			switch a.Kind {
			case sandboxapi.EvictionRemoveRepoCache, sandboxapi.EvictionDeleteOrphanRuntime, sandboxapi.EvictionRemoveDependencyCache:
				continue // carried out by the host (steps 4 and 5)
			}
			rid := fmt.Sprintf("%s/%d/%s/%s", hr.HostID, len(reqs), a.Kind, a.ID)
			where[rid] = resultSlot{hi, len(hr.Results)}
			hr.Results = append(hr.Results, sandboxapi.EvictResult{RequestID: rid, Action: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID, Outcome: sandboxapi.OutcomePending})
			reqs = append(reqs, wire.SessionRequest{WorkspaceID: a.WorkspaceID, Request: sandboxapi.EvictRequest{
				RequestID: rid, ReplyTo: replyTo, Action: a.Kind, Tier: a.Tier,
				AllowUnsaved: a.SaveWork, MinIdle: a.MinIdle,
			}})
		}
	}
	return reqs, where
}

// signalEvictions sends reqs to their sessions (the SignalEvictions
// activity, signal-with-start on taskQueue), marks the requests that were
// not delivered failed (taking them out of where) and returns how many
// replies remain to wait for.
func signalEvictions(ctx workflow.Context, hosts []sandboxapi.HostEvictionResult, reqs []wire.SessionRequest, where map[string]resultSlot, taskQueue string) int {
	var sent wire.SignalEvictionsResult
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	if err := workflow.ExecuteActivity(sctx, wire.ActivitySignalEvictions, wire.SignalEvictionsInput{TaskQueue: taskQueue, Requests: reqs}).Get(ctx, &sent); err != nil {
		sent.Failed = map[string]string{}
		for _, r := range reqs {
			sent.Failed[r.Request.RequestID] = appError(err).Error()
		}
	}
	waiting := len(reqs)
	for rid, why := range sortedMap(sent.Failed) {
		if sl, ok := where[rid]; ok {
			r := &hosts[sl.host].Results[sl.idx]
			r.Outcome, r.Reason, r.At = sandboxapi.OutcomeFailed, "signal not delivered: "+why, workflow.Now(ctx)
			delete(where, rid)
			waiting--
		}
	}
	return waiting
}

// awaitEvictionReplies takes the sessions' eviction_reply signals until
// waiting replies have come or deadline passes, storing each reply of a
// request in where as its result (and taking it out of where). A reply
// that is malformed or answers no request of this run is ignored; a
// request without a reply stays pending.
func awaitEvictionReplies(ctx workflow.Context, hosts []sandboxapi.HostEvictionResult, where map[string]resultSlot, waiting int, deadline time.Time) {
	replies := workflow.GetSignalChannel(ctx, sandboxapi.SignalEvictionReply)
	for waiting > 0 {
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			break
		}
		// ReceiveWithTimeout would panic on a reply the data converter
		// refuses (it drops it, then finds the channel empty), failing
		// every workflow task of the run: wait, then take it without
		// blocking, and decode it strictly (decoding.go).
		if got, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return replies.Len() > 0 }); err != nil || !got {
			break
		}
		var raw converter.RawValue
		if !replies.ReceiveAsync(&raw) {
			continue // refused by the data converter (the SDK logs it)
		}
		reply, corrupt, err := decodeStrictly[sandboxapi.EvictResult](ctx, sandboxapi.SignalEvictionReply, raw)
		if err != nil || corrupt {
			workflow.GetLogger(ctx).Warn("malformed eviction reply ignored", "error", err)
			continue
		}
		sl, known := where[reply.RequestID]
		if !known {
			continue
		}
		delete(where, reply.RequestID)
		waiting--
		hosts[sl.host].Results[sl.idx] = reply
	}
}

// removeCaches runs each host's planned removals of kind (the activity
// named activity on its queue, host after host: each removes in order while
// its usage stays above the plan's low water mark) and appends their
// results, or one failed result per action, to the host's.
func removeCaches(ctx workflow.Context, hosts []sandboxapi.HostEvictionResult, hostTimeout time.Duration, kind sandboxapi.EvictionActionKind, activity string) {
	for hi := range hosts {
		hr := &hosts[hi]
		caches := plannedActions(hr, kind)
		if len(caches) == 0 {
			continue
		}
		hctx := hostActivity(ctx, hr.HostID, hostTimeout, time.Hour)
		var out wire.RemoveRepoCachesResult
		err := workflow.ExecuteActivity(hctx, activity, wire.RemoveRepoCachesInput{HostID: hr.HostID, Actions: caches, LowBytes: hr.Plan.Plan.LowBytes}).Get(ctx, &out)
		if err != nil {
			for _, a := range caches {
				hr.Results = append(hr.Results, sandboxapi.EvictResult{Action: a.Kind, Tier: a.Tier, ID: a.ID, Outcome: sandboxapi.OutcomeFailed, Reason: appError(err).Error(), At: workflow.Now(ctx)})
			}
			continue
		}
		hr.Results = append(hr.Results, out.Results...)
	}
}

// plannedActions returns the actions of kind in hr's plan (none when the
// host has no plan), in plan order.
func plannedActions(hr *sandboxapi.HostEvictionResult, kind sandboxapi.EvictionActionKind) []sandboxapi.EvictionAction {
	if hr.Plan == nil {
		return nil
	}
	var out []sandboxapi.EvictionAction
	for _, a := range hr.Plan.Plan.Actions {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// hostActivity returns ctx with the options of an activity on host's task
// queue: picked up within hostTimeout, running at most startToClose,
// heartbeating every minute, tried twice.
func hostActivity(ctx workflow.Context, host string, hostTimeout, startToClose time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              wire.HostTaskQueue(host),
		ScheduleToStartTimeout: hostTimeout,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	})
}

// notPickedUp reports whether err is an activity's schedule-to-start
// timeout: no worker of its host's queue picked it up (the host is
// unreachable).
func notPickedUp(err error) bool {
	var to *temporal.TimeoutError
	return errors.As(err, &to) && to.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// changeEvictionFailuresAttr: a finished eviction run sets SandboxEvictionFailures.
const changeEvictionFailuresAttr = "eviction-failures-attribute"

// changeEvictionOrphans: the run deletes the orphan runtimes the hosts
// planned (workflow.GetVersion; docs/DESIGN.md "Temporal shape").
const changeEvictionOrphans = "eviction-orphan-runtimes"

// changeEvictionDependencyCaches: the run removes the dependency caches
// the hosts planned, before the repo caches (workflow.GetVersion).
const changeEvictionDependencyCaches = "eviction-dependency-caches"

// deleteOrphans runs each host's orphan runtime deletions (in parallel) and
// appends their results to the host's.
func deleteOrphans(ctx workflow.Context, hosts []sandboxapi.HostEvictionResult, hostTimeout time.Duration) {
	type call struct {
		host    int
		actions []sandboxapi.EvictionAction
		f       workflow.Future
	}
	var calls []call
	for hi := range hosts {
		hr := &hosts[hi]
		orphans := plannedActions(hr, sandboxapi.EvictionDeleteOrphanRuntime)
		if len(orphans) == 0 {
			continue
		}
		hctx := hostActivity(ctx, hr.HostID, hostTimeout, 30*time.Minute)
		calls = append(calls, call{hi, orphans, workflow.ExecuteActivity(hctx, wire.ActivityDeleteOrphanRuntimes, wire.DeleteOrphanRuntimesInput{HostID: hr.HostID, Actions: orphans})})
	}
	for _, c := range calls {
		hr := &hosts[c.host]
		var out wire.DeleteOrphanRuntimesResult
		if err := c.f.Get(ctx, &out); err != nil {
			for _, a := range c.actions {
				hr.Results = append(hr.Results, sandboxapi.EvictResult{Action: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID,
					Outcome: sandboxapi.OutcomeFailed, Reason: appError(err).Error(), At: workflow.Now(ctx)})
			}
			continue
		}
		hr.Results = append(hr.Results, out.Results...)
	}
}

// finishEviction summarizes the run and publishes the summary as the memo
// and its failures as the SandboxEvictionFailures search attribute (failed
// and blocked actions, unreachable and failed hosts: docs/OPERATIONS.md).
func finishEviction(ctx workflow.Context, res *sandboxapi.EvictionRunResult) sandboxapi.EvictionRunResult {
	res.FinishedAt = workflow.Now(ctx)
	res.Summarize()
	if err := workflow.UpsertMemo(ctx, map[string]any{sandboxapi.MemoEviction: res.Summary}); err != nil {
		workflow.GetLogger(ctx).Warn("eviction memo", "error", err)
	}
	if workflow.GetVersion(ctx, changeEvictionFailuresAttr, workflow.DefaultVersion, 1) == 1 {
		failures := int64(res.Summary.Failed + res.Summary.Blocked + res.Summary.Unreachable)
		for _, h := range res.Hosts {
			if h.Error != "" && !h.Unreachable {
				failures++
			}
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyInt64(sandboxapi.SearchAttrEvictionFailures).ValueSet(failures))
	}
	return *res
}

// sortedMap iterates a map in key order (deterministic workflow code).
func sortedMap(m map[string]string) func(yield func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
