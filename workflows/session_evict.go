package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The session side of eviction: the signals evict, pin and unpin.
//
// One coroutine receives them, in arrival order, and handles each under the
// session's mutating lock (begin/end), so an eviction waits for a running
// command and never races an agent's operation. The coroutine produces no
// command until a signal arrives, so histories recorded before it existed
// replay unchanged. A run started by signal-with-start only for a signal (no
// acquire) handles it and completes; a run whose workspace was evicted
// completes too (state "evicted"), and the next acquire starts a new run
// whose acquire activity restores the saved work.

// evictState is the session's eviction and pin state.
type evictState struct {
	evictCh, pinCh, unpinCh workflow.ReceiveChannel

	// handled counts the signals handled by this run.
	handled int
	// evicted: this run evicted the workspace; the run completes.
	evicted bool

	pinnedUntil    *time.Time
	lastPinRequest string
	pinError       string
	pinErrorType   string
	lastEvict      *sandboxapi.EvictResult
}

// evictActivityTimeout bounds one eviction activity (backup, verification,
// removal of a large worktree); it heartbeats.
const evictActivityTimeout = time.Hour

// registerEviction installs the eviction query and the signal coroutine.
func (s *session) registerEviction(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, sandboxapi.QueryEviction, s.evictionState); err != nil {
		return err
	}
	s.ev.evictCh = workflow.GetSignalChannel(ctx, sandboxapi.SignalEvict)
	s.ev.pinCh = workflow.GetSignalChannel(ctx, sandboxapi.SignalPin)
	s.ev.unpinCh = workflow.GetSignalChannel(ctx, sandboxapi.SignalUnpin)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			// Each payload is decoded strictly (decoding.go): a malformed
			// one is answered (pin_error, a failed EvictResult) and never
			// blocks this loop.
			sel.AddReceive(s.ev.evictCh, func(c workflow.ReceiveChannel, _ bool) {
				req, raw, ok, err := receiveSignal[sandboxapi.EvictRequest](ctx, c, sandboxapi.SignalEvict)
				switch {
				case ok:
					s.handleEvict(ctx, req)
				case err != nil:
					s.refuseEvict(ctx, senderOf(raw), err)
				}
			})
			sel.AddReceive(s.ev.pinCh, func(c workflow.ReceiveChannel, _ bool) {
				req, raw, ok, err := receiveSignal[sandboxapi.PinRequest](ctx, c, sandboxapi.SignalPin)
				switch {
				case ok:
					s.handlePin(ctx, req, true)
				case err != nil:
					s.refusePin(ctx, senderOf(raw), err)
				}
			})
			sel.AddReceive(s.ev.unpinCh, func(c workflow.ReceiveChannel, _ bool) {
				req, raw, ok, err := receiveSignal[sandboxapi.PinRequest](ctx, c, sandboxapi.SignalUnpin)
				switch {
				case ok:
					s.handlePin(ctx, req, false)
				case err != nil:
					s.refusePin(ctx, senderOf(raw), err)
				}
			})
			sel.Select(ctx)
		}
	})
	return nil
}

// signalsPending reports whether an eviction signal waits to be handled:
// the run must not complete or continue as new meanwhile (it would be lost).
func (s *session) signalsPending() bool {
	e := &s.ev
	if e.evictCh == nil {
		return false
	}
	used := 0
	if s.usedCh != nil {
		used = s.usedCh.Len()
	}
	return e.evictCh.Len()+e.pinCh.Len()+e.unpinCh.Len()+used > 0
}

func (s *session) evictionState() (sandboxapi.EvictionState, error) {
	st := sandboxapi.EvictionState{WorkspaceID: s.wsID, PinnedUntil: s.ev.pinnedUntil, LastPinRequest: s.ev.lastPinRequest,
		PinError: s.ev.pinError, PinErrorType: s.ev.pinErrorType, Evicted: s.ev.evicted, LastEvict: s.ev.lastEvict}
	if st.PinnedUntil == nil && s.ws != nil {
		st.PinnedUntil = s.ws.PinnedUntil
	}
	return st, nil
}

// housekeeping runs fn under the mutating lock without counting as an agent
// operation: the idle timers and the operation count are left as they were.
func (s *session) housekeeping(ctx workflow.Context, fn func()) error {
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	last, ops := s.lastActivity, s.ops
	defer func() {
		s.end(ctx, true)
		s.lastActivity, s.ops = last, ops
	}()
	fn()
	s.ev.handled++
	if s.ws == nil {
		// Started (or kept alive) only for this signal: complete once handled.
		s.ending = true
	}
	return nil
}

// locateHost returns the host of the session's workspace ("" when it does
// not exist), asking the store when this run has not acquired it.
func (s *session) locateHost(ctx workflow.Context) (string, error) {
	if s.ws != nil && !s.ev.evicted {
		return s.ws.HostID, nil
	}
	var loc wire.LocateResult
	opts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}).Get(ctx, &loc); err != nil {
		return "", err
	}
	if !loc.Exists {
		return "", nil
	}
	return loc.HostID, nil
}

