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

// Exec on processes, cancel, and the process updates (docs/API.md
// "Processes", "Cancelling a command", "Idle rules for processes").
//
// An exec's command runs as a process of the runtime named by
// sandboxapi.ExecProcessID(workspace, update id). The fast path starts it
// and waits execFastWait for it in one activity — a local activity when
// the run is on its host's queue, so a short command costs one workflow
// task; a command still running then is waited for by the exec activity
// (wire.ActivityExec with the process id), which heartbeats and is retried
// after a worker dies: the retry re-attaches to the same process, and no
// attempt ever starts the command again. On a runtime without processes
// (the settings say so: remote runtimes) and for kept output, the exec
// activity runs the command itself. The exec activity keeps one name for
// both (sandboxapi.ExecActivityType): a streaming client finds a running
// command's progress in the pending activity of that type, whichever way
// it runs (docs/API.md "Streaming exec output": the older protocol).

const (
	// changeExecProcess: exec runs its command as a process of the runtime
	// (ExecStart, then the waiting exec activity) instead of one exec
	// activity; cancel, hibernate and release cancel it.
	changeExecProcess = "session-exec-process"
	// changeBesideSetup: an exec with beside_setup runs while the setup
	// run holds the session's lock (docs/RUNTIMES.md "Setup").
	changeBesideSetup = "exec-beside-setup"
	// changeKnownNoProcesses: on a runtime the settings say runs no
	// processes, the exec activity runs the command at once, without first
	// asking ActivityExecStart (which would answer Unsupported).
	changeKnownNoProcesses = "exec-known-no-processes"
	// changeExecRawResult: the exec activities return the command's result
	// ready for the client (wire.ExecActivityInput.RawResult) and the
	// update returns it without decoding it (passThrough).
	changeExecRawResult = "exec-raw-result"
	// execFastWait bounds the fast path's wait: a command that ends within
	// it is answered in the same workflow task. Short, because the workflow
	// task (and so a cancel sent meanwhile) waits for it.
	execFastWait = 500 * time.Millisecond
	// execWaitHeartbeat is the waiting exec activity's heartbeat timeout:
	// how soon a retry re-attaches after its worker died.
	execWaitHeartbeat = 10 * time.Second
	// cancelKillWait bounds how long a cancel waits for the killed tree to
	// be gone; cancelGrace how long it then waits for the exec to return
	// before abandoning its wait (never unbounded).
	cancelKillWait = time.Second
	cancelGrace    = 5 * time.Second
	// recentExecs is how many finished exec update ids a run remembers
	// (cancel answers "finished" for them).
	recentExecs = 32
)

// Why a command was cancelled (execRun.cancel).
const (
	cancelByUpdate    = "cancel"
	cancelByHibernate = "hibernate"
	cancelByRelease   = "release"
)

// execRun is one exec update of this run, from its arrival to its return.
type execRun struct {
	updateID  string
	processID string // "" when the runtime runs no processes
	started   bool   // its command's process may exist
	done      bool
	cancelled bool   // it returned cancelled
	cancel    string // why it is being cancelled ("": it is not)
	abort     workflow.CancelFunc
}

// procTracking is the session's knowledge of the background processes it
// started: live as far as it knows, with when each was last used.
type procTracking struct {
	live    map[string]time.Time
	checkAt time.Time // no liveness check (process_list) before this
}

func (s *session) maxIdle() time.Duration {
	if s.settings.ProcessMaxIdle > 0 {
		return s.settings.ProcessMaxIdle
	}
	return sandboxapi.DefaultProcessMaxIdle
}

// procDeadline is when the live background processes stop keeping the
// runtime up: the latest last use plus SANDBOX_PROCESS_MAX_IDLE (zero when
// none is known to be live).
func (s *session) procDeadline() time.Time {
	var last time.Time
	for _, t := range s.procs.live {
		if t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return last
	}
	return last.Add(s.maxIdle())
}

// usedProcess records that process id was started, read or written now.
func (s *session) usedProcess(ctx workflow.Context, id string, info sandboxapi.ProcessInfo) {
	if id == "" {
		return
	}
	if info.Exited && !info.Lingering {
		delete(s.procs.live, id)
		return
	}
	if s.procs.live == nil {
		s.procs.live = map[string]time.Time{}
	}
	s.procs.live[id] = workflow.Now(ctx)
}

