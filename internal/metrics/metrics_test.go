package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestActivitiesAreMeasuredByTypeAndResult(t *testing.T) {
	m := New(Options{RuntimeKind: "bwrap"})
	exec := wire.ExecActivityInput{WorkspaceID: "ws-1"}
	m.ObserveActivity(wire.ActivityExec, exec, sandboxapi.ExecResult{ExitCode: 0}, nil, 20*time.Millisecond)
	m.ObserveActivity(wire.ActivityExec, exec, sandboxapi.ExecResult{ExitCode: 3}, nil, 10*time.Millisecond)
	m.ObserveActivity(wire.ActivityExec, exec, sandboxapi.ExecResult{ExitCode: 124, TimedOut: true}, nil, time.Second)
	m.ObserveActivity(wire.ActivityExec, exec, sandboxapi.ExecResult{}, context.Canceled, time.Millisecond)
	m.ObserveActivity(wire.ActivityExec, exec, sandboxapi.ExecResult{}, sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "down"), false), time.Millisecond)
	for outcome, n := range map[string]float64{ExecOK: 1, ExecNonZero: 1, ExecTimedOut: 1, ExecCancelled: 1, ExecError: 1} {
		assert.Equal(t, n, testutil.ToFloat64(m.execResults.WithLabelValues(outcome, "bwrap")), outcome)
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(m.opErrors.WithLabelValues(wire.ActivityExec, "bwrap", sandboxapi.ErrRuntimeUnavailable.Type)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.opErrors.WithLabelValues(wire.ActivityExec, "bwrap", "canceled")))
	assert.Equal(t, 1, testutil.CollectAndCount(m.opDuration), "one histogram series: sandbox.Exec on bwrap")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeStarts.WithLabelValues("bwrap")), "the first command started the runtime, the next ones found it running")

	m.ObserveActivity(wire.ActivityHibernate, wire.WorkspaceActivityInput{WorkspaceID: "ws-1"}, sandboxapi.HibernateResult{Stopped: true}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityHibernate, wire.WorkspaceActivityInput{WorkspaceID: "ws-1"}, sandboxapi.HibernateResult{Stopped: true}, nil, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeStops.WithLabelValues("bwrap", "hibernate")), "a stop of a stopped runtime is no stop")

	m.ObserveActivity(wire.ActivityPlanEviction, wire.PlanEvictionInput{HostID: "h"}, sandboxapi.PlanEvictionResult{Plan: sandboxapi.EvictionPlan{
		Usage: sandboxapi.EvictionUsage{UsedBytes: 700, BudgetBytes: 1000, RepoCacheBytes: 300, WorkspaceBytes: 200}, Pressure: "none", HighBytes: 850, LowBytes: 700, SevereBytes: 950}}, nil, time.Millisecond)
	assert.Equal(t, 700.0, testutil.ToFloat64(m.diskUsed))
	assert.Equal(t, 1000.0, testutil.ToFloat64(m.diskBudget))
	assert.Equal(t, 300.0, testutil.ToFloat64(m.repoCacheBytes))
	assert.Equal(t, 200.0, testutil.ToFloat64(m.workspaceBytes))
	assert.Equal(t, 950.0, testutil.ToFloat64(m.diskWater.WithLabelValues("severe")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.evictionPlans.WithLabelValues("none")))

	req := sandboxapi.EvictRequest{Action: sandboxapi.EvictionEvictWorkspace, Tier: sandboxapi.TierCleanEdit}
	m.ObserveActivity(wire.ActivityEvictWorkspace, wire.EvictActivityInput{WorkspaceID: "ws-2", Request: req}, sandboxapi.EvictResult{Action: req.Action, Tier: req.Tier, Outcome: sandboxapi.OutcomeBlocked}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityEvictWorkspace, wire.EvictActivityInput{WorkspaceID: "ws-2", Request: req}, nil, errors.New("boom"), time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.evictionActions.WithLabelValues(string(req.Action), string(req.Tier), sandboxapi.OutcomeBlocked)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.evictionActions.WithLabelValues(string(req.Action), string(req.Tier), sandboxapi.OutcomeFailed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.opErrors.WithLabelValues(wire.ActivityEvictWorkspace, "bwrap", "other")))
}

type failingCreds struct{ err error }

func (f failingCreds) Credential(context.Context, sandbox.AuthScope) (*sandbox.Credential, error) {
	return nil, f.err
}

func TestCredentialFailuresAreCountedByType(t *testing.T) {
	m := New(Options{})
	_, err := m.Credentials(failingCreds{sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "bad file")}).Credential(context.Background(), sandbox.AuthScope{})
	require.Error(t, err)
	_, err = m.Credentials(failingCreds{nil}).Credential(context.Background(), sandbox.AuthScope{})
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.credFailures.WithLabelValues("resolve", sandboxapi.ErrRepoAuthFailed.Type)))
	assert.Equal(t, 1, testutil.CollectAndCount(m.credFailures), "no credential (public repository) is no failure")
	assert.Nil(t, m.Credentials(nil))
	assert.Nil(t, m.Access(nil))
}

