package workflows

import (
	"errors"
	"fmt"
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

// Limits of one SessionWorkflow run.
const (
	// opsPerRun bounds the updates handled by one run before continue-as-new
	// (Temporal allows 2,000 updates per run; history also grows per update).
	opsPerRun = 500
	// acquireBeginWait is how long a run without a workspace waits for its
	// first acquire (or signal) to begin: an update-with-start whose acquire
	// was rejected leaves no session behind for longer (docs/API.md
	// "Listing workspaces").
	acquireBeginWait = 15 * time.Second
	// hostScheduleToStart is how long an operation waits for its host's worker
	// to pick it up before failing with WorkspaceUnavailable, unless the host's
	// SessionSettings.HostWait says otherwise.
	hostScheduleToStart = 2 * time.Minute
)

// Change ids of workflow.GetVersion (replay safety, docs/DESIGN.md "Temporal shape").
const (
	// changeAcquireWait: a run without a workspace ends after acquireBeginWait
	// when no acquire began (before: legacyAcquireWait without one succeeding).
	changeAcquireWait = "session-acquire-begin-wait"
	// changeDormant: a released, closed or evicted session continues as new
	// into a dormant run instead of completing (docs/API.md "Session states").
	changeDormant = "session-dormant"
	// changeDirtyAttr: when an operation's result changes what the session
	// knows of the workspace's dirty state, SandboxDirty is upserted.
	changeDirtyAttr = "session-dirty-attribute"
	// changeCommitClean: a commit of everything marks the workspace clean
	// (SandboxDirty false) even when a command ran since the dirty state
	// was last learnt.
	changeCommitClean = "session-commit-clean"
	// changeIdleTimer: one idle timer per run, kept across operations and
	// replaced only when the deadline moves earlier (before: a new timer
	// after every operation, the old ones left pending until they fired:
	// one more event and timer task per operation, and a mutable state
	// that grew by a timer per operation; docs/BENCHMARKS.md).
	changeIdleTimer = "session-idle-timer"
	// changeLocateLocal: the locate step of an acquire or a wake is a local
	// activity (before: an activity, with a workflow task of its own).
	changeLocateLocal = "session-locate-local"
	// changeSessionBinding: a run whose workflow id is not the one its
	// workspace id derives (sandboxapi.SessionWorkflowID) refuses every
	// update and signal and fails (before: it served the workspace as a
	// second session beside the real one). Asked only on a mismatch, so a
	// history of a bound run (every real one) never reaches the marker, and
	// the replayer's own workflow id finds none in a recorded history.
	changeSessionBinding = "session-binding"
	// changeFailedRun: a run that never had its workspace ends the way it
	// happened (docs/API.md "Session states"): its first update refused
	// for bad input is accepted and failed by its handler, so the run ends
	// at once instead of after acquireBeginWait (listed as a workspace
	// meanwhile); a failed run fails (status Failed, with the acquire's
	// error) instead of completing; a run started to resume a destroyed
	// workspace ends destroyed, not failed. Asked only on those paths, so
	// histories of runs that got their workspace never reach the marker.
	changeFailedRun = "session-failed-run"
)

// checkBinding returns the refusal of a run that is not its workspace's
// session: its workflow id is not sandboxapi.SessionWorkflowID(wsID)
// (docs/API.md "Identity"). The message names the workflow id the caller
// chose, not the workspace's. nil for a bound run, and in the replay of a
// history recorded before the check (changeSessionBinding).
func checkBinding(ctx workflow.Context, wsID string, derive func(string) (string, error), what string) error {
	want, err := derive(wsID)
	if err != nil {
		return err
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	if id == want || workflow.GetVersion(ctx, changeSessionBinding, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return sandboxapi.Errorf(sandboxapi.ErrConflict, "workflow %s is not the %s of the workspace it names: a workspace has exactly one, whose id derives from the workspace id (docs/API.md \"Identity\"); start it under that id", sandboxapi.Clip(id, 120), what)
}

// session is the state of one SessionWorkflow run.
type session struct {
	wsID     string
	request  *sandboxapi.WorkspaceRequest
	ws       *sandboxapi.Workspace
	settings wire.SessionSettings

	runtimeRunning bool
	// replica is the last replica state a remote runtime reported (acquire,
	// exec); nil for local runtimes and after the runtime was destroyed.
	replica *sandboxapi.RuntimeReplica
	// setup is the workspace's setup run (session_setup.go), nil when its
	// repository names no setup command; setupRuns counts this run's starts.
	setup     *sandboxapi.SetupState
	setupRuns int
	// setupExec is the setup run's command while it runs (not its
	// prepared-tree restore or save): what an exec with beside_setup
	// runs next to.
	setupExec    *execRun
	lastActivity time.Time
	ops          int64
	seq          int64 // changes at every operation start and end
	inFlight     int
	lock         rwLock

	// inputErr: the workflow argument did not decode, or names a workspace
	// that is not this run's (foreign); every update is refused with it.
	inputErr error
	// foreign: the run's workflow id is not its workspace's session id
	// (checkBinding); it registers no signal handler, so nothing reaches
	// the workspace through it.
	foreign bool
	// phase is where the run is in the session's lifecycle (phase.go).
	phase phase
	// ending: the run takes no new operation (SessionReleased until the
	// next run) and finishes once drained: released, idle-closed, evicted,
	// its workspace removed, destroyed, or a signal's run without a
	// workspace. It combines with every phase (a dormant run whose
	// workspace was removed ends dormant), so it is not one of them.
	ending bool
	// first is how the run's first acquire went, while it has no workspace.
	first firstAcquire
	// moveToHost asks the main loop to continue as new on the host's task
	// queue, where quick operations run as local activities.
	moveToHost bool
	state      string
	lastError  string

	ev evictState // evict, pin and unpin signals (session_evict.go)

	// execs are the exec updates running or queued, by update id; recent
	// the ids of the last finished ones (session_proc.go).
	execs  map[string]*execRun
	recent []string
	// rawResults: exec results ready for the client, by update id, for
	// the update's handler to return (passThrough).
	rawResults map[string]converter.RawValue
	// procs are the background processes the session started that may
	// still run (idle rules, session_proc.go); usedCh receives the stream
	// workflow's process_used signals.
	procs  procTracking
	usedCh workflow.ReceiveChannel

	// facts: what the run knows of the workspace from its operations'
	// results, shown in its current details (session_details.go).
	facts wire.SessionFacts
	// idle is the run's pending idle timer (changeIdleTimer), nil when none.
	idle *idleTimer
	// holder is what took the exclusive lock last (lockedError).
	holder lockHolder
}

// idleTimer is a pending timer of the main loop that fires at at.
type idleTimer struct {
	at     time.Time
	fired  workflow.Future
	cancel workflow.CancelFunc
}

// SessionWorkflow is the entity of one workspace (docs/API.md "Getting a
// session", "Session states"). Agents get-or-create it with
// update-with-start (acquire, conflict policy USE_EXISTING) and then send
// updates (the operation table, ops.go); mutating updates run one at a
// time, read-only ones together when nothing mutating runs. After IdleStop
// without an operation the runtime is hibernated; after IdleClose it is
// destroyed and the session closes. A released, closed or evicted session
// continues as new into a dormant run that holds no runtime and no timer;
// the next operation resumes the workspace first. The run continues as new
// when Temporal suggests it. Its argument is a sandboxapi.SessionInput,
// decoded strictly (an unknown field fails the run with InvalidArgument).
func SessionWorkflow(ctx workflow.Context, raw converter.RawValue) error {
	in, err := decodeRecorded[wire.SessionRunInput](ctx, sandboxapi.SessionWorkflowType, raw)
	if err == nil {
		err = sandboxapi.ValidateWorkspaceID(in.WorkspaceID)
	}
	foreign := false
	if err == nil {
		// A session serves only its own workspace: a run under any other
		// workflow id would be a second session of it, and "one at a
		// time" would not hold (docs/SECURITY.md "Tenant isolation").
		err = checkBinding(ctx, in.WorkspaceID, sandboxapi.SessionWorkflowID, "session")
		foreign = err != nil
	}
	s := &session{wsID: in.WorkspaceID, request: in.Request, state: sandboxapi.StateAcquiring, lastActivity: workflow.Now(ctx), foreign: foreign}
	if err != nil {
		// Refuse the update that came with the start (validators see
		// inputErr), then fail the run.
		s.inputErr = err
		if rerr := s.register(ctx); rerr != nil {
			return rerr
		}
		_, _ = workflow.AwaitWithTimeout(ctx, time.Second, func() bool { return false })
		if workflow.GetVersion(ctx, changeFailedRun, workflow.DefaultVersion, 1) >= 1 {
			s.setState(ctx, sandboxapi.StateFailed) // not left "acquiring"
		}
		return appError(err)
	}
	if c := in.Carry; c != nil {
		ws := c.Workspace
		s.ws, s.settings, s.runtimeRunning, s.lastActivity, s.state = &ws, c.Settings, c.RuntimeRunning, c.LastActivity, sandboxapi.StateActive
		s.phase = phaseActive
		if c.Dormant {
			s.phase = phaseDormant
		}
		if c.Facts != nil {
			s.facts = *c.Facts
		} else {
			d := ws.Dirty
			s.facts = wire.SessionFacts{Dirty: &d, DirtyFrom: "store"}
		}
		s.replica = c.RuntimeReplica
		s.setup = c.Setup
		s.ev.evicted = c.Dormant && c.State == sandboxapi.StateEvicted
		for _, p := range c.Processes {
			if s.procs.live == nil {
				s.procs.live = map[string]time.Time{}
			}
			s.procs.live[p.ID] = p.LastUse
		}
		switch {
		case c.State != "":
			s.state = c.State
		case !c.RuntimeRunning:
			s.state = sandboxapi.StateIdle
		}
	}
	if err := s.register(ctx); err != nil {
		return err
	}
	watchDetails(ctx, s.details)
	if s.setup != nil && s.setup.State == sandboxapi.SetupPending && s.phase != phaseDormant {
		s.startSetup(ctx, nil) // planned by the previous run, which continued as new first
	}
	return s.run(ctx)
}

func (s *session) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, sandboxapi.QueryDescribe, s.describe); err != nil {
		return err
	}
	for _, o := range operations {
		if err := o.register(s, ctx); err != nil {
			return err
		}
	}
	if s.foreign {
		return nil
	}
	s.registerProcessUsed(ctx)
	return s.registerEviction(ctx)
}

// run is the main coroutine: the wait for the first acquire, idle timers,
// dormancy, continue-as-new and the end of the run.
func (s *session) run(ctx workflow.Context) error {
	retired(ctx, changeIdleTimer)
	for {
		switch {
		case s.ending || s.phase == phaseFailed:
			if err := s.awaitDrained(ctx); err != nil {
				return err
			}
			return s.finish(ctx)
		case s.ws == nil:
			if err := s.awaitFirstAcquire(ctx); err != nil {
				return err
			}
			continue
		case s.phase == phaseDormant:
			if err := s.awaitWake(ctx); err != nil {
				return err
			}
			if s.phase == phaseDormant && !s.ending {
				return s.continueAsNew(ctx, workflow.GetInfo(ctx).TaskQueueName)
			}
			continue
		}
		if s.inFlight == 0 && s.runIsFull(ctx) {
			if err := s.awaitDrained(ctx); err != nil {
				return err
			}
			if s.ending || s.phase == phaseDormant { // released or evicted meanwhile
				continue
			}
			workflow.GetLogger(ctx).Info("continuing as new", "ops", s.ops, "task_queue", wire.HostTaskQueue(s.ws.HostID))
			return s.continueAsNew(ctx, wire.HostTaskQueue(s.ws.HostID))
		}
		if err := s.idleStep(ctx); err != nil {
			return err
		}
	}
}

// awaitDrained waits until no update handler runs, no operation is in
// flight and no signal waits to be handled: the run may end.
func (s *session) awaitDrained(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && s.inFlight == 0 && !s.signalsPending() })
}