// processesStopped forgets the live processes: the runtime was stopped.
func (s *session) processesStopped() { s.procs = procTracking{} }

// carriedProcesses returns the live processes for continue-as-new.
func (s *session) carriedProcesses() []wire.ProcessTrack {
	var out []wire.ProcessTrack
	for id, t := range s.procs.live {
		out = append(out, wire.ProcessTrack{ID: id, LastUse: t})
	}
	slices.SortFunc(out, func(a, b wire.ProcessTrack) int {
		if c := a.LastUse.Compare(b.LastUse); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// refreshProcesses asks the runtime which of the tracked processes still
// run (one process_list activity), at most once per IdleStop.
func (s *session) refreshProcesses(ctx workflow.Context) {
	s.procs.checkAt = workflow.Now(ctx).Add(s.settings.IdleStop)
	var out sandboxapi.ProcessListResult
	if err := s.callQuick(ctx, wire.ActivityProcessList, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}, &out); err != nil {
		workflow.GetLogger(ctx).Warn("process liveness check failed", "error", err)
		return
	}
	listed := map[string]sandboxapi.ProcessInfo{}
	for _, p := range out.Processes {
		listed[p.ID] = p
	}
	for id := range s.procs.live {
		if p, ok := listed[id]; !ok || (p.Exited && !p.Lingering) {
			delete(s.procs.live, id)
		}
	}
}

// idleDeadlines returns when the runtime is hibernated and the session
// closed if nothing happens, with live background processes deferring
// both to procDeadline; check is set when a liveness check is due now.
func (s *session) idleDeadlines(now time.Time) (stopAt, closeAt time.Time, check bool) {
	stopAt = s.lastActivity.Add(s.settings.IdleStop)
	closeAt = s.lastActivity.Add(s.settings.IdleClose)
	pd := s.procDeadline()
	if pd.IsZero() || !pd.After(stopAt) {
		return stopAt, closeAt, false
	}
	checkAt := stopAt
	if s.procs.checkAt.After(checkAt) {
		checkAt = s.procs.checkAt
	}
	if s.runtimeRunning && !now.Before(checkAt) && now.Before(pd) {
		return stopAt, closeAt, true
	}
	if pd.After(closeAt) {
		closeAt = pd
	}
	if checkAt.Before(pd) && checkAt.After(now) {
		// Wake for the next liveness check before the deadline.
		return checkAt, closeAt, false
	}
	return pd, closeAt, false
}

// --- exec ------------------------------------------------------------------

// exec runs one command (docs/API.md "exec"); see the file comment.
func (s *session) exec(ctx workflow.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	retired(ctx, changeExecProcess)
	id := ""
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		id = u.ID
	}
	e := s.trackExec(id)
	defer s.untrackExec(e)
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	if s.besideSetup(ctx, req) {
		// The setup holds the lock: this command runs next to it, holding
		// none, as an immediate operation (docs/RUNTIMES.md "Setup").
		s.control(ctx)
		defer s.controlEnd(ctx)
	} else {
		ok, err := s.beginUnless(ctx, true, func() bool { return e.cancel != "" })
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		if !ok {
			e.cancelled = true
			return cancelledResult(), nil
		}
		defer s.end(ctx, true)
	}
	s.runtimeRunning = true
	if s.state != sandboxapi.StateActive {
		s.setState(ctx, sandboxapi.StateActive)
	}
	retired(ctx, changeExecRawResult)
	in := wire.ExecActivityInput{WorkspaceID: s.wsID, Request: req, UpdateID: id, ProcessID: e.processID, Wait: execFastWait,
		RawResult: true}
	e.started = true
	var st wire.ExecStartResult
	if req.KeepOutput {
		// Kept output (docs/API.md "Kept output") is written by the exec
		// activity as the command runs: it runs the command itself, as on
		// a runtime without processes.
		st.Unsupported = true
	} else if s.knownNoProcesses(ctx) {
		st.Unsupported = true
	} else {
		var rv converter.RawValue
		if err := s.execStart(ctx, in, &rv); err != nil {
			return sandboxapi.ExecResult{}, err
		}
		var raw bool
		var err error
		if st, raw, err = wire.DecodeExecStart(rv); err != nil {
			return sandboxapi.ExecResult{}, resultError(err)
		}
		if raw && st.Done {
			s.passThrough(id, rv)
		}
	}
	if st.Done {
		e.cancelled = st.Result.Cancelled
		return st.Result, nil
	}
	return s.awaitExec(ctx, e, in, req, st.Unsupported)
}

// knownNoProcesses reports whether the settings say the runtime runs no
// processes (remote runtimes), so the exec activity runs the command
// without a start first (replay-safe behind changeKnownNoProcesses: only
// settings with RuntimeProcesses, which no recorded run before it has,
// ask).
func (s *session) knownNoProcesses(ctx workflow.Context) bool {
	if p := s.settings.RuntimeProcesses; p == nil || *p {
		return false
	}
	return workflow.GetVersion(ctx, changeKnownNoProcesses, workflow.DefaultVersion, 1) == 1
}

// besideSetup reports whether the exec of req runs beside the setup
// command now running under the session's lock, not cancelled
// (req.BesideSetup; replay-safe behind changeBesideSetup: only a request
// with the new field asks).
func (s *session) besideSetup(ctx workflow.Context, req sandboxapi.ExecRequest) bool {
	if !req.BesideSetup || s.setupExec == nil || s.setupExec.cancel != "" || s.holder.op != "setup" {
		return false
	}
	return workflow.GetVersion(ctx, changeBesideSetup, workflow.DefaultVersion, 1) == 1
}

// trackExec records the exec of update id as running (s.execs), so that a
// cancel naming it finds it.
func (s *session) trackExec(id string) *execRun {
	e := &execRun{updateID: id, processID: sandboxapi.ExecProcessID(s.wsID, id)}
	if s.execs == nil {
		s.execs = map[string]*execRun{}
	}
	s.execs[id] = e
	return e
}

// untrackExec records e as ended: it leaves s.execs and joins s.recent,
// the last recentExecs ended execs (a late cancel of one is told so).
func (s *session) untrackExec(e *execRun) {
	e.done = true
	delete(s.execs, e.updateID)
	s.recent = append(s.recent, e.updateID)
	if len(s.recent) > recentExecs {
		s.recent = s.recent[1:]
	}
}

// execWaitOptions are the exec activity's options: opts, and when it
// waits for the runtime process processID (not ""), a heartbeat timeout and
// a retry policy of its own: waiting never starts the command, so a retry
// after a worker died re-attaches to the same process.
func execWaitOptions(opts workflow.ActivityOptions, processID string) workflow.ActivityOptions {
	if processID != "" {
		opts.HeartbeatTimeout = execWaitHeartbeat
		opts.RetryPolicy = &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 5 * time.Second, MaximumAttempts: 10}
	}
	return opts
}

