package metrics

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Interceptor returns the worker interceptor that measures every activity
// the worker runs, local activities included (set it in
// worker.Options.Interceptors of every worker of the host). Per activity:
// sandbox_operation_duration_seconds{operation=<activity type>} and, on
// failure, sandbox_operation_errors_total{error_type}; then what the
// result says (observe).
func (m *Metrics) Interceptor() interceptor.WorkerInterceptor {
	return &workerInterceptor{m: m}
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	m *Metrics
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityInterceptor{m: w.m}
	i.Next = next
	return i
}

type activityInterceptor struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

func (i *activityInterceptor) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	out, err := i.Next.ExecuteActivity(ctx, in)
	name := activity.GetInfo(ctx).ActivityType.Name
	var arg any
	if len(in.Args) > 0 {
		arg = in.Args[0]
	}
	i.m.ObserveActivity(name, arg, out, err, time.Since(start))
	return out, err
}

// ObserveActivity records one finished activity: its duration and error
// type, and what its argument and result say (exec outcomes, eviction plans
// and actions, orphan runtime deletions, runtime starts and stops). The
// interceptor calls it; it is exported for callers that run activity
// functions themselves.
func (m *Metrics) ObserveActivity(name string, arg, out any, err error, took time.Duration) {
	kind := m.opts.RuntimeKind
	m.opDuration.WithLabelValues(name, kind).Observe(took.Seconds())
	if err != nil {
		m.opErrors.WithLabelValues(name, kind, ErrorType(err)).Inc()
	}
	if rv, ok := out.(converter.RawValue); ok && err == nil {
		// The exec activities return their result as a payload
		// (wire.ExecPayload): what it says, without its output.
		switch name {
		case wire.ActivityExec:
			out, _, err = wire.DecodeExec(rv)
		case wire.ActivityExecStart:
			out, _, err = wire.DecodeExecStart(rv)
		}
	}
	switch name {
	case wire.ActivityExec:
		m.observeExec(arg, out, err)
	case wire.ActivityExecStart:
		// The fast path of an exec: a command that ended within its wait
		// (or failed to start) counts here; one still running is counted by
		// the ActivityExec that waits for it.
		if r, ok := out.(wire.ExecStartResult); err != nil {
			m.observeExec(arg, nil, err)
		} else if ok && r.Done {
			m.observeExec(arg, r.Result, nil)
		}
	case wire.ActivityHibernate:
		if r, ok := out.(sandboxapi.HibernateResult); ok && err == nil && r.Stopped {
			m.runtimeStopped(workspaceOf(arg), "hibernate")
		}
	case wire.ActivityDestroyRuntime:
		if err == nil {
			m.runtimeStopped(workspaceOf(arg), "destroy")
		}
	case wire.ActivityPlanEviction:
		if r, ok := out.(sandboxapi.PlanEvictionResult); ok && err == nil {
			m.observePlan(r)
		}
	case wire.ActivityEvictWorkspace, wire.ActivityEvictRuntime:
		in, _ := arg.(wire.EvictActivityInput)
		r, ok := out.(sandboxapi.EvictResult)
		if err != nil || !ok {
			m.evictionActions.WithLabelValues(string(in.Request.Action), string(in.Request.Tier), sandboxapi.OutcomeFailed).Inc()
			return
		}
		m.observeEvict(r, in.Request)
		if r.Outcome == sandboxapi.OutcomeDone {
			m.runtimeStopped(in.WorkspaceID, "evict")
		}
	case wire.ActivityDestroy:
		if r, ok := out.(sandboxapi.DestroyResult); ok && err == nil && r.Existed {
			m.runtimeStopped(workspaceOf(arg), "destroy")
		}
	case wire.ActivityDeleteOrphanRuntimes:
		in, _ := arg.(wire.DeleteOrphanRuntimesInput)
		r, ok := out.(wire.DeleteOrphanRuntimesResult)
		m.observeEvictBatch(in.Actions, r.Results, err == nil && ok)
	case wire.ActivityRemoveRepoCaches, wire.ActivityRemoveDependencyCaches:
		in, _ := arg.(wire.RemoveRepoCachesInput)
		r, ok := out.(wire.RemoveRepoCachesResult)
		m.observeEvictBatch(in.Actions, r.Results, err == nil && ok)
	}
}

func (m *Metrics) observeExec(arg, out any, err error) {
	kind := m.opts.RuntimeKind
	outcome := ExecError
	r, ok := out.(sandboxapi.ExecResult)
	if w, isWire := out.(wire.ExecActivityResult); isWire {
		r, ok = w.ExecResult, true
	}
	switch {
	case err != nil && isCanceled(err):
		outcome = ExecCancelled
	case err != nil || !ok:
	case r.TimedOut:
		outcome = ExecTimedOut
	case r.ExitCode == 0:
		outcome = ExecOK
	default:
		outcome = ExecNonZero
	}
	m.execResults.WithLabelValues(outcome, kind).Inc()
	if outcome == ExecError || outcome == ExecCancelled {
		return
	}
	// The command ran: its runtime is running now.
	if ws := workspaceOf(arg); ws != "" {
		m.mu.Lock()
		started := !m.running[ws]
		m.running[ws] = true
		m.mu.Unlock()
		if started {
			m.runtimeStarts.WithLabelValues(kind).Inc()
		}
	}
}

