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

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
	reg(func(_ context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
		f.evicts.Add(1)
		return sandboxapi.EvictResult{Action: sandboxapi.EvictionEvictWorkspace, ID: in.WorkspaceID, WorkspaceID: in.WorkspaceID, Outcome: sandboxapi.OutcomeDone, FreedBytes: 42}, nil
	}, wire.ActivityEvictWorkspace)
	reg(func(_ context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
		f.stops.Add(1)
		return sandboxapi.EvictResult{Action: in.Request.Action, ID: sandboxapi.RuntimeIDFor(in.WorkspaceID), WorkspaceID: in.WorkspaceID, Outcome: sandboxapi.OutcomeDone}, nil
	}, wire.ActivityEvictRuntime)
	reg(func(_ context.Context, in wire.SetPinInput) error {
		f.pins.Add(1)
		f.mu.Lock()
		f.pinned = in.Until
		f.mu.Unlock()
		return nil
	}, wire.ActivitySetPin)
}

// An evict signal arriving during a long exec waits for it (the session's
// mutating lock), reports back to the requesting run, and ends the session.
func TestSessionEvictWaitsForRunningExec(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	fe := &fakeEviction{}
	fe.register(env)
	env.OnActivity(wire.ActivityExecStart, mock.Anything, mock.Anything).After(10*time.Minute).Return(wire.ExecStartResult{Done: true, Result: sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("done")}}, nil)
	var replies atomic.Int32
	env.OnSignalExternalWorkflow(mock.Anything, "cron-1", "", sandboxapi.SignalEvictionReply, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			if r, ok := arg.(sandboxapi.EvictResult); ok && r.RequestID == "r1" && r.Outcome == sandboxapi.OutcomeDone {
				replies.Add(1)
			}
			return nil
		})
	req := *in.Request
	var acq, ex updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvict, sandboxapi.EvictRequest{RequestID: "r1", ReplyTo: "cron-1", Action: sandboxapi.EvictionEvictWorkspace, AllowUnsaved: true})
	}, 2*time.Minute)
	var during sandboxapi.EvictionState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(sandboxapi.QueryEviction)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 5*time.Minute)
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)

	require.True(t, env.IsWorkflowCompleted())
	requireDormant(t, env, sandboxapi.StateEvicted)
	require.NoError(t, ex.err)
	assert.Nil(t, during.LastEvict, "no eviction while the command runs")
	assert.False(t, during.Evicted)
	assert.Equal(t, int32(1), fe.evicts.Load())
	assert.Equal(t, int32(1), replies.Load(), "the result went back to the requesting run")
	var d sandboxapi.SessionDescription
	v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateEvicted, d.State)
	assert.Less(t, env.Now().Sub(d.LastActivity), time.Minute, "the run ended right after the eviction")
}

// A signal-only run (signal-with-start, no acquire) handles its signal and
// completes at once as "closed" instead of waiting for an acquire.
func TestSessionPinOnlyRunCompletes(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, sandboxapi.DefaultTaskQueue)
	fe := &fakeEviction{}
	fe.register(env)
	until := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalPin, sandboxapi.PinRequest{RequestID: "p1", Until: &until})
	}, time.Second)
	start := env.Now()
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: in.WorkspaceID})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Less(t, env.Now().Sub(start), acquireBeginWait, "did not wait for an acquire")
	assert.Equal(t, int32(1), fe.pins.Load())
	require.NotNil(t, fe.pinned)
	assert.True(t, fe.pinned.Equal(until))
	var st sandboxapi.EvictionState
	v, err := env.QueryWorkflow(sandboxapi.QueryEviction)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	assert.Equal(t, "p1", st.LastPinRequest)
	assert.Empty(t, st.PinError)
	var d sandboxapi.SessionDescription
	v, err = env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateClosed, d.State)
}

