// Package sessionrpc is the one call path to a workspace's SessionWorkflow
// (docs/API.md "Getting a session", "Updates", "Session states"): acquire
// and other updates sent by update-with-start, updates sent to the running
// run, and what to do when that run is ending (SessionReleased: send again
// after a pause, or hand the error to the caller's own retry) or gone (no
// running execution: resume the workspace by update-with-start acquire,
// then send again). Package sandboxclient and the worker's activities that
// drive other sessions (fan-out, fork, cleanup) both use it, each with its
// own explicit Policy.
//
// Errors are returned as the Temporal client returns them; callers convert
// them with sandboxapi.FromTemporal (sandboxclient.FromTemporal adds a hint
// about payload encryption).
package sessionrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Policy says how a call reacts to a session run that is ending or gone
// (docs/API.md "Session states").
type Policy struct {
	// Retries is how many times a call is sent again after its first
	// send (0: never).
	Retries int
	// Backoff is the pause before sending again after SessionReleased.
	Backoff time.Duration
	// ReturnReleased: SessionReleased is returned at once instead of being
	// waited out in-process. For activities, whose own retry policy decides
	// when to send again (the kind is retryable). A gone run is still
	// resumed (no pause is involved).
	ReturnReleased bool
}

// The policies in use.
var (
	// ClientPolicy is sandboxclient's for acquire and updates: up to 4
	// more sends, 100 ms apart while the run is ending.
	ClientPolicy = Policy{Retries: 4, Backoff: 100 * time.Millisecond}
	// ClientStartPolicy is sandboxclient's for updates sent by
	// update-with-start (destroy, restore): up to 8 more sends, 150 ms apart.
	ClientStartPolicy = Policy{Retries: 8, Backoff: 150 * time.Millisecond}
	// ActivityPolicy is the activities': a gone run is resumed (up to 4
	// times), SessionReleased is returned to the activity's retry policy.
	ActivityPolicy = Policy{Retries: 4, ReturnReleased: true}
)

// Step is what a call does after a failed send.
type Step int

const (
	// Stop returns the error.
	Stop Step = iota
	// Resume resumes the workspace in a new run (update-with-start
	// acquire), then sends again.
	Resume
	// Wait pauses Backoff, then sends again.
	Wait
)

// Next decides what follows the failed send number attempt (0 for the
// first) that returned err. resumable says whether the call can resume a
// gone run (an update-with-start never meets one).
func (p Policy) Next(attempt int, err error, resumable bool) Step {
	switch {
	case err == nil || attempt >= p.Retries:
		return Stop
	case RunGone(err):
		if resumable {
			return Resume
		}
		return Stop
	case Released(err) && !p.ReturnReleased:
		return Wait
	}
	return Stop
}

// Released reports whether err (raw from the Temporal client or typed)
// says the session's run is ending: the kind SessionReleased
// (docs/API.md "Errors"), never a message text.
func Released(err error) bool {
	return err != nil && sandboxapi.IsSessionReleased(sandboxapi.FromTemporal(err))
}

// RunGone reports whether err says the workflow has no running execution
// (the Temporal service's NotFound): the session completed before dormant
// runs existed, or was destroyed.
func RunGone(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// NewUpdateID returns a random update id for an exec ("exec-" and 24 hex
// digits).
func NewUpdateID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "exec-" + hex.EncodeToString(b[:])
}

// AttemptUpdateID is the update id of an activity's attempt (1-based) of
// the step base: "<base>/<attempt>".
func AttemptUpdateID(base string, attempt int32) string {
	return fmt.Sprintf("%s/%d", base, attempt)
}

// Session addresses one workspace's SessionWorkflow.
type Session struct {
	// Client is connected to the sessions' namespace.
	Client client.Client
	// TaskQueue is where a run started by this session's calls starts.
	TaskQueue string
	// WorkspaceID and WorkflowID name the session (sandboxapi.SessionWorkflowID).
	WorkspaceID, WorkflowID string
	// Policy applies to acquire and updates, StartPolicy to other updates
	// sent by update-with-start.
	Policy, StartPolicy Policy
}

