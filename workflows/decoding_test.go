package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A malformed evict, pin or unpin signal (not an object, an unknown field,
// a wrongly typed value) is answered — pin_error naming the field, a failed
// EvictResult sent to its reply_to — and never holds the signal loop: the
// signals after it are handled and the session still releases into its
// dormant run. (Before, a payload that did not decode left the loop waiting
// for the next signal of the same name, so one of another name stayed
// pending forever and the run could never end: every operation was then
// refused with SessionReleased.)
func TestMalformedSignalsAreAnsweredAndNeverStallTheSession(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	fe := &fakeEviction{}
	fe.register(env)
	var replies []sandboxapi.EvictResult
	env.OnSignalExternalWorkflow(mock.Anything, "cron-1", "", sandboxapi.SignalEvictionReply, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			replies = append(replies, arg.(sandboxapi.EvictResult))
			return nil
		})
	req := *in.Request
	var acq, rel updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	states := map[string]sandboxapi.EvictionState{}
	query := func(name string, at time.Duration) {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(sandboxapi.QueryEviction)
			require.NoError(t, err)
			var st sandboxapi.EvictionState
			require.NoError(t, v.Get(&st))
			states[name] = st
		}, at)
	}
	until := env.Now().Add(48 * time.Hour)
	signal := func(at time.Duration, name string, arg any) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, arg) }, at)
	}
	signal(time.Second, sandboxapi.SignalPin, "not an object")
	query("not an object", 2*time.Second)
	signal(3*time.Second, sandboxapi.SignalPin, map[string]any{"request_id": "p1", "until": until, "untill": until})
	query("unknown field", 4*time.Second)
	signal(5*time.Second, sandboxapi.SignalUnpin, map[string]any{"Request_ID": "u1"})
	query("case-folded key", 6*time.Second)
	signal(7*time.Second, sandboxapi.SignalEvict, map[string]any{"request_id": "e1", "reply_to": "cron-1", "action": 5})
	signal(8*time.Second, sandboxapi.SignalPin, sandboxapi.PinRequest{RequestID: "p2", Until: &until})
	query("valid pin", 9*time.Second)
	update(env, 10*time.Second, sandboxapi.UpdateRelease, &rel, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)

	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)
	require.NoError(t, rel.err)
	for name, field := range map[string]string{"not an object": "", "unknown field": "untill", "case-folded key": "Request_ID"} {
		st := states[name]
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, st.PinErrorType, name)
		assert.Contains(t, st.PinError, field, name)
	}
	assert.Equal(t, "p1", states["unknown field"].LastPinRequest, "the request id is read when it can be")
	assert.Equal(t, "p2", states["valid pin"].LastPinRequest)
	assert.Empty(t, states["valid pin"].PinError)
	assert.Equal(t, int32(1), fe.pins.Load(), "only the valid pin reached the store")
	require.Len(t, replies, 1, "the malformed evict was answered")
	assert.Equal(t, "e1", replies[0].RequestID)
	assert.Equal(t, sandboxapi.OutcomeFailed, replies[0].Outcome)
	assert.Contains(t, replies[0].Reason, "action")
	assert.Zero(t, fe.evicts.Load()+fe.stops.Load(), "nothing was evicted")
}

// An eviction_reply the run cannot decode is ignored: before, the SDK's
// ReceiveWithTimeout dropped it and then panicked on the empty channel,
// failing every workflow task of the run (eviction stopped until the run's
// timeout; the schedule skips overlapping runs).
func TestMalformedEvictionReplyIsIgnored(t *testing.T) {
	env, _ := cronEnv(t)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(sandboxapi.SignalEvictionReply, "garbage") }, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvictionReply, map[string]any{"request_id": "h1/1/evict_workspace/ws-a", "outcome": "done", "colour": "red"})
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvictionReply, sandboxapi.EvictResult{RequestID: "h1/1/evict_workspace/ws-a", Action: sandboxapi.EvictionEvictWorkspace,
			ID: "ws-a", WorkspaceID: "ws-a", Outcome: sandboxapi.OutcomeDone, FreedBytes: 50})
	}, 30*time.Second)
	env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, sandboxapi.EvictionInput{ReplyTimeout: 2 * time.Minute})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res sandboxapi.EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	var got sandboxapi.EvictResult
	for _, r := range res.Hosts[0].Results {
		if r.ID == "ws-a" {
			got = r
		}
	}
	assert.Equal(t, sandboxapi.OutcomeDone, got.Outcome)
	assert.Equal(t, int64(50), got.FreedBytes, "the valid reply counted, not the malformed one")
}

