package workflows

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

type fakeEviction struct {
	evicts atomic.Int32
	stops  atomic.Int32
	pins   atomic.Int32
	mu     sync.Mutex
	pinned *time.Time
}

func (f *fakeEviction) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(_ context.Context, in EvictActivityInput) (EvictResult, error) {
		f.evicts.Add(1)
		return EvictResult{Action: eviction.ActionEvictWorkspace, ID: in.WorkspaceID, WorkspaceID: in.WorkspaceID, Outcome: OutcomeDone, FreedBytes: 42}, nil
	}, ActivityEvictWorkspace)
	reg(func(_ context.Context, in EvictActivityInput) (EvictResult, error) {
		f.stops.Add(1)
		return EvictResult{Action: in.Request.Action, ID: sandbox.RuntimeIDFor(in.WorkspaceID), WorkspaceID: in.WorkspaceID, Outcome: OutcomeDone}, nil
	}, ActivityEvictRuntime)
	reg(func(_ context.Context, in SetPinInput) error {
		f.pins.Add(1)
		f.mu.Lock()
		f.pinned = in.Until
		f.mu.Unlock()
		return nil
	}, ActivitySetPin)
}

// An evict signal arriving during a long exec waits for it (the session's
// mutating lock), reports back to the requesting run, and ends the session.
func TestSessionEvictWaitsForRunningExec(t *testing.T) {
	env, _, in := newEnv(t, sandbox.ModeEdit, HostTaskQueue(testHost))
	fe := &fakeEviction{}
	fe.register(env)
	env.OnActivity(ActivityExec, mock.Anything, mock.Anything).After(10*time.Minute).Return(sandbox.ExecResult{ExitCode: 0, Stdout: []byte("done")}, nil)
	var replies atomic.Int32
	env.OnSignalExternalWorkflow(mock.Anything, "cron-1", "", SignalEvictionReply, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			if r, ok := arg.(EvictResult); ok && r.RequestID == "r1" && r.Outcome == OutcomeDone {
				replies.Add(1)
			}
			return nil
		})
	req := *in.Request
	var acq, ex updateResult
	update(env, 0, UpdateAcquire, &acq, AcquireInput{Request: &req})
	update(env, time.Second, UpdateExec, &ex, sandbox.ExecRequest{Cmd: []string{"sleep", "600"}})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalEvict, EvictRequest{RequestID: "r1", ReplyTo: "cron-1", Action: eviction.ActionEvictWorkspace, AllowUnsaved: true})
	}, 2*time.Minute)
	var during EvictionState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryEviction)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 5*time.Minute)
	env.ExecuteWorkflow(SessionWorkflowType, in)

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, ex.err)
	assert.Nil(t, during.LastEvict, "no eviction while the command runs")
	assert.False(t, during.Evicted)
	assert.Equal(t, int32(1), fe.evicts.Load())
	assert.Equal(t, int32(1), replies.Load(), "the result went back to the requesting run")
	var d SessionDescription
	v, err := env.QueryWorkflow(QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, StateEvicted, d.State)
	assert.Less(t, env.Now().Sub(d.LastActivity), time.Minute, "the run ended right after the eviction")
}

// A signal-only run (signal-with-start, no acquire) handles its signal and
// completes at once as "closed" instead of waiting for an acquire.
func TestSessionPinOnlyRunCompletes(t *testing.T) {
	env, _, in := newEnv(t, sandbox.ModeEdit, DefaultTaskQueue)
	fe := &fakeEviction{}
	fe.register(env)
	until := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPin, PinRequest{RequestID: "p1", Until: &until})
	}, time.Second)
	start := env.Now()
	env.ExecuteWorkflow(SessionWorkflowType, SessionInput{WorkspaceID: in.WorkspaceID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Less(t, env.Now().Sub(start), acquireWait, "did not wait for an acquire")
	assert.Equal(t, int32(1), fe.pins.Load())
	require.NotNil(t, fe.pinned)
	assert.True(t, fe.pinned.Equal(until))
	var st EvictionState
	v, err := env.QueryWorkflow(QueryEviction)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	assert.Equal(t, "p1", st.LastPinRequest)
	assert.Empty(t, st.PinError)
	var d SessionDescription
	v, err = env.QueryWorkflow(QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, StateClosed, d.State)
}

func TestSessionRefusesPinInThePast(t *testing.T) {
	env, _, in := newEnv(t, sandbox.ModeEdit, DefaultTaskQueue)
	fe := &fakeEviction{}
	fe.register(env)
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPin, PinRequest{RequestID: "p0", Until: &past}) }, time.Second)
	env.ExecuteWorkflow(SessionWorkflowType, SessionInput{WorkspaceID: in.WorkspaceID})
	require.NoError(t, env.GetWorkflowError())
	assert.Zero(t, fe.pins.Load())
	var st EvictionState
	v, err := env.QueryWorkflow(QueryEviction)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	assert.Equal(t, sandbox.ErrInvalidArgument.Type, st.PinErrorType)
}

func cronEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *[]SessionRequest) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(EvictionCronWorkflow, workflow.RegisterOptions{Name: EvictionCronWorkflowType})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "cron-1", TaskQueue: DefaultTaskQueue})
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context) (EvictionHostsResult, error) {
		return EvictionHostsResult{Hosts: []string{"h2", "h1"}}, nil
	}, ActivityEvictionHosts)
	reg(func(_ context.Context, in PlanEvictionInput) (PlanEvictionResult, error) {
		if in.HostID == "h2" {
			return PlanEvictionResult{}, errors.New("disk on fire")
		}
		return PlanEvictionResult{Plan: eviction.Plan{HostID: "h1", LowBytes: 700, Actions: []eviction.Action{
			{Kind: eviction.ActionStopRuntime, Tier: eviction.TierRuntimeIdle, ID: "rt-b", WorkspaceID: "ws-b", MinIdle: time.Minute},
			{Kind: eviction.ActionEvictWorkspace, Tier: eviction.TierDirtyTask, ID: "ws-a", WorkspaceID: "ws-a", SaveWork: true, MinIdle: time.Hour},
			{Kind: eviction.ActionRemoveRepoCache, Tier: eviction.TierRepoCacheLRU, ID: "rc-1", Bytes: 100},
		}}}, nil
	}, ActivityPlanEviction)
	var sent []SessionRequest
	reg(func(_ context.Context, in SignalEvictionsInput) (SignalEvictionsResult, error) {
		sent = append(sent, in.Requests...)
		return SignalEvictionsResult{}, nil
	}, ActivitySignalEvictions)
	reg(func(_ context.Context, in RemoveRepoCachesInput) (RemoveRepoCachesResult, error) {
		var out RemoveRepoCachesResult
		for _, a := range in.Actions {
			out.Results = append(out.Results, EvictResult{Action: a.Kind, ID: a.ID, Outcome: OutcomeDone, FreedBytes: a.Bytes})
		}
		return out, nil
	}, ActivityRemoveRepoCaches)
	return env, &sent
}

func TestEvictionCronRunsThroughSessions(t *testing.T) {
	env, sent := cronEnv(t)
	// Only the workspace eviction replies; the runtime stop stays pending.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalEvictionReply, EvictResult{RequestID: "h1/1/evict_workspace/ws-a", Action: eviction.ActionEvictWorkspace,
			ID: "ws-a", WorkspaceID: "ws-a", Outcome: OutcomeDone, FreedBytes: 50})
	}, 30*time.Second)
	env.ExecuteWorkflow(EvictionCronWorkflowType, EvictionInput{ReplyTimeout: 2 * time.Minute})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Len(t, *sent, 2)
	assert.Equal(t, "ws-b", (*sent)[0].WorkspaceID)
	assert.Equal(t, eviction.ActionStopRuntime, (*sent)[0].Request.Action)
	assert.Equal(t, "cron-1", (*sent)[1].Request.ReplyTo)
	assert.True(t, (*sent)[1].Request.AllowUnsaved)
	assert.Equal(t, time.Hour, (*sent)[1].Request.MinIdle)

	require.Len(t, res.Hosts, 2)
	assert.Equal(t, "h1", res.Hosts[0].HostID)
	assert.Equal(t, "h2", res.Hosts[1].HostID)
	assert.Contains(t, res.Hosts[1].Error, "disk on fire")
	outcomes := map[string]string{}
	for _, r := range res.Hosts[0].Results {
		outcomes[r.ID] = r.Outcome
	}
	assert.Equal(t, map[string]string{"rt-b": OutcomePending, "ws-a": OutcomeDone, "rc-1": OutcomeDone}, outcomes)
	assert.Equal(t, EvictionSummary{Hosts: 2, Planned: 3, Evicted: 1, CachesFreed: 1, Pending: 1, FreedBytes: 150}, res.Summary)
}

func TestEvictionCronDryRunOnlyPlans(t *testing.T) {
	env, sent := cronEnv(t)
	env.ExecuteWorkflow(EvictionCronWorkflowType, EvictionInput{DryRun: true, Hosts: []string{"h1"}})
	require.NoError(t, env.GetWorkflowError())
	var res EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Empty(t, *sent)
	require.Len(t, res.Hosts, 1)
	require.NotNil(t, res.Hosts[0].Plan)
	assert.Len(t, res.Hosts[0].Plan.Plan.Actions, 3)
	assert.Empty(t, res.Hosts[0].Results)
	assert.True(t, res.DryRun)
	assert.Equal(t, 3, res.Summary.Planned)
}