// Open returns the session of workspace wsID on taskQueue with policy for
// both kinds of call. Errors: ErrInvalidArgument for a malformed id.
func Open(tc client.Client, taskQueue, wsID string, policy Policy) (Session, error) {
	wfID, err := sandboxapi.SessionWorkflowID(wsID)
	if err != nil {
		return Session{}, err
	}
	return Session{Client: tc, TaskQueue: taskQueue, WorkspaceID: wsID, WorkflowID: wfID, Policy: policy, StartPolicy: policy}, nil
}

// wait pauses d; false when ctx ends first.
func wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Acquire sends acquire by update-with-start (conflict policy
// USE_EXISTING): req creates or finds the workspace, nil resumes it by id
// (docs/API.md "Getting a session"). A run that is ending is handled by
// s.Policy. Errors: raw, as the package doc says.
func (s Session) Acquire(ctx context.Context, req *sandboxapi.WorkspaceRequest) (sandboxapi.Handle, error) {
	for attempt := 0; ; attempt++ {
		h, err := s.acquireOnce(ctx, req)
		if s.Policy.Next(attempt, err, false) == Wait && wait(ctx, s.Policy.Backoff) {
			continue
		}
		return h, err
	}
}

// startOptions are the options of a run this session's update-with-start
// starts; req is the acquire's request (nil: the workspace id only).
func (s Session) startOptions(req *sandboxapi.WorkspaceRequest) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       s.WorkflowID,
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    temporal.NewSearchAttributes(sandboxapi.SessionStartSearchAttributes(s.WorkspaceID, req)...),
		// Shown by the Web UI for the run this starts (docs/OPERATIONS.md);
		// ignored when the session is already running.
		StaticSummary: sandboxapi.SessionSummary(s.WorkspaceID, req),
		StaticDetails: sandboxapi.SessionDetails(s.WorkspaceID, req),
	}
}

// acquireOnce is one update-with-start of acquire.
func (s Session) acquireOnce(ctx context.Context, req *sandboxapi.WorkspaceRequest) (sandboxapi.Handle, error) {
	op := s.Client.NewWithStartWorkflowOperation(s.startOptions(req), sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: s.WorkspaceID, Request: req})
	h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   s.WorkflowID,
			UpdateName:   sandboxapi.UpdateAcquire,
			Args:         []any{sandboxapi.AcquireInput{Request: req}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var out sandboxapi.Handle
	if err == nil {
		err = h.Get(ctx, &out)
	}
	return out, err
}

// updateOptions are the options of update name with id ("" random) and
// argument arg (nil: none), waiting for stage.
func (s Session) updateOptions(name, id string, arg any, stage client.WorkflowUpdateStage) client.UpdateWorkflowOptions {
	o := client.UpdateWorkflowOptions{WorkflowID: s.WorkflowID, UpdateName: name, UpdateID: id, WaitForStage: stage}
	if arg != nil {
		o.Args = []any{arg}
	}
	return o
}

// Update sends update name with id ("" random) and arg (nil: none) to the
// session's run and stores its result in out; a run that is ending or gone
// is handled by s.Policy. Errors: raw, as the package doc says.
func (s Session) Update(ctx context.Context, name, id string, arg, out any) error {
	for attempt := 0; ; attempt++ {
		h, err := s.Client.UpdateWorkflow(ctx, s.updateOptions(name, id, arg, client.WorkflowUpdateStageCompleted))
		if err == nil {
			err = h.Get(ctx, out)
		}
		if err == nil || !s.again(ctx, attempt, &err) {
			return err
		}
	}
}