func (s *session) handleEvict(ctx workflow.Context, req sandboxapi.EvictRequest) {
	res := sandboxapi.EvictResult{RequestID: req.RequestID, Action: req.Action, Tier: req.Tier, ID: s.wsID, WorkspaceID: s.wsID}
	if req.Action != sandboxapi.EvictionEvictWorkspace {
		res.ID = sandboxapi.RuntimeIDFor(s.wsID)
	}
	err := s.housekeeping(ctx, func() {
		defer func() {
			res.At = workflow.Now(ctx)
			s.ev.lastEvict = &res
			if req.ReplyTo != "" {
				// Sent under the lock, before the run may complete.
				if err := workflow.SignalExternalWorkflow(ctx, req.ReplyTo, "", sandboxapi.SignalEvictionReply, res).Get(ctx, nil); err != nil {
					workflow.GetLogger(ctx).Warn("eviction reply not delivered", "reply_to", req.ReplyTo, "error", err)
				}
			}
		}()
		name := wire.ActivityEvictRuntime
		switch req.Action {
		case sandboxapi.EvictionEvictWorkspace:
			name = wire.ActivityEvictWorkspace
		case sandboxapi.EvictionStopRuntime, sandboxapi.EvictionDestroyRuntime:
		default:
			res.Outcome, res.Reason = sandboxapi.OutcomeFailed, "unknown action "+string(req.Action)
			return
		}
		if s.ev.evicted {
			res.Outcome, res.Reason = sandboxapi.OutcomeSkipped, "already evicted"
			return
		}
		if pd := s.procDeadline(); s.runtimeRunning && pd.After(workflow.Now(ctx)) {
			// A background process the agent still uses keeps the runtime
			// (docs/API.md "Idle rules for processes").
			res.Outcome, res.Reason = sandboxapi.OutcomeSkipped, "a background process is in use"
			return
		}
		host, err := s.locateHost(ctx)
		if err != nil {
			res.Outcome, res.Reason = sandboxapi.OutcomeFailed, appError(err).Error()
			return
		}
		if host == "" {
			res.Outcome, res.Reason = sandboxapi.OutcomeSkipped, "the workspace does not exist"
			return
		}
		opts := workflow.ActivityOptions{
			TaskQueue:              wire.HostTaskQueue(host),
			ScheduleToStartTimeout: hostWait(s.settings.HostWait),
			StartToCloseTimeout:    evictActivityTimeout,
			HeartbeatTimeout:       30 * time.Second,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		}
		var out sandboxapi.EvictResult
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), name, wire.EvictActivityInput{WorkspaceID: s.wsID, Request: req}).Get(ctx, &out); err != nil {
			res.Outcome, res.Reason = sandboxapi.OutcomeFailed, appError(err).Error()
			return
		}
		out.RequestID, out.Tier = req.RequestID, req.Tier
		res = out
		if res.Outcome != sandboxapi.OutcomeDone {
			return
		}
		s.processesStopped()
		switch req.Action {
		case sandboxapi.EvictionEvictWorkspace:
			s.ev.evicted, s.ending, s.runtimeRunning = true, true, false
			if s.ws != nil {
				s.ws.State = sandboxapi.WorkspaceEvicted
			}
			s.setState(ctx, sandboxapi.StateEvicted)
		default:
			s.runtimeRunning = false
			if s.ws != nil && !s.ending {
				s.setState(ctx, sandboxapi.StateIdle)
			}
		}
	})
	if err != nil {
		workflow.GetLogger(ctx).Warn("eviction signal not handled", "error", err)
	}
}

// refuseEvict answers an evict signal whose payload did not decode: the
// result (outcome failed, the decoding error as reason) is recorded as the
// last eviction and sent to its reply_to when one could be read, under the
// mutating lock like any evict.
func (s *session) refuseEvict(ctx workflow.Context, from signalSender, cause error) {
	res := sandboxapi.EvictResult{RequestID: from.RequestID, ID: s.wsID, WorkspaceID: s.wsID,
		Outcome: sandboxapi.OutcomeFailed, Reason: cause.Error()}
	err := s.housekeeping(ctx, func() {
		res.At = workflow.Now(ctx)
		s.ev.lastEvict = &res
		if from.ReplyTo != "" {
			if err := workflow.SignalExternalWorkflow(ctx, from.ReplyTo, "", sandboxapi.SignalEvictionReply, res).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("eviction reply not delivered", "reply_to", from.ReplyTo, "error", err)
			}
		}
	})
	if err != nil {
		workflow.GetLogger(ctx).Warn("eviction signal not handled", "error", err)
	}
}

// refusePin answers a pin or unpin signal whose payload did not decode:
// pin_error and pin_error_type (InvalidArgument) say why, with its
// request_id as last_pin_request when one could be read; the pin is left as
// it was.
func (s *session) refusePin(ctx workflow.Context, from signalSender, cause error) {
	err := s.housekeeping(ctx, func() {
		s.ev.pinError, s.ev.pinErrorType = cause.Error(), sandboxapi.ErrInvalidArgument.Type
		s.ev.lastPinRequest = from.RequestID
	})
	if err != nil {
		workflow.GetLogger(ctx).Warn("pin signal not handled", "error", err)
	}
}

func (s *session) handlePin(ctx workflow.Context, req sandboxapi.PinRequest, pin bool) {
	until := req.Until
	if !pin {
		until = nil
	}
	err := s.housekeeping(ctx, func() {
		s.ev.pinError, s.ev.pinErrorType = "", ""
		// Published last: a query seeing the request id sees its outcome.
		defer func() { s.ev.lastPinRequest = req.RequestID }()
		if pin && (until == nil || !until.After(workflow.Now(ctx))) {
			s.ev.pinError, s.ev.pinErrorType = "pin needs an end time in the future", sandboxapi.ErrInvalidArgument.Type
			return
		}
		opts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}}
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), wire.ActivitySetPin, wire.SetPinInput{WorkspaceID: s.wsID, Until: until}).Get(ctx, nil); err != nil {
			var app *temporal.ApplicationError
			if errors.As(appError(err), &app) {
				s.ev.pinError, s.ev.pinErrorType = app.Message(), app.Type()
			}
			return
		}
		s.ev.pinnedUntil = until
		if s.ws != nil {
			s.ws.PinnedUntil = until
		}
	})
	if err != nil {
		workflow.GetLogger(ctx).Warn("pin signal not handled", "error", err)
	}
}