// awaitWake is a dormant run's wait: no runtime, no timer, until an
// operation wakes it (wake), it is released, or Temporal suggests shedding
// history while nothing is in flight.
func (s *session) awaitWake(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool {
		return s.phase != phaseDormant || s.ending || (s.inFlight == 0 && workflow.GetInfo(ctx).GetContinueAsNewSuggested())
	})
}

// runIsFull reports whether the run should continue as new: the session
// moves to its host's queue, ran opsPerRun operations, or Temporal
// suggests it.
func (s *session) runIsFull(ctx workflow.Context) bool {
	return s.moveToHost || s.ops >= opsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// idleStep is one turn of an active run with nothing else to do: when
// nothing is in flight it refreshes the live processes, hibernates the
// runtime or closes the session once their deadline passed (idleDeadlines:
// live background processes defer both); otherwise it waits for the next
// change or deadline (idleWait).
func (s *session) idleStep(ctx workflow.Context) error {
	logger := workflow.GetLogger(ctx)
	now := workflow.Now(ctx)
	stopAt, closeAt, check := s.idleDeadlines(now)
	if s.inFlight == 0 {
		switch {
		case check:
			s.refreshProcesses(ctx)
			return nil
		case s.runtimeRunning && !now.Before(stopAt):
			if err := s.stopRuntime(ctx, false); err != nil {
				logger.Warn("idle hibernate failed", "error", err)
				s.lastActivity = workflow.Now(ctx) // retry after another idle period
			}
			return nil
		case !now.Before(closeAt):
			if err := s.stopRuntime(ctx, true); err != nil {
				logger.Warn("idle destroy failed", "error", err)
			}
			s.ending = true
			return nil
		}
	}
	wait := idleWait(s.inFlight, s.runtimeRunning, now, stopAt, closeAt)
	seq := s.seq
	cond := func() bool {
		return s.seq != seq || s.ending || s.phase == phaseDormant || (s.inFlight == 0 && (s.moveToHost || workflow.GetInfo(ctx).GetContinueAsNewSuggested()))
	}
	return s.awaitIdle(ctx, now, wait, cond)
}

// idleWait is how long an idle turn waits at most: until the next idle
// deadline (stopAt while the runtime runs, else closeAt), at least a
// second; 0 (no bound) while operations are in flight.
func idleWait(inFlight int, runtimeRunning bool, now, stopAt, closeAt time.Time) time.Duration {
	if inFlight != 0 {
		return 0
	}
	deadline := closeAt
	if runtimeRunning {
		deadline = stopAt
	}
	return max(deadline.Sub(now), time.Second)
}

// awaitIdle waits for cond, or (wait > 0) until now+wait has passed: the
// run's one idle timer is reused when it fires no later than that, and
// replaced (the old one canceled) when it would fire too late. A timer that
// fires early wakes the loop, which starts one for the rest of the wait.
func (s *session) awaitIdle(ctx workflow.Context, now time.Time, wait time.Duration, cond func() bool) error {
	if wait > 0 {
		at := now.Add(wait)
		if s.idle != nil && s.idle.at.After(at) {
			s.idle.cancel()
			s.idle = nil
		}
		if s.idle == nil {
			tctx, cancel := workflow.WithCancel(ctx)
			s.idle = &idleTimer{at: at, fired: workflow.NewTimerWithOptions(tctx, wait, workflow.TimerOptions{Summary: "idle"}), cancel: cancel}
		}
	}
	t := s.idle
	err := workflow.Await(ctx, func() bool { return cond() || (t != nil && t.fired.IsReady()) })
	if t != nil && t.fired.IsReady() && s.idle == t {
		s.idle = nil
	}
	return err
}

// awaitFirstAcquire waits for the run's first acquire (or signal): when none
// begins within acquireBeginWait, the run ends as failed.
func (s *session) awaitFirstAcquire(ctx workflow.Context) error {
	done := func() bool { return s.ws != nil || s.phase == phaseFailed || s.ending }
	retired(ctx, changeAcquireWait)
	if s.first.began || s.inFlight > 0 {
		return workflow.Await(ctx, done)
	}
	// refused is only ever set after changeFailedRun's marker (a recorded
	// history without it never sees it true).
	began := func() bool { return done() || s.first.began || s.inFlight > 0 || s.first.refused }
	ok, err := workflow.AwaitWithTimeout(ctx, acquireBeginWait, began)
	if err != nil {
		return err
	}
	if (!ok || (s.first.refused && !s.first.began)) && s.inFlight == 0 {
		s.phase = phaseFailed
	}
	return nil
}

// finish ends the run: a run that never had a workspace completes (failed,
// or closed after a signal); a session whose workspace exists continues as
// new into a dormant run.
func (s *session) finish(ctx workflow.Context) error {
	if s.phase == phaseDestroyed {
		// Only runs that handled destroy get here (no recorded history
		// does): the session ends for good (docs/API.md "Destroy").
		s.setState(ctx, sandboxapi.StateDestroyed)
		return nil
	}
	if s.ws != nil && s.runtimeRunning {
		// An operation admitted after release restarted the runtime: stop it again.
		_ = s.stopRuntime(ctx, false)
	}
	if s.ws == nil {
		if s.ev.handled > 0 && s.phase != phaseFailed {
			s.setState(ctx, sandboxapi.StateClosed) // a signal's run: nothing failed
			return nil
		}
		if workflow.GetVersion(ctx, changeFailedRun, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			s.setState(ctx, sandboxapi.StateFailed) // recorded before: the run completed
			return nil
		}
		return s.failRun(ctx)
	}
	final := sandboxapi.StateClosed
	switch {
	case s.ev.evicted:
		final = sandboxapi.StateEvicted
	case s.state == sandboxapi.StateReleased:
		final = sandboxapi.StateReleased
	}
	retired(ctx, changeDormant)
	s.setState(ctx, final)
	s.phase, s.runtimeRunning = phaseDormant, false
	if s.ev.evicted {
		s.ws.State = sandboxapi.WorkspaceEvicted
	}
	return s.continueAsNew(ctx, workflow.GetInfo(ctx).TaskQueueName)
}

// failRun ends a run that never had its workspace (changeFailedRun): the
// state says what happened (failed, or destroyed for a resume of a
// destroyed workspace) and the run fails with the first acquire's error,
// so the Web UI shows it as Failed with its cause (docs/API.md "Session
// states").
func (s *session) failRun(ctx workflow.Context) error {
	state := sandboxapi.StateFailed
	if s.first.keyDestroyed {
		state = sandboxapi.StateDestroyed
	}
	s.setState(ctx, state)
	err := s.first.failure
	if err == nil {
		err = sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s: no acquire reached the session within %s of its start", s.wsID, acquireBeginWait)
	}
	return appError(err)
}

// continueAsNew hands the session to a new run on taskQueue.
func (s *session) continueAsNew(ctx workflow.Context, taskQueue string) error {
	return workflow.NewContinueAsNewError(workflow.WithWorkflowTaskQueue(ctx, taskQueue), sandboxapi.SessionWorkflowType, wire.SessionRunInput{
		WorkspaceID: s.wsID,
		Carry: &wire.SessionCarry{Workspace: *s.ws, Settings: s.settings, RuntimeRunning: s.runtimeRunning, State: s.state,
			LastActivity: s.lastActivity, Ops: 0, Dormant: s.phase == phaseDormant, RuntimeReplica: s.replica, Processes: s.carriedProcesses(),
			Facts: s.carryFacts(), Setup: s.setupCopy()},
	})
}

// --- operations' lifecycle --------------------------------------------------

// begin admits an operation under the session's lock (exclusive when
// mutating), counting it in flight.
func (s *session) begin(ctx workflow.Context, mutating bool) error {
	_, err := s.beginUnless(ctx, mutating, nil)
	return err
}

// beginUnless is begin that gives up, returning false, when abort (nil:
// never) holds before the lock is taken.
func (s *session) beginUnless(ctx workflow.Context, mutating bool, abort func() bool) (bool, error) {
	s.inFlight++
	s.seq++
	ok, timedOut, err := s.lock.acquireWithin(ctx, mutating, abort, s.lockWait(ctx))
	if err != nil || !ok {
		s.inFlight--
		s.seq++
		if timedOut {
			return false, s.lockedError(ctx)
		}
		return false, err
	}
	if mutating {
		s.holder = lockHolder{op: "a session task (idle timer or eviction)", since: workflow.Now(ctx)}
		if u := clientUpdate(ctx); u != nil {
			s.holder.op, s.holder.updateID = u.Name, u.ID
		}
	}
	if s.phase == phaseDestroyed {
		// Waited for the lock while destroy ran: the workspace is gone.
		s.lock.release(mutating)
		s.inFlight--
		return false, s.destroyedError()
	}
	return true, nil
}

// lockHolder is what holds the session's exclusive lock: the operation
// (an update name), its update id ("" for the session's own tasks), since when.
type lockHolder struct {
	op, updateID string
	since        time.Time
}

// updateKey is the workflow context key of the update an operation serves
// (operation.register; clientUpdate).
type updateKey struct{}

// clientUpdate returns the update the operation of ctx serves, nil in the
// session's own tasks (timers, signals): unlike workflow.GetCurrentUpdateInfo
// it never panics outside an update handler.
func clientUpdate(ctx workflow.Context) *workflow.UpdateInfo {
	u, _ := ctx.Value(updateKey{}).(*workflow.UpdateInfo)
	return u
}

// lockWait is how long the current operation may wait for the session's
// lock (docs/API.md "Updates": SANDBOX_LOCK_WAIT): the host's LockWait for
// an update a client sent, 0 (no bound) for acquire, for the session's own
// tasks (timers, eviction signals) and for the updates the fan-out and
// cleanup workflows send (their activities wait as long as the workspace
// is busy). Runs whose settings were recorded before LockWait existed
// carry 0, so their histories replay unchanged.
func (s *session) lockWait(ctx workflow.Context) time.Duration {
	u := clientUpdate(ctx)
	if s.setup != nil && !s.setup.Ended() {
		return 0 // the setup holds the lock or is about to: commands wait for it (docs/RUNTIMES.md "Setup")
	}
	if u == nil || s.settings.LockWait <= 0 || u.Name == sandboxapi.UpdateAcquire ||
		strings.HasPrefix(u.ID, sandboxapi.FanoutWorkflowIDPrefix) || strings.HasPrefix(u.ID, sandboxapi.CleanupWorkflowIDPrefix) {
		return 0
	}
	return s.settings.LockWait
}

// lockedError is the WorkspaceLocked failure of an operation that waited
// lockWait for the lock, naming what holds it.
func (s *session) lockedError(ctx workflow.Context) error {
	wait := s.lockWait(ctx)
	if s.lock.writers > 0 {
		h := s.holder
		what := h.op
		if h.updateID != "" {
			what += " (update id " + h.updateID + ")"
		}
		return appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceLocked,
			"workspace %s is busy: %s has held it since %s (%s); waited %s. Wait and retry, or stop it: sandboxctl ps / cancel %s",
			s.wsID, what, h.since.UTC().Format(time.RFC3339), workflow.Now(ctx).Sub(h.since).Round(time.Second), wait, s.wsID))
	}
	return appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceLocked,
		"workspace %s is busy: %d read-only operations run and a change waits before this one; waited %s. Retry", s.wsID, s.lock.readers, wait))
}