// awaitExec runs the exec activity for the started exec e (in: its input;
// unsupported: the runtime has no processes, so the activity runs the
// command itself) and returns the command's result: a cancelled result
// when e was cancelled meanwhile. The wait is cancellable through e.abort.
// Errors: the activity's, as s.result.
func (s *session) awaitExec(ctx workflow.Context, e *execRun, in wire.ExecActivityInput, req sandboxapi.ExecRequest, unsupported bool) (sandboxapi.ExecResult, error) {
	waitCtx, abort := workflow.WithCancel(ctx)
	e.abort = abort
	if unsupported {
		// No processes in this runtime: the exec activity runs the command
		// itself (a cancel cancels the activity, which kills it).
		e.processID = ""
		in.ProcessID, in.Wait = "", 0
		if e.cancel != "" {
			e.cancelled = true
			return cancelledResult(), nil
		}
	} else if e.cancel != "" {
		// Cancelled while the start ran (it was not a local activity).
		s.killExec(ctx, e)
	}
	opts := execWaitOptions(s.hostOptions(opExec, req.Timeout()), in.ProcessID)
	// The activity's result is the command's (wire.ExecActivityResult inlines
	// it: histories where it returned a bare ExecResult decode the same).
	var rv converter.RawValue
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(waitCtx, opts), wire.ActivityExec, in).Get(waitCtx, &rv)
	var res wire.ExecActivityResult
	raw := false
	if err == nil {
		if res, raw, err = wire.DecodeExec(rv); err != nil {
			err = resultError(err)
		}
	}
	if res.RuntimeReplica != nil {
		s.replica = res.RuntimeReplica
	}
	out := res.ExecResult
	if err != nil && e.cancel != "" {
		// Cancelled: the wait was abandoned (or the command's activity
		// cancelled) before it returned the command's output.
		s.lastError = ""
		e.cancelled = true
		return cancelledResult(), nil
	}
	if err := s.result(err); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	if e.cancel != "" && unsupported {
		if raw {
			// Its output, as the activity returned it, with the cancel.
			if err := converter.GetDefaultDataConverter().FromPayload(rv.Payload(), &out); err != nil {
				return sandboxapi.ExecResult{}, resultError(err)
			}
			raw = false
		}
		out.ExitCode, out.Cancelled = 130, true
	}
	if raw {
		s.passThrough(in.UpdateID, rv)
	}
	e.cancelled = out.Cancelled
	return out, nil
}