func TestSessionRefusesPinInThePast(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, sandboxapi.DefaultTaskQueue)
	fe := &fakeEviction{}
	fe.register(env)
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(sandboxapi.SignalPin, sandboxapi.PinRequest{RequestID: "p0", Until: &past}) }, time.Second)
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: in.WorkspaceID})
	require.NoError(t, env.GetWorkflowError())
	assert.Zero(t, fe.pins.Load())
	var st sandboxapi.EvictionState
	v, err := env.QueryWorkflow(sandboxapi.QueryEviction)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, st.PinErrorType)
}

func cronEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *[]wire.SessionRequest) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(EvictionCronWorkflow, workflow.RegisterOptions{Name: sandboxapi.EvictionCronWorkflowType})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "cron-1", TaskQueue: sandboxapi.DefaultTaskQueue})
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context) (wire.EvictionHostsResult, error) {
		return wire.EvictionHostsResult{Hosts: []string{"h2", "h1"}}, nil
	}, wire.ActivityEvictionHosts)
	reg(func(_ context.Context, in wire.PlanEvictionInput) (sandboxapi.PlanEvictionResult, error) {
		if in.HostID == "h2" {
			return sandboxapi.PlanEvictionResult{}, errors.New("disk on fire")
		}
		return sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{HostID: "h1", LowBytes: 700, Actions: []sandboxapi.EvictionAction{
			{Kind: sandboxapi.EvictionStopRuntime, Tier: sandboxapi.TierRuntimeIdle, ID: "rt-b", WorkspaceID: "ws-b", MinIdle: time.Minute},
			{Kind: sandboxapi.EvictionEvictWorkspace, Tier: sandboxapi.TierDirtyTask, ID: "ws-a", WorkspaceID: "ws-a", SaveWork: true, MinIdle: time.Hour},
			{Kind: sandboxapi.EvictionRemoveRepoCache, Tier: sandboxapi.TierRepoCacheLRU, ID: "rc-1", Bytes: 100},
		}}}, nil
	}, wire.ActivityPlanEviction)
	var sent []wire.SessionRequest
	reg(func(_ context.Context, in wire.SignalEvictionsInput) (wire.SignalEvictionsResult, error) {
		sent = append(sent, in.Requests...)
		return wire.SignalEvictionsResult{}, nil
	}, wire.ActivitySignalEvictions)
	reg(func(_ context.Context, in wire.RemoveRepoCachesInput) (wire.RemoveRepoCachesResult, error) {
		var out wire.RemoveRepoCachesResult
		for _, a := range in.Actions {
			out.Results = append(out.Results, sandboxapi.EvictResult{Action: a.Kind, ID: a.ID, Outcome: sandboxapi.OutcomeDone, FreedBytes: a.Bytes})
		}
		return out, nil
	}, wire.ActivityRemoveRepoCaches)
	return env, &sent
}

func TestEvictionCronRunsThroughSessions(t *testing.T) {
	env, sent := cronEnv(t)
	// Only the workspace eviction replies; the runtime stop stays pending.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvictionReply, sandboxapi.EvictResult{RequestID: "h1/1/evict_workspace/ws-a", Action: sandboxapi.EvictionEvictWorkspace,
			ID: "ws-a", WorkspaceID: "ws-a", Outcome: sandboxapi.OutcomeDone, FreedBytes: 50})
	}, 30*time.Second)
	env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, sandboxapi.EvictionInput{ReplyTimeout: 2 * time.Minute})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res sandboxapi.EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Len(t, *sent, 2)
	assert.Equal(t, "ws-b", (*sent)[0].WorkspaceID)
	assert.Equal(t, sandboxapi.EvictionStopRuntime, (*sent)[0].Request.Action)
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
	assert.Equal(t, map[string]string{"rt-b": sandboxapi.OutcomePending, "ws-a": sandboxapi.OutcomeDone, "rc-1": sandboxapi.OutcomeDone}, outcomes)
	assert.Equal(t, sandboxapi.EvictionSummary{Hosts: 2, Planned: 3, Evicted: 1, CachesFreed: 1, Pending: 1, FreedBytes: 150}, res.Summary)
}