// destroyedError refuses an operation that reached a run after its destroy:
// SessionReleased (retryable), so a client's retry reaches the next run.
func (s *session) destroyedError() error {
	return appError(sandboxapi.Errorf(sandboxapi.ErrSessionReleased, "workspace %s was destroyed; send the call again (an acquire starts the key fresh)", s.wsID))
}

// end releases what begin took and records the operation.
func (s *session) end(ctx workflow.Context, mutating bool) {
	s.lock.release(mutating)
	s.controlEnd(ctx)
}

// waitReady blocks an operation until the first acquire finished, and
// resumes a dormant workspace first.
func (s *session) waitReady(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return s.ws != nil || s.phase == phaseFailed || s.phase == phaseDestroyed }); err != nil {
		return err
	}
	if s.phase == phaseDestroyed {
		return s.destroyedError()
	}
	if s.ws == nil {
		return appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s could not be acquired", s.wsID))
	}
	if s.phase == phaseDormant {
		return s.wake(ctx)
	}
	return nil
}

// admitting refuses new operations while the run cannot take them: its
// argument did not decode, or it is ending (released, idle-closed or
// evicted: the same call sent again reaches the next run, which resumes the
// workspace).
func (s *session) admitting(name string) error {
	if s.inputErr != nil {
		return appError(s.inputErr)
	}
	if s.ending {
		return appError(sandboxapi.Errorf(sandboxapi.ErrSessionReleased, "%s: session %s is ending (released or closed); send the call again to resume it", name, s.wsID))
	}
	return nil
}