// The arguments of CleanupWorkflow, EvictionCronWorkflow and
// TaskFanoutWorkflow are decoded strictly: a misspelt or case-folded field
// (a dry_run sent as "dryRun" would otherwise have been ignored, and the
// run destroyed or evicted for real) fails the run with InvalidArgument
// naming it, before any activity runs.
func TestWorkflowArgumentsAreDecodedStrictly(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	field := func(t *testing.T, err error) string {
		t.Helper()
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
		var d sandboxapi.ErrorDetails
		require.NoError(t, app.Details(&d))
		return d.Field
	}
	t.Run("cleanup", func(t *testing.T) {
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
		c := &fakeCleanup{}
		c.register(env)
		env.ExecuteWorkflow(sandboxapi.CleanupWorkflowType, map[string]any{"user_id": "alice", "project_id": "p1", "dryRun": true})
		require.True(t, env.IsWorkflowCompleted())
		assert.Equal(t, "dryRun", field(t, env.GetWorkflowError()))
		assert.Empty(t, c.destroyed)
	})
	t.Run("cleanup with a duplicate key", func(t *testing.T) {
		// A new run refuses it (changeDuplicateKeys); encoding/json alone
		// would have destroyed bob's workspaces, the last value.
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
		c := &fakeCleanup{}
		c.register(env)
		env.ExecuteWorkflow(sandboxapi.CleanupWorkflowType, json.RawMessage(`{"user_id": "alice", "project_id": "p1", "user_id": "bob"}`))
		require.True(t, env.IsWorkflowCompleted())
		assert.Equal(t, "user_id", field(t, env.GetWorkflowError()))
		assert.Empty(t, c.destroyed)
	})
	t.Run("eviction", func(t *testing.T) {
		env, sent := cronEnv(t)
		env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, map[string]any{"DRY_RUN": true})
		require.True(t, env.IsWorkflowCompleted())
		assert.Equal(t, "DRY_RUN", field(t, env.GetWorkflowError()))
		assert.Empty(t, *sent)
	})
	t.Run("fanout", func(t *testing.T) {
		f := &fakeFanout{}
		env := newFanoutEnv(f)
		env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, map[string]any{
			"conversation_workspace_id": sandboxapi.WorkspaceIDForKey("edit|u|p|c"),
			"tasks":                     []map[string]any{{"task_id": "t1", "scirpt": "rm -rf ."}},
		})
		require.True(t, env.IsWorkflowCompleted())
		assert.Equal(t, "tasks[0].scirpt", field(t, env.GetWorkflowError()))
		assert.Empty(t, f.started)
	})
}

// A malformed complete_task (an unknown field, a wrongly typed value, not an
// object) is ignored — a "succeeded" misspelt as "succeded" must not count
// as a verdict — and the valid signal after it completes the task.
func TestMalformedCompleteTaskIsIgnored(t *testing.T) {
	f := &fakeFanout{}
	env := newFanoutEnv(f)
	in := sandboxapi.FanoutInput{
		ConversationWorkspaceID: sandboxapi.WorkspaceIDForKey("edit|u|p|c"),
		TaskTimeoutS:            600,
		Tasks:                   []sandboxapi.TaskSpec{{TaskID: "a1"}},
	}
	var mid sandboxapi.FanoutReport
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, map[string]any{"task_id": "a1", "succeded": true})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, map[string]any{"task_id": "a1", "succeeded": "yes"})
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, "a1")
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(sandboxapi.QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
		env.SignalWorkflow(sandboxapi.SignalCompleteTask, sandboxapi.CompleteTaskSignal{TaskID: "a1", Succeeded: false, Message: "gave up"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(sandboxapi.TaskFanoutWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r sandboxapi.FanoutReport
	require.NoError(t, env.GetWorkflowResult(&r))
	require.Len(t, mid.Tasks, 1)
	assert.Equal(t, sandboxapi.TaskWaiting, mid.Tasks[0].Status, "no malformed signal completed the task")
	require.Len(t, r.Tasks, 1)
	assert.Equal(t, sandboxapi.TaskFailed, r.Tasks[0].Status)
	assert.Equal(t, "gave up", r.Tasks[0].Message)
	assert.Empty(t, f.merged)
}