// passThrough makes rv, an exec activity's result ready for the client
// (wire.ExecPayload), the result of exec update id, in place of the
// ExecResult (without output) that exec returns to the session: the
// update's handler returns it (operation.register), so the command's output
// is never decoded in workflow code.
func (s *session) passThrough(id string, rv converter.RawValue) {
	if id == "" {
		return
	}
	if s.rawResults == nil {
		s.rawResults = map[string]converter.RawValue{}
	}
	s.rawResults[id] = rv
}

// takeRawResult returns (and forgets) the result passThrough set for update
// id.
func (s *session) takeRawResult(id string) (converter.RawValue, bool) {
	rv, ok := s.rawResults[id]
	delete(s.rawResults, id)
	return rv, ok
}

// resultError is the update's error for an exec activity's result that
// does not decode (taken as a RawValue: the payload codec, if any, has
// run already).
func resultError(err error) error {
	return appError(sandboxapi.Wrap(sandboxapi.ErrSandbox, err, "exec result: the activity's result does not decode"))
}

// execStart runs ActivityExecStart: a local activity on the host's queue,
// else an activity sent there; out receives its result (a
// *converter.RawValue: see wire.ExecStartPayload). Retries are safe: the process id makes the
// start happen once.
func (s *session) execStart(ctx workflow.Context, in wire.ExecActivityInput, out any) error {
	retry := &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3}
	if s.onHostQueue(ctx) {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
		return s.result(workflow.ExecuteLocalActivity(lctx, wire.ActivityExecStart, in).Get(ctx, out))
	}
	opts := s.hostOptions(opQuick, 0)
	opts.RetryPolicy = retry
	return s.call(ctx, opts, wire.ActivityExecStart, in, out)
}

// onHostQueue reports whether this run is on its workspace's host queue
// (quick operations are local activities there).
func (s *session) onHostQueue(ctx workflow.Context) bool {
	return s.ws != nil && workflow.GetInfo(ctx).TaskQueueName == wire.HostTaskQueue(s.ws.HostID)
}

func cancelledResult() sandboxapi.ExecResult {
	return sandboxapi.ExecResult{ExitCode: 130, Cancelled: true}
}

// killExec kills a running exec's process tree (ActivityExecCancel) and
// waits up to cancelKillWait for it to be gone.
func (s *session) killExec(ctx workflow.Context, e *execRun) {
	if e.processID == "" {
		if e.abort != nil {
			e.abort()
		}
		return
	}
	var out wire.ExecCancelResult
	in := wire.ExecCancelInput{WorkspaceID: s.wsID, ProcessID: e.processID, Wait: cancelKillWait}
	if err := s.callQuick(ctx, wire.ActivityExecCancel, in, &out); err != nil {
		workflow.GetLogger(ctx).Warn("cancel: kill failed", "update_id", e.updateID, "error", err)
	}
}