func TestEvictionCronDryRunOnlyPlans(t *testing.T) {
	env, sent := cronEnv(t)
	env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, sandboxapi.EvictionInput{DryRun: true, Hosts: []string{"h1"}})
	require.NoError(t, env.GetWorkflowError())
	var res sandboxapi.EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Empty(t, *sent)
	require.Len(t, res.Hosts, 1)
	require.NotNil(t, res.Hosts[0].Plan)
	assert.Len(t, res.Hosts[0].Plan.Plan.Actions, 3)
	assert.Empty(t, res.Hosts[0].Results)
	assert.True(t, res.DryRun)
	assert.Equal(t, 3, res.Summary.Planned)
}

// Orphan runtimes are deleted by their host (never sent to a session: their
// workspace does not exist), counted apart, and the run's Actions filter
// reaches every host's planning.
func TestEvictionCronDeletesOrphanRuntimesOnTheirHost(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(EvictionCronWorkflow, workflow.RegisterOptions{Name: sandboxapi.EvictionCronWorkflowType})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "cron-2", TaskQueue: sandboxapi.DefaultTaskQueue})
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context) (wire.EvictionHostsResult, error) {
		return wire.EvictionHostsResult{Hosts: []string{"h1"}}, nil
	}, wire.ActivityEvictionHosts)
	var planned []sandboxapi.EvictionActionKind
	reg(func(_ context.Context, in wire.PlanEvictionInput) (sandboxapi.PlanEvictionResult, error) {
		planned = in.Actions
		return sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{HostID: "h1", Actions: []sandboxapi.EvictionAction{
			{Kind: sandboxapi.EvictionDeleteOrphanRuntime, Tier: sandboxapi.TierRuntimeOrphan, ID: "rt-gone", WorkspaceID: "ws-gone"},
			{Kind: sandboxapi.EvictionDeleteOrphanRuntime, Tier: sandboxapi.TierRuntimeOrphan, ID: "rt-back", WorkspaceID: "ws-back"},
		}}}, nil
	}, wire.ActivityPlanEviction)
	var sent []wire.SessionRequest
	reg(func(_ context.Context, in wire.SignalEvictionsInput) (wire.SignalEvictionsResult, error) {
		sent = append(sent, in.Requests...)
		return wire.SignalEvictionsResult{}, nil
	}, wire.ActivitySignalEvictions)
	var asked []string
	reg(func(_ context.Context, in wire.DeleteOrphanRuntimesInput) (wire.DeleteOrphanRuntimesResult, error) {
		out := wire.DeleteOrphanRuntimesResult{}
		for _, a := range in.Actions {
			asked = append(asked, in.HostID+"/"+a.ID)
			o := sandboxapi.OutcomeDone
			if a.ID == "rt-back" {
				o = sandboxapi.OutcomeSkipped
			}
			out.Results = append(out.Results, sandboxapi.EvictResult{Action: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID, Outcome: o})
		}
		return out, nil
	}, wire.ActivityDeleteOrphanRuntimes)

	env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, sandboxapi.EvictionInput{Actions: []sandboxapi.EvictionActionKind{sandboxapi.EvictionDeleteOrphanRuntime}})
	require.NoError(t, env.GetWorkflowError())
	var res sandboxapi.EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, []sandboxapi.EvictionActionKind{sandboxapi.EvictionDeleteOrphanRuntime}, planned)
	assert.Empty(t, sent, "no session is asked: the workspaces are gone")
	assert.Equal(t, []string{"h1/rt-gone", "h1/rt-back"}, asked)
	require.Len(t, res.Hosts, 1)
	require.Len(t, res.Hosts[0].Results, 2)
	assert.Equal(t, sandboxapi.EvictionSummary{Hosts: 1, Planned: 2, OrphansDeleted: 1, Skipped: 1}, res.Summary)
}