// refusalEndsRun reports whether a refused update is instead accepted and
// refused by its handler, which ends the run (changeFailedRun): the run
// never had a workspace, no acquire or other operation began, and its
// argument decoded (a run whose argument did not decode, or a foreign one,
// refuses every update and ends on its own).
func (s *session) refusalEndsRun() bool {
	return s.ws == nil && !s.first.began && s.inFlight == 0 && !s.first.refused && s.inputErr == nil && !s.foreign && s.phase != phaseFailed
}

func (s *session) writable() error {
	if s.ws != nil && !s.ws.Capabilities.Writable {
		return appError(sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is a read-only %s workspace", s.wsID, s.ws.Mode))
	}
	return nil
}

// --- activities ----------------------------------------------------------

func (s *session) hostOptions(class opClass, timeout time.Duration) workflow.ActivityOptions {
	o := workflow.ActivityOptions{
		TaskQueue:              wire.HostTaskQueue(s.ws.HostID),
		ScheduleToStartTimeout: hostWait(s.settings.HostWait),
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	}
	switch class {
	case opGit:
		o.StartToCloseTimeout = 10 * time.Minute
		o.HeartbeatTimeout = 30 * time.Second
	case opExec:
		// A command is never retried behind the agent's back: its outcome would be unknown.
		o.StartToCloseTimeout = timeout + time.Minute
		o.HeartbeatTimeout = 30 * time.Second
		o.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
	}
	return o
}

func (s *session) call(ctx workflow.Context, opts workflow.ActivityOptions, name string, in, out any) error {
	actx := workflow.WithActivityOptions(ctx, opts)
	err := workflow.ExecuteActivity(actx, name, in).Get(ctx, out)
	return s.result(err)
}

// callQuick runs a short operation: as a local activity when this run is on
// the workspace's host queue (no extra task-queue hop), else as an activity
// sent to that host.
func (s *session) callQuick(ctx workflow.Context, name string, in, out any) error {
	if s.ws == nil || workflow.GetInfo(ctx).TaskQueueName != wire.HostTaskQueue(s.ws.HostID) {
		return s.call(ctx, s.hostOptions(opQuick, 0), name, in, out)
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	})
	return s.result(workflow.ExecuteLocalActivity(lctx, name, in).Get(ctx, out))
}