// cancelExec cancels exec e for why and waits for it to return (bounded:
// after cancelGrace its wait is abandoned). It returns e's state before.
func (s *session) cancelExec(ctx workflow.Context, e *execRun, why string) string {
	state := sandboxapi.CancelRunning
	if !e.started {
		state = sandboxapi.CancelQueued
	}
	if e.cancel == "" {
		e.cancel = why
		if e.started {
			s.killExec(ctx, e)
		}
	}
	ok, err := workflow.AwaitWithTimeout(ctx, cancelGrace, func() bool { return e.done })
	if err == nil && !ok && e.abort != nil {
		e.abort()
		_ = workflow.Await(ctx, func() bool { return e.done })
	}
	return state
}

// cancelAll cancels every exec running or queued (hibernate and release),
// together.
func (s *session) cancelAll(ctx workflow.Context, why string) {
	var runs []*execRun
	for _, e := range s.execs {
		runs = append(runs, e)
	}
	slices.SortFunc(runs, func(a, b *execRun) int {
		if a.updateID < b.updateID {
			return -1
		}
		return 1
	})
	pending := len(runs)
	for _, e := range runs {
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { pending-- }()
			s.cancelExec(ctx, e, why)
		})
	}
	_ = workflow.Await(ctx, func() bool { return pending == 0 })
}

// cancel is the cancel update: it never waits for the session's lock.
func (s *session) cancel(ctx workflow.Context, in sandboxapi.CancelInput) (sandboxapi.CancelResult, error) {
	s.control(ctx)
	defer s.controlEnd(ctx)
	res := sandboxapi.CancelResult{UpdateID: in.UpdateID, State: sandboxapi.CancelUnknown}
	if e := s.execs[in.UpdateID]; e != nil {
		res.State = s.cancelExec(ctx, e, cancelByUpdate)
		res.Cancelled = e.cancelled
	} else if slices.Contains(s.recent, in.UpdateID) {
		res.State = sandboxapi.CancelFinished
	}
	return res, nil
}

func validateCancel(_ *session, in sandboxapi.CancelInput) error {
	if in.UpdateID == "" || len(in.UpdateID) > 1000 {
		return sandboxapi.FieldError("update_id", "cancel needs the update id of an exec (1 to 1000 bytes)")
	}
	return nil
}

// --- the process updates -------------------------------------------------------

// control admits an immediate operation: counted in flight (the run does
// not end or continue as new meanwhile) but never waiting for the lock.
func (s *session) control(_ workflow.Context) {
	s.inFlight++
	s.seq++
}

// controlEnd records an immediate operation.
func (s *session) controlEnd(ctx workflow.Context) {
	s.inFlight--
	s.ops++
	s.seq++
	s.lastActivity = workflow.Now(ctx)
}

// controlOp runs an immediate operation's activity.
func controlOp[Out any](s *session, ctx workflow.Context, name string, in any) (Out, error) {
	var out Out
	if err := s.waitReady(ctx); err != nil {
		return out, err
	}
	s.control(ctx)
	defer s.controlEnd(ctx)
	err := s.callQuick(ctx, name, in, &out)
	return out, err
}

func (s *session) processStart(ctx workflow.Context, in sandboxapi.ProcessStartInput) (sandboxapi.ProcessStartResult, error) {
	out, err := writeOp[sandboxapi.ProcessStartResult](s, ctx, opQuick, wire.ActivityProcessStart, wire.OpInput[sandboxapi.ProcessStartInput]{WorkspaceID: s.wsID, Request: in})
	if err != nil {
		return out, err
	}
	s.runtimeRunning = true
	if s.state != sandboxapi.StateActive {
		s.setState(ctx, sandboxapi.StateActive)
	}
	s.usedProcess(ctx, out.ProcessID, out.Process)
	return out, nil
}