func TestServedPageHasTheRegistry(t *testing.T) {
	m := New(Options{RuntimeKind: "local",
		Workspaces: func(context.Context) ([]sandboxapi.Workspace, error) {
			return []sandboxapi.Workspace{{Mode: sandboxapi.ModeEdit, State: sandboxapi.WorkspaceReady, Dirty: true}, {Mode: sandboxapi.ModeTask, State: sandboxapi.WorkspaceEvicted}}, nil
		}})
	m.ObserveTransfer("clone", 2*time.Second, 4096, nil)
	m.ObserveTransfer("fetch", time.Second, 0, errors.New("unreachable"))
	addr, stop, err := m.Serve("127.0.0.1:0")
	require.NoError(t, err)
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(body)
	for _, want := range []string{
		`sandbox_repo_transfer_bytes_total{op="clone"} 4096`,
		`sandbox_repo_transfer_duration_seconds_count{op="fetch",outcome="error"} 1`,
		`sandbox_workspaces{mode="edit",state="ready"} 1`,
		`sandbox_workspaces{mode="task",state="evicted"} 1`,
		`sandbox_workspaces{mode="analysis",state="ready"} 0`,
		`sandbox_workspaces_dirty{mode="edit"} 1`,
		`sandbox_runtimes_running{runtime_kind="local"} 0`,
		"go_goroutines",
	} {
		assert.Contains(t, page, want)
	}
}

// The activities the lifecycle and remote runtimes added: exec's wire
// result (the command's result plus the replica), destroy, and the orphan
// runtime deletions of an eviction run.
func TestWireExecDestroyAndOrphanDeletions(t *testing.T) {
	m := New(Options{RuntimeKind: "daytona"})
	exec := wire.ExecActivityInput{WorkspaceID: "ws-1"}
	m.ObserveActivity(wire.ActivityExec, exec, wire.ExecActivityResult{ExecResult: sandboxapi.ExecResult{ExitCode: 0}, RuntimeReplica: &sandboxapi.RuntimeReplica{Synced: true}}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityExec, exec, wire.ExecActivityResult{ExecResult: sandboxapi.ExecResult{ExitCode: 2}}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityExec, exec, wire.ExecActivityResult{ExecResult: sandboxapi.ExecResult{ExitCode: 124, TimedOut: true}}, nil, time.Millisecond)
	for outcome, n := range map[string]float64{ExecOK: 1, ExecNonZero: 1, ExecTimedOut: 1, ExecError: 0} {
		assert.Equal(t, n, testutil.ToFloat64(m.execResults.WithLabelValues(outcome, "daytona")), outcome)
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeStarts.WithLabelValues("daytona")))

	m.ObserveActivity(wire.ActivityDestroy, wire.DestroyActivityInput{WorkspaceID: "ws-1"}, sandboxapi.DestroyResult{WorkspaceID: "ws-1", Existed: true}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityDestroy, wire.DestroyActivityInput{WorkspaceID: "ws-1"}, sandboxapi.DestroyResult{WorkspaceID: "ws-1", Existed: true}, nil, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeStops.WithLabelValues("daytona", "destroy")), "destroy stopped the running runtime once")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.runtimesRunning))

	del := sandboxapi.EvictionAction{Kind: sandboxapi.EvictionDeleteOrphanRuntime, ID: "rt-1"}
	m.ObserveActivity(wire.ActivityDeleteOrphanRuntimes, wire.DeleteOrphanRuntimesInput{HostID: "h", Actions: []sandboxapi.EvictionAction{del, del}},
		wire.DeleteOrphanRuntimesResult{Results: []sandboxapi.EvictResult{{Action: del.Kind, ID: "rt-1", Outcome: sandboxapi.OutcomeDone}, {Action: del.Kind, ID: "rt-2", Outcome: sandboxapi.OutcomeFailed}}}, nil, time.Millisecond)
	m.ObserveActivity(wire.ActivityDeleteOrphanRuntimes, wire.DeleteOrphanRuntimesInput{HostID: "h", Actions: []sandboxapi.EvictionAction{del}}, nil, errors.New("host down"), time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.evictionActions.WithLabelValues(string(del.Kind), "", sandboxapi.OutcomeDone)))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.evictionActions.WithLabelValues(string(del.Kind), "", sandboxapi.OutcomeFailed)), "one failed result, one failed activity")
}

// The exec activities' payloads (wire.ExecPayload, wire.ExecStartPayload)
// count as their typed results do, raw or not.
func TestExecPayloadsAreMeasuredByTheirResult(t *testing.T) {
	m := New(Options{RuntimeKind: "bwrap"})
	exec := wire.ExecActivityInput{WorkspaceID: "ws-1"}
	for _, raw := range []bool{true, false} {
		p, err := wire.ExecPayload(wire.ExecActivityResult{ExecResult: sandboxapi.ExecResult{ExitCode: 3, Stdout: []byte("x")}}, raw)
		require.NoError(t, err)
		m.ObserveActivity(wire.ActivityExec, exec, p, nil, time.Millisecond)
		p, err = wire.ExecStartPayload(wire.ExecStartResult{Done: true, Result: sandboxapi.ExecResult{ExitCode: 124, TimedOut: true}}, raw)
		require.NoError(t, err)
		m.ObserveActivity(wire.ActivityExecStart, exec, p, nil, time.Millisecond)
		p, err = wire.ExecStartPayload(wire.ExecStartResult{}, raw) // still running: counted by the Exec that waits
		require.NoError(t, err)
		m.ObserveActivity(wire.ActivityExecStart, exec, p, nil, time.Millisecond)
	}
	for outcome, n := range map[string]float64{ExecOK: 0, ExecNonZero: 2, ExecTimedOut: 2, ExecError: 0} {
		assert.Equal(t, n, testutil.ToFloat64(m.execResults.WithLabelValues(outcome, "bwrap")), outcome)
	}
}