func (s *session) result(err error) error {
	if err != nil {
		s.lastError = err.Error()
		return appError(err)
	}
	s.lastError = ""
	return nil
}

func hostWait(d time.Duration) time.Duration {
	if d <= 0 {
		return hostScheduleToStart
	}
	return d
}

// appError turns an error into an update's (or workflow's) failure: an
// application error whose Type is one of the stable sandbox error types and
// whose detail is its sandboxapi.ErrorDetails (docs/API.md "Errors").
// Activity failures keep their type; timeouts and cancellations map to the
// documented kinds.
func appError(err error) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		kind := sandboxapi.KindByType(app.Type())
		if kind == nil {
			kind = sandboxapi.ErrSandbox
		}
		field := ""
		var d sandboxapi.ErrorDetails
		if app.HasDetails() && app.Details(&d) == nil {
			field = d.Field
		}
		return sandboxapi.NewApplicationError(&sandboxapi.Error{Kind: kind, Msg: app.Message(), Field: field}, true)
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		switch to.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "the workspace's host did not pick up the operation in time (host down?)"), true)
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "the worker running the operation stopped responding (restarted?); its outcome is unknown"), true)
		}
		return sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrTimeout, "operation timed out: %v", err), true)
	}
	if sandboxapi.KindOf(err) != nil {
		return sandboxapi.NewApplicationError(err, true)
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrTimeout, "operation canceled"), true)
	}
	return sandboxapi.NewApplicationError(err, true)
}