// runtimeStopped counts the stop of a runtime this worker saw running.
func (m *Metrics) runtimeStopped(ws, reason string) {
	if ws == "" {
		return
	}
	m.mu.Lock()
	was := m.running[ws]
	delete(m.running, ws)
	m.mu.Unlock()
	if was {
		m.runtimeStops.WithLabelValues(m.opts.RuntimeKind, reason).Inc()
	}
}

func (m *Metrics) observePlan(r sandboxapi.PlanEvictionResult) {
	p := r.Plan
	m.evictionPlans.WithLabelValues(p.Pressure).Inc()
	m.diskUsed.Set(float64(p.Usage.UsedBytes))
	m.diskBudget.Set(float64(p.Usage.BudgetBytes))
	m.diskWater.WithLabelValues("high").Set(float64(p.HighBytes))
	m.diskWater.WithLabelValues("low").Set(float64(p.LowBytes))
	m.diskWater.WithLabelValues("severe").Set(float64(p.SevereBytes))
	m.repoCacheBytes.Set(float64(p.Usage.RepoCacheBytes))
	m.workspaceBytes.Set(float64(p.Usage.WorkspaceBytes))
	at := p.Now
	if at.IsZero() {
		at = time.Now()
	}
	m.diskMeasuredAt.Set(float64(at.UnixNano()) / 1e9)
}

// observeEvictBatch counts the results of a host-level batch of eviction
// actions (orphan runtimes, repo caches); when the activity failed (ok
// false) every planned action counts as failed.
func (m *Metrics) observeEvictBatch(planned []sandboxapi.EvictionAction, results []sandboxapi.EvictResult, ok bool) {
	if !ok {
		for _, a := range planned {
			m.evictionActions.WithLabelValues(string(a.Kind), string(a.Tier), sandboxapi.OutcomeFailed).Inc()
		}
		return
	}
	for _, res := range results {
		m.observeEvict(res, sandboxapi.EvictRequest{Action: res.Action, Tier: res.Tier})
	}
}

func (m *Metrics) observeEvict(r sandboxapi.EvictResult, req sandboxapi.EvictRequest) {
	action, tier := r.Action, r.Tier
	if action == "" {
		action = req.Action
	}
	if tier == "" {
		tier = req.Tier
	}
	if !known(sandboxapi.EvictionTiers, tier) {
		tier = ""
	}
	outcome := r.Outcome
	switch outcome {
	case sandboxapi.OutcomeDone, sandboxapi.OutcomeSkipped, sandboxapi.OutcomeBlocked, sandboxapi.OutcomeFailed:
	default:
		outcome = sandboxapi.OutcomeFailed
	}
	m.evictionActions.WithLabelValues(string(action), string(tier), outcome).Inc()
}

// ObserveTransfer records one repo cache clone or fetch (the repo cache's
// transfer hook: repocache.Options.OnTransfer). bytes is the repository's
// growth on disk.
func (m *Metrics) ObserveTransfer(op string, took time.Duration, bytes int64, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.transfer.WithLabelValues(op, outcome).Observe(took.Seconds())
	if err == nil && bytes > 0 {
		m.transferBytes.WithLabelValues(op).Add(float64(bytes))
	}
}

// ErrorType is the label of an error: its stable sandbox error type
// (docs/API.md "Errors") when it is a known one, "canceled" or "timeout"
// for context and Temporal cancellations and timeouts, else "other".
func ErrorType(err error) string {
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app):
		if sandboxapi.KindByType(app.Type()) != nil {
			return app.Type()
		}
		return "other"
	case isCanceled(err):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timeout"
	}
	if k := sandboxapi.KindOf(err); k != nil {
		return k.Type
	}
	return "other"
}

func isCanceled(err error) bool {
	var ce *temporal.CanceledError
	return errors.Is(err, context.Canceled) || errors.As(err, &ce)
}

// workspaceOf returns the workspace id of the activity inputs that name one.
func workspaceOf(arg any) string {
	switch in := arg.(type) {
	case wire.ExecActivityInput:
		return in.WorkspaceID
	case wire.WorkspaceActivityInput:
		return in.WorkspaceID
	case wire.EvictActivityInput:
		return in.WorkspaceID
	case wire.DestroyActivityInput:
		return in.WorkspaceID
	}
	return ""
}

func known[T comparable](set []T, v T) bool {
	for _, x := range set {
		if x == v {
			return true
		}
	}
	return false
}