// processRead reads without holding the workflow task: a first attempt
// that does not wait (a local activity on the host queue), then, when there
// was nothing and the caller waits, an activity that waits.
func (s *session) processRead(ctx workflow.Context, in sandboxapi.ProcessReadInput) (sandboxapi.ProcessReadResult, error) {
	var out sandboxapi.ProcessReadResult
	if err := s.waitReady(ctx); err != nil {
		return out, err
	}
	s.control(ctx)
	defer s.controlEnd(ctx)
	arg := wire.ProcessReadActivityInput{WorkspaceID: s.wsID, Request: in}
	wait := time.Duration(in.WaitMS) * time.Millisecond
	if s.onHostQueue(ctx) {
		err := s.callQuick(ctx, wire.ActivityProcessRead, arg, &out)
		switch {
		case err == nil && (len(out.Data) > 0 || out.EOF || (out.Stderr != nil && len(out.Stderr.Data) > 0) || wait == 0):
			s.tracked(ctx, in.ProcessID, out.Process)
			return out, nil
		case err != nil && (wait == 0 || !sandboxapi.IsNotFound(sandboxapi.FromTemporal(err))):
			return out, err
		}
	}
	arg.Wait = wait
	opts := s.hostOptions(opQuick, 0)
	opts.StartToCloseTimeout = wait + time.Minute
	if err := s.call(ctx, opts, wire.ActivityProcessRead, arg, &out); err != nil {
		return out, err
	}
	s.tracked(ctx, in.ProcessID, out.Process)
	return out, nil
}

// tracked records the use of a process the session tracks.
func (s *session) tracked(ctx workflow.Context, id string, info sandboxapi.ProcessInfo) {
	if _, ok := s.procs.live[id]; ok {
		s.usedProcess(ctx, id, info)
	}
}

func (s *session) processWrite(ctx workflow.Context, in sandboxapi.ProcessWriteInput) (sandboxapi.ProcessWriteResult, error) {
	out, err := controlOp[sandboxapi.ProcessWriteResult](s, ctx, wire.ActivityProcessWrite, wire.OpInput[sandboxapi.ProcessWriteInput]{WorkspaceID: s.wsID, Request: in})
	if err == nil {
		if _, ok := s.procs.live[in.ProcessID]; ok {
			s.procs.live[in.ProcessID] = workflow.Now(ctx)
		}
	}
	return out, err
}

func (s *session) processSignal(ctx workflow.Context, in sandboxapi.ProcessSignalInput) (sandboxapi.ProcessResult, error) {
	return controlOp[sandboxapi.ProcessResult](s, ctx, wire.ActivityProcessSignal, wire.OpInput[sandboxapi.ProcessSignalInput]{WorkspaceID: s.wsID, Request: in})
}

func (s *session) processResize(ctx workflow.Context, in sandboxapi.ProcessResizeInput) (sandboxapi.ProcessResult, error) {
	return controlOp[sandboxapi.ProcessResult](s, ctx, wire.ActivityProcessResize, wire.OpInput[sandboxapi.ProcessResizeInput]{WorkspaceID: s.wsID, Request: in})
}

func (s *session) processList(ctx workflow.Context, _ sandboxapi.None) (sandboxapi.ProcessListResult, error) {
	out, err := controlOp[sandboxapi.ProcessListResult](s, ctx, wire.ActivityProcessList, wire.WorkspaceActivityInput{WorkspaceID: s.wsID})
	if err == nil {
		listed := map[string]bool{}
		for _, p := range out.Processes {
			listed[p.ID] = true
			s.tracked(ctx, p.ID, p)
		}
		for id := range s.procs.live {
			if !listed[id] {
				delete(s.procs.live, id)
			}
		}
	}
	return out, err
}

// registerProcessUsed installs the coroutine that receives the stream
// workflow's process_used signals (it produces no command).
func (s *session) registerProcessUsed(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, sandboxapi.SignalProcessUsed)
	s.usedCh = ch
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var sig sandboxapi.ProcessUsedSignal
			ch.Receive(ctx, &sig)
			now := workflow.Now(ctx)
			for _, id := range sig.ProcessIDs {
				if _, ok := s.procs.live[id]; ok {
					s.procs.live[id] = now
				}
			}
			s.seq++
		}
	})
}

// --- validators ------------------------------------------------------------

func validProcessID(id string) error {
	if id == "" || len(id) > 64 {
		return sandboxapi.FieldError("process_id", "process_id must be 1 to 64 characters")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return sandboxapi.FieldError("process_id", "process_id %q: only letters, digits, '-', '_' and '.'", sandboxapi.Clip(id, 64))
		}
	}
	return nil
}