// dirtyKey is the SandboxDirty search attribute.
var dirtyKey = temporal.NewSearchAttributeKeyBool(sandboxapi.SearchAttrDirty)

// publishDirty upserts SandboxDirty when the dirty state the run knows
// differs from the published one: one history event per change, never per
// call (a read-only status that finds nothing new adds none).
func (s *session) publishDirty(ctx workflow.Context) {
	d := s.facts.Dirty
	if d == nil || s.ws == nil {
		return
	}
	if v, ok := workflow.GetTypedSearchAttributes(ctx).GetBool(dirtyKey); ok && v == *d {
		return
	}
	retired(ctx, changeDirtyAttr)
	_ = workflow.UpsertTypedSearchAttributes(ctx, dirtyKey.ValueSet(*d))
}

func (s *session) setState(ctx workflow.Context, state string) {
	s.state = state
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrState).ValueSet(state))
}

func (s *session) publish(ctx workflow.Context) {
	ws := s.ws
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrUser).ValueSet(ws.UserID),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrProject).ValueSet(ws.ProjectID),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrRepo).ValueSet(ws.Repo.Key()),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrMode).ValueSet(string(ws.Mode)),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrHost).ValueSet(ws.HostID),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrWorkspace).ValueSet(ws.ID),
		temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrState).ValueSet(s.state),
	}
	// Branch, runtime kind, conversation and task ride on the same upsert
	// (one command, as before they existed: replay-compatible).
	if ws.BranchName != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrBranch).ValueSet(ws.BranchName))
	}
	if s.settings.RuntimeKind != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrRuntime).ValueSet(s.settings.RuntimeKind))
	}
	if ws.ConversationID != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeywordList(sandboxapi.SearchAttrConversation).ValueSet([]string{ws.ConversationID}))
	}
	if ws.TaskID != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeywordList(sandboxapi.SearchAttrTask).ValueSet([]string{ws.TaskID}))
	}
	dirty := ws.Dirty // the stored flag, unless the run knows better
	if s.facts.Dirty != nil {
		dirty = *s.facts.Dirty
	}
	attrs = append(attrs, dirtyKey.ValueSet(dirty))
	_ = workflow.UpsertTypedSearchAttributes(ctx, attrs...)
	_ = workflow.UpsertMemo(ctx, map[string]any{sandboxapi.MemoWorkspace: wire.HandleFor(*ws, s.settings, false)})
}