// Send sends update name with id and arg and waits until the session has
// accepted (validated) it, returning its handle; a run that is ending or
// gone is handled as by Update. Errors: the rejection, raw.
func (s Session) Send(ctx context.Context, name, id string, arg any) (client.WorkflowUpdateHandle, error) {
	for attempt := 0; ; attempt++ {
		h, err := s.Client.UpdateWorkflow(ctx, s.updateOptions(name, id, arg, client.WorkflowUpdateStageAccepted))
		if err == nil || !s.again(ctx, attempt, &err) {
			return h, err
		}
	}
}

// again carries out s.Policy's step after the failed send attempt and
// reports whether to send again: after a resume that succeeded, or after
// the pause. A gone run whose workspace was destroyed is not resumed: *err
// becomes WorkspaceNotFound (Destroyed).
func (s Session) again(ctx context.Context, attempt int, err *error) bool {
	switch s.Policy.Next(attempt, *err, true) {
	case Resume:
		if derr := s.Destroyed(ctx); derr != nil {
			*err = derr
			return false
		}
		_, rerr := s.Acquire(ctx, nil)
		return rerr == nil
	case Wait:
		return wait(ctx, s.Policy.Backoff)
	}
	return false
}

// Destroyed returns WorkspaceNotFound (a *temporal.ApplicationError, as
// the workflow returns it) when the session's latest run has ended with
// its workspace destroyed (SandboxState destroyed, docs/API.md "Session
// states"), nil otherwise, and nil when that cannot be told (the resume
// then finds out). Resuming such a workspace by id only fails, and would
// leave one more run behind (a row in the Web UI, and a describe of that
// run instead of the destroyed one).
func (s Session) Destroyed(ctx context.Context) error {
	d, err := s.Client.DescribeWorkflowExecution(ctx, s.WorkflowID, "")
	if err != nil {
		return nil
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	p := info.GetSearchAttributes().GetIndexedFields()[sandboxapi.SearchAttrState]
	var state string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &state) != nil || state != sandboxapi.StateDestroyed {
		return nil
	}
	return sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound,
		"workspace %s was destroyed; restore brings back what its destroy saved, an acquire with a full request starts its key fresh", s.WorkspaceID), true)
}

// UpdateWithStart sends update name with id ("" random) and arg (nil:
// none) by update-with-start (conflict policy USE_EXISTING, the session
// input naming only the workspace id), so it also reaches a workspace
// whose session is not running; a run that is ending is handled by
// s.StartPolicy. Errors: raw, as the package doc says.
func (s Session) UpdateWithStart(ctx context.Context, name, id string, arg, out any) error {
	for attempt := 0; ; attempt++ {
		op := s.Client.NewWithStartWorkflowOperation(s.startOptions(nil), sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: s.WorkspaceID})
		h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op, UpdateOptions: s.updateOptions(name, id, arg, client.WorkflowUpdateStageCompleted)})
		if err == nil {
			err = h.Get(ctx, out)
		}
		if err == nil {
			return nil
		}
		if s.StartPolicy.Next(attempt, err, false) == Wait && wait(ctx, s.StartPolicy.Backoff) {
			continue
		}
		return err
	}
}

// Call sends op with argument in and update id ("" random) as Update does
// and returns its result. An operation without arguments (sandboxapi.None)
// sends an empty object: every update then carries a payload the worker's
// codec sees, which a worker refusing plaintext
// (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION) requires.
func Call[In, Out any](ctx context.Context, s Session, op sandboxapi.Op[In, Out], id string, in In) (Out, error) {
	var out Out
	return out, s.Update(ctx, op.Name, id, in, &out)
}

// Outcome waits for the outcome of the update id sent earlier to the
// session's current run and stores its result in out. Errors: the update's
// own failure, or the service's NotFound (sandboxapi.FromTemporal:
// ErrWorkspaceNotFound) when the current run has no such update.
func (s Session) Outcome(ctx context.Context, id string, out any) error {
	return s.Client.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{WorkflowID: s.WorkflowID, UpdateID: id}).Get(ctx, out)
}