func validateProcessStart(s *session, in sandboxapi.ProcessStartInput) error {
	req := sandboxapi.ExecRequest{Cmd: in.Cmd, Cwd: in.Cwd, Env: in.Env, Network: in.Network}
	if err := validateExec(s, req); err != nil {
		return err
	}
	if len(in.Tag) > sandboxapi.MaxProcessTagBytes {
		return sandboxapi.FieldError("tag", "tag is longer than %d bytes", sandboxapi.MaxProcessTagBytes)
	}
	for _, r := range in.Tag {
		if r < 0x20 || r == 0x7f {
			return sandboxapi.FieldError("tag", "tag has a control character")
		}
	}
	if t := in.PTY; t != nil && (t.Rows < 1 || t.Cols < 1 || t.Rows > sandboxapi.MaxTerminalSize || t.Cols > sandboxapi.MaxTerminalSize) {
		return sandboxapi.FieldError("pty", "pty rows and cols must be between 1 and %d", sandboxapi.MaxTerminalSize)
	}
	return nil
}

func validateProcessRead(_ *session, in sandboxapi.ProcessReadInput) error {
	if err := validProcessID(in.ProcessID); err != nil {
		return err
	}
	switch in.Stream {
	case "", sandboxapi.StreamStdout, sandboxapi.StreamStderr, sandboxapi.StreamPTY:
	default:
		return sandboxapi.FieldError("stream", "stream %q: want stdout, stderr or pty", sandboxapi.Clip(in.Stream, 32))
	}
	if in.Offset < 0 {
		return sandboxapi.FieldError("offset", "offset must not be negative")
	}
	if in.StderrOffset != nil && (*in.StderrOffset < 0 || (in.Stream != "" && in.Stream != sandboxapi.StreamStdout)) {
		return sandboxapi.FieldError("stderr_offset", "stderr_offset must not be negative and goes with stream stdout")
	}
	if in.MaxBytes < 0 || in.MaxBytes > sandboxapi.MaxProcessReadBytes {
		return sandboxapi.FieldError("max_bytes", "max_bytes must be between 0 and %d", sandboxapi.MaxProcessReadBytes)
	}
	if in.WaitMS < 0 || in.WaitMS > int(sandboxapi.MaxProcessReadWait/time.Millisecond) {
		return sandboxapi.FieldError("wait_ms", "wait_ms must be between 0 and %d", sandboxapi.MaxProcessReadWait/time.Millisecond)
	}
	return nil
}

func validateProcessWrite(_ *session, in sandboxapi.ProcessWriteInput) error {
	if err := validProcessID(in.ProcessID); err != nil {
		return err
	}
	if len(in.Data) > sandboxapi.MaxProcessWriteBytes {
		return sandboxapi.FieldError("data", "data is larger than %d bytes", sandboxapi.MaxProcessWriteBytes)
	}
	return nil
}

func validateProcessSignal(_ *session, in sandboxapi.ProcessSignalInput) error {
	if err := validProcessID(in.ProcessID); err != nil {
		return err
	}
	if in.Signal == "" {
		return nil
	}
	n := in.Signal
	if len(n) > 3 && (n[:3] == "SIG" || n[:3] == "sig") {
		n = n[3:]
	}
	for _, k := range sandboxapi.ProcessSignals {
		if len(n) == len(k) && equalFold(n, k) {
			return nil
		}
	}
	return sandboxapi.FieldError("signal", "signal %q: want one of %v", sandboxapi.Clip(in.Signal, 16), sandboxapi.ProcessSignals)
}

func equalFold(a, b string) bool {
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func validateProcessResize(_ *session, in sandboxapi.ProcessResizeInput) error {
	if err := validProcessID(in.ProcessID); err != nil {
		return err
	}
	if in.Rows < 1 || in.Cols < 1 || in.Rows > sandboxapi.MaxTerminalSize || in.Cols > sandboxapi.MaxTerminalSize {
		return sandboxapi.FieldError("rows", "rows and cols must be between 1 and %d", sandboxapi.MaxTerminalSize)
	}
	return nil
}