// stopRuntime hibernates (destroy=false) or destroys the runtime under the write lock.
func (s *session) stopRuntime(ctx workflow.Context, destroy bool) error {
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	defer s.end(ctx, true)
	s.ops-- // housekeeping is not an agent operation
	name := wire.ActivityHibernate
	if destroy {
		name = wire.ActivityDestroyRuntime
	}
	var out sandboxapi.HibernateResult
	if err := s.callQuick(ctx, name, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}, &out); err != nil {
		return err
	}
	s.runtimeRunning = false
	s.processesStopped()
	if destroy {
		s.replica = nil
	}
	if !s.ending {
		s.setState(ctx, sandboxapi.StateIdle)
	}
	return nil
}

// readOp runs a read-only activity under the shared lock, as a local
// activity on the host queue (opQuick).
func readOp[Out any](s *session, ctx workflow.Context, name string, in any) (Out, error) {
	return lockedOp[Out](s, ctx, false, opQuick, name, in)
}

// sharedOp runs a read-only activity of class (opGit or opExec: a
// heartbeating activity on the host queue, for reads that may take long)
// under the shared lock.
func sharedOp[Out any](s *session, ctx workflow.Context, class opClass, name string, in any) (Out, error) {
	return lockedOp[Out](s, ctx, false, class, name, in)
}

