package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Limits of one ProcessStreamWorkflow run.
const (
	// streamRunBytes: a run that served this many bytes continues as new
	// (each byte read is in its history twice: the read activity's result
	// and the update's).
	streamRunBytes = 4 << 20
	// streamIdle: a run with no read for this long completes (the next read
	// starts a new one by update-with-start).
	streamIdle = 10 * time.Minute
	// streamUsedEvery: how often the stream tells the session which
	// processes it read (SignalProcessUsed), at most.
	streamUsedEvery = 5 * time.Minute
)

// stream is the state of one ProcessStreamWorkflow run.
type stream struct {
	wsID     string
	inputErr error
	host     string
	hostWait time.Duration
	locating bool
	inFlight int
	seq      int64
	served   int64
	used     map[string]bool
	usedAt   time.Time
}

// ProcessStreamWorkflow reads a workspace's process output beside its
// session (docs/API.md "Streaming exec output"): its one update,
// process_read, takes the session's argument and returns its result, but
// never waits for the session's lock and never grows the session's history
// with the bytes read; a run continues as new every few MiB served and
// completes after 10 minutes without a read. Start it with update-with-start
// (workflow id sandboxapi.StreamWorkflowID, the shared task queue, conflict
// policy USE_EXISTING). Reads count as use of their process for the
// session's idle rules (a process_used signal at most every 5 minutes).
func ProcessStreamWorkflow(ctx workflow.Context, raw converter.RawValue) error {
	in, err := decodeRecorded[sandboxapi.StreamInput](ctx, sandboxapi.ProcessStreamWorkflowType, raw)
	if err == nil {
		err = sandboxapi.ValidateWorkspaceID(in.WorkspaceID)
	}
	if err == nil {
		// Only the workspace's own stream workflow reads its processes.
		err = checkBinding(ctx, in.WorkspaceID, sandboxapi.StreamWorkflowID, "stream workflow")
	}
	st := &stream{wsID: in.WorkspaceID, inputErr: err, used: map[string]bool{}, usedAt: workflow.Now(ctx)}
	validator := func(raw converter.RawValue) error {
		if st.inputErr != nil {
			return appError(st.inputErr)
		}
		in, err := wire.Decode[sandboxapi.ProcessReadInput](sandboxapi.UpdateProcessRead, raw)
		if err != nil {
			return appError(err)
		}
		if err := validateProcessRead(nil, in); err != nil {
			return appError(err)
		}
		return nil
	}
	handler := func(ctx workflow.Context, raw converter.RawValue) (sandboxapi.ProcessReadResult, error) {
		in, err := wire.DecodeAccepted[sandboxapi.ProcessReadInput](sandboxapi.UpdateProcessRead, raw)
		if err != nil {
			return sandboxapi.ProcessReadResult{}, appError(err)
		}
		return st.read(ctx, in)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, sandboxapi.UpdateProcessRead, handler, workflow.UpdateHandlerOptions{Validator: validator}); err != nil {
		return err
	}
	if st.inputErr != nil {
		_, _ = workflow.AwaitWithTimeout(ctx, time.Second, func() bool { return false })
		return appError(st.inputErr)
	}
	for {
		seq := st.seq
		shed := func() bool {
			return st.inFlight == 0 && (st.served >= streamRunBytes || workflow.GetInfo(ctx).GetContinueAsNewSuggested())
		}
		ok, err := workflow.AwaitWithTimeout(ctx, streamIdle, func() bool { return st.seq != seq || shed() })
		if err != nil {
			return err
		}
		quiet := !ok && st.inFlight == 0
		if !shed() && !quiet {
			continue
		}
		st.signalUsed(ctx, true)
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && st.inFlight == 0 }); err != nil {
			return err
		}
		if quiet && st.seq != seq {
			continue // a read came meanwhile
		}
		if quiet {
			return nil
		}
		return workflow.NewContinueAsNewError(ctx, sandboxapi.ProcessStreamWorkflowType, sandboxapi.StreamInput{WorkspaceID: st.wsID})
	}
}

// read serves one process_read on the workspace's host.
func (st *stream) read(ctx workflow.Context, in sandboxapi.ProcessReadInput) (sandboxapi.ProcessReadResult, error) {
	st.inFlight++
	st.seq++
	defer func() {
		st.inFlight--
		st.seq++
	}()
	if err := st.locate(ctx); err != nil {
		return sandboxapi.ProcessReadResult{}, err
	}
	wait := time.Duration(in.WaitMS) * time.Millisecond
	opts := workflow.ActivityOptions{
		TaskQueue:              wire.HostTaskQueue(st.host),
		ScheduleToStartTimeout: hostWait(st.hostWait),
		StartToCloseTimeout:    wait + time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	}
	var out sandboxapi.ProcessReadResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), wire.ActivityProcessRead,
		wire.ProcessReadActivityInput{WorkspaceID: st.wsID, Request: in, Wait: wait}).Get(ctx, &out)
	if err != nil {
		return out, appError(err)
	}
	st.served += int64(len(out.Data))
	if out.Stderr != nil {
		st.served += int64(len(out.Stderr.Data))
	}
	st.used[in.ProcessID] = true
	st.signalUsed(ctx, false)
	return out, nil
}

// locate finds the workspace's host once per run.
func (st *stream) locate(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return !st.locating }); err != nil {
		return err
	}
	if st.host != "" {
		return nil
	}
	st.locating = true
	defer func() { st.locating = false }()
	var loc wire.LocateResult
	opts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: st.wsID}).Get(ctx, &loc); err != nil {
		return appError(err)
	}
	if !loc.Exists || loc.HostID == "" {
		return appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s does not exist", st.wsID))
	}
	st.host, st.hostWait = loc.HostID, loc.HostWait
	return nil
}

// signalUsed tells the session which processes were read, at most every
// streamUsedEvery (now: whatever is pending). Failures are ignored: a
// session that is not running has no idle timer to keep.
func (st *stream) signalUsed(ctx workflow.Context, now bool) {
	if len(st.used) == 0 || (!now && workflow.Now(ctx).Sub(st.usedAt) < streamUsedEvery) {
		return
	}
	ids := make([]string, 0, len(st.used))
	for id := range st.used {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	st.used, st.usedAt = map[string]bool{}, workflow.Now(ctx)
	wfID, _ := sandboxapi.SessionWorkflowID(st.wsID)
	if err := workflow.SignalExternalWorkflow(ctx, wfID, "", sandboxapi.SignalProcessUsed, sandboxapi.ProcessUsedSignal{ProcessIDs: ids}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Debug("process_used not delivered", "error", err)
	}
}
