package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The run's Hosts narrow the store's hosts and add the ones it does not
// know; the result is sorted, each host once.
func TestSelectHosts(t *testing.T) {
	assert.Equal(t, []string{"a", "b", "c"}, selectHosts([]string{"c", "a", "b", "a"}, nil))
	assert.Equal(t, []string{"b", "z"}, selectHosts([]string{"c", "a", "b"}, []string{"z", "b", "b"}))
	assert.Empty(t, selectHosts(nil, nil))
	known := []string{"c", "a"}
	selectHosts(known, []string{"a"})
	selectHosts(known, nil)
	assert.Equal(t, []string{"c", "a"}, known, "the store's list is not changed")
}

// Runtime and workspace actions become session requests with a pending
// result each; repo caches and orphan runtimes stay with their host, and
// hosts without a plan are skipped.
func TestSessionEvictionsOfThePlannedActions(t *testing.T) {
	hosts := []sandboxapi.HostEvictionResult{
		{HostID: "h0", Error: "disk on fire"},
		{HostID: "h1", Plan: &sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{Actions: []sandboxapi.EvictionAction{
			{Kind: sandboxapi.EvictionRemoveRepoCache, ID: "rc-1"},
			{Kind: sandboxapi.EvictionStopRuntime, Tier: sandboxapi.TierRuntimeIdle, ID: "rt-b", WorkspaceID: "ws-b", MinIdle: time.Minute},
			{Kind: sandboxapi.EvictionDeleteOrphanRuntime, ID: "rt-gone", WorkspaceID: "ws-gone"},
		}}}},
		{HostID: "h2", Plan: &sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{Actions: []sandboxapi.EvictionAction{
			{Kind: sandboxapi.EvictionEvictWorkspace, Tier: sandboxapi.TierDirtyTask, ID: "ws-a", WorkspaceID: "ws-a", SaveWork: true, MinIdle: time.Hour},
		}}}},
	}
	reqs, where := sessionEvictions(hosts, "cron-9")
	require.Len(t, reqs, 2)
	assert.Equal(t, wire.SessionRequest{WorkspaceID: "ws-b", Request: sandboxapi.EvictRequest{RequestID: "h1/0/stop_runtime/rt-b", ReplyTo: "cron-9",
		Action: sandboxapi.EvictionStopRuntime, Tier: sandboxapi.TierRuntimeIdle, MinIdle: time.Minute}}, reqs[0])
	assert.Equal(t, "h2/1/evict_workspace/ws-a", reqs[1].Request.RequestID)
	assert.True(t, reqs[1].Request.AllowUnsaved)
	assert.Equal(t, map[string]resultSlot{"h1/0/stop_runtime/rt-b": {1, 0}, "h2/1/evict_workspace/ws-a": {2, 0}}, where)
	assert.Empty(t, hosts[0].Results)
	require.Len(t, hosts[1].Results, 1)
	assert.Equal(t, sandboxapi.EvictResult{RequestID: "h1/0/stop_runtime/rt-b", Action: sandboxapi.EvictionStopRuntime, Tier: sandboxapi.TierRuntimeIdle,
		ID: "rt-b", WorkspaceID: "ws-b", Outcome: sandboxapi.OutcomePending}, hosts[1].Results[0])
}

func TestPlannedActionsOfAKind(t *testing.T) {
	hr := &sandboxapi.HostEvictionResult{Plan: &sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{Actions: []sandboxapi.EvictionAction{
		{Kind: sandboxapi.EvictionRemoveRepoCache, ID: "rc-2"}, {Kind: sandboxapi.EvictionStopRuntime, ID: "rt"}, {Kind: sandboxapi.EvictionRemoveRepoCache, ID: "rc-1"},
	}}}}
	got := plannedActions(hr, sandboxapi.EvictionRemoveRepoCache)
	require.Len(t, got, 2)
	assert.Equal(t, "rc-2", got[0].ID, "plan order is kept")
	assert.Empty(t, plannedActions(&sandboxapi.HostEvictionResult{HostID: "h"}, sandboxapi.EvictionRemoveRepoCache))
}

func TestNotPickedUpIsOnlyScheduleToStart(t *testing.T) {
	assert.True(t, notPickedUp(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)))
	assert.False(t, notPickedUp(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)))
	assert.False(t, notPickedUp(errors.New("schedule to start")))
}

// A request whose signal was not delivered is failed at once, a reply to a
// request of another run is ignored, and the run stops waiting when every
// delivered request has replied (long before the reply timeout).
func TestEvictionCronUndeliveredAndUnknownReplies(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(EvictionCronWorkflow, workflow.RegisterOptions{Name: sandboxapi.EvictionCronWorkflowType})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "cron-3", TaskQueue: sandboxapi.DefaultTaskQueue})
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context) (wire.EvictionHostsResult, error) {
		return wire.EvictionHostsResult{Hosts: []string{"h1"}}, nil
	}, wire.ActivityEvictionHosts)
	reg(func(_ context.Context, in wire.PlanEvictionInput) (sandboxapi.PlanEvictionResult, error) {
		return sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{HostID: "h1", Actions: []sandboxapi.EvictionAction{
			{Kind: sandboxapi.EvictionStopRuntime, ID: "rt-a", WorkspaceID: "ws-a"},
			{Kind: sandboxapi.EvictionStopRuntime, ID: "rt-b", WorkspaceID: "ws-b"},
		}}}, nil
	}, wire.ActivityPlanEviction)
	reg(func(_ context.Context, in wire.SignalEvictionsInput) (wire.SignalEvictionsResult, error) {
		return wire.SignalEvictionsResult{Failed: map[string]string{in.Requests[1].Request.RequestID: "no such workflow"}}, nil
	}, wire.ActivitySignalEvictions)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvictionReply, sandboxapi.EvictResult{RequestID: "h1/0/stop_runtime/rt-other-run", Outcome: sandboxapi.OutcomeDone})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(sandboxapi.SignalEvictionReply, sandboxapi.EvictResult{RequestID: "h1/0/stop_runtime/rt-a", Action: sandboxapi.EvictionStopRuntime,
			ID: "rt-a", WorkspaceID: "ws-a", Outcome: sandboxapi.OutcomeDone})
	}, 20*time.Second)
	start := env.Now()
	env.ExecuteWorkflow(sandboxapi.EvictionCronWorkflowType, sandboxapi.EvictionInput{ReplyTimeout: time.Hour})
	require.NoError(t, env.GetWorkflowError())
	var res sandboxapi.EvictionRunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Less(t, res.FinishedAt.Sub(start), 30*time.Minute, "the run waited for the reply timeout although every request had replied")
	require.Len(t, res.Hosts, 1)
	require.Len(t, res.Hosts[0].Results, 2)
	assert.Equal(t, sandboxapi.OutcomeDone, res.Hosts[0].Results[0].Outcome)
	assert.Equal(t, sandboxapi.OutcomeFailed, res.Hosts[0].Results[1].Outcome)
	assert.Equal(t, "signal not delivered: no such workflow", res.Hosts[0].Results[1].Reason)
}