// writeOp runs a mutating activity under the exclusive lock.
func writeOp[Out any](s *session, ctx workflow.Context, class opClass, name string, in any) (Out, error) {
	return lockedOp[Out](s, ctx, true, class, name, in)
}

// lockedOp waits for the workspace, takes the session's lock (exclusive or
// shared) and runs activity name: a local activity for opQuick, else one
// with class's options on the host queue.
func lockedOp[Out any](s *session, ctx workflow.Context, exclusive bool, class opClass, name string, in any) (Out, error) {
	var out Out
	if err := s.waitReady(ctx); err != nil {
		return out, err
	}
	if err := s.begin(ctx, exclusive); err != nil {
		return out, err
	}
	defer s.end(ctx, exclusive)
	var err error
	if class == opQuick {
		err = s.callQuick(ctx, name, in, &out)
	} else {
		err = s.call(ctx, s.hostOptions(class, 0), name, in, &out)
	}
	return out, err
}

func (s *session) describe() (sandboxapi.SessionDescription, error) {
	d := sandboxapi.SessionDescription{
		WorkspaceID: s.wsID, State: s.state, Workspace: s.ws, RuntimeKind: s.settings.RuntimeKind,
		RuntimeRunning: s.runtimeRunning, InFlight: s.inFlight, Ops: s.ops, LastActivity: s.lastActivity,
		LastError: s.lastError, ContractVersion: sandboxapi.ContractVersion, RuntimeReplica: s.replica,
		Setup: s.setupCopy(),
	}
	stopAt, closeAt, _ := s.idleDeadlines(s.lastActivity)
	if pd := s.procDeadline(); pd.After(stopAt) {
		stopAt = pd
	}
	if s.phase != phaseDormant && !s.ending {
		d.IdleCloseAt = closeAt
	}
	if s.runtimeRunning {
		d.IdleStopAt = &stopAt
	}
	d.LiveProcesses = len(s.procs.live)
	for id := range s.execs {
		d.RunningExecs = append(d.RunningExecs, id)
	}
	slices.Sort(d.RunningExecs)
	return d, nil
}

// String is for logs.
func (s *session) String() string { return fmt.Sprintf("session(%s, %s)", s.wsID, s.state) }
