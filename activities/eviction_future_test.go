package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A last use in the future (a clock that jumped back, another host's skewed
// clock, a bad row) must not exempt a workspace, its runtime or its repo
// cache from eviction forever: the plan resets each such time to now in the
// store (with a note), so a day later the clean analysis workspace is
// evicted and its runtime stopped (docs/DESIGN.md "Eviction policy").
func TestPlanEvictionResetsFutureLastUse(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	clock := time.Now().UTC().Truncate(time.Second)
	h.acts.Now = func() time.Time { return clock }
	ws := h.acquire(h.request(sandboxapi.ModeAnalysis, "")).Workspace

	future := clock.Add(10 * 365 * 24 * time.Hour)
	row, err := h.store.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	row.LastUsedAt = future
	require.NoError(t, h.store.UpdateWorkspace(ctx, row))
	cache, err := h.store.GetRepoCache(ctx, row.RepoCacheID)
	require.NoError(t, err)
	cache.LastUsedAt = future
	require.NoError(t, h.store.UpsertRepoCache(ctx, cache))
	rt := sandbox.RuntimeRecord{ID: "rt-future", WorkspaceID: ws.ID, BackendKind: "local", BackendRuntimeID: "rt-future",
		State: sandbox.RuntimeRunning, LastUsedAt: future, CreatedAt: clock, UpdatedAt: future}
	require.NoError(t, h.store.UpsertRuntime(ctx, rt))

	e := &EvictionActivities{Activities: h.acts, DataDir: h.dataDir, Policy: eviction.DefaultPolicy(), DiskBudgetBytes: 1 << 40}
	first, err := e.planEviction(ctx, wire.PlanEvictionInput{HostID: testHostID})
	require.NoError(t, err)
	assert.Empty(t, first.Plan.Actions, "a row just reset to now is not idle")
	notes := strings.Join(first.Notes, "\n")
	for _, want := range []string{"workspace " + ws.ID, "repo cache " + cache.ID, "runtime rt-future"} {
		assert.Contains(t, notes, want+": last used "+future.Format(time.RFC3339)+", in the future: reset to now")
	}
	row, err = h.store.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, clock, row.LastUsedAt.UTC(), "the workspace row is reset to now")
	cache, err = h.store.GetRepoCache(ctx, cache.ID)
	require.NoError(t, err)
	assert.Equal(t, clock, cache.LastUsedAt.UTC(), "the repo cache row is reset to now")
	rt, err = h.store.GetRuntime(ctx, rt.ID)
	require.NoError(t, err)
	assert.Equal(t, clock, rt.LastUsedAt.UTC(), "the runtime row is reset to now")
	assert.Equal(t, clock, rt.UpdatedAt.UTC())

	clock = clock.Add(25 * time.Hour)
	later, err := e.planEviction(ctx, wire.PlanEvictionInput{HostID: testHostID})
	require.NoError(t, err)
	assert.Empty(t, later.Notes)
	var got []string
	for _, a := range later.Plan.Actions {
		got = append(got, string(a.Kind)+":"+a.ID)
		assert.False(t, a.LastUsedAt.After(clock), "no planned time is in the future")
	}
	assert.ElementsMatch(t, []string{string(sandboxapi.EvictionStopRuntime) + ":rt-future", string(sandboxapi.EvictionEvictWorkspace) + ":" + ws.ID}, got)
}

// A runtime or workspace whose last use lies in the future is touched again
// at the next use (the throttle never keeps a future time), and the eviction
// re-checks count it as used now, never a negative idle time.
func TestFutureLastUseIsOverwrittenAndCountsAsNow(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	clock := time.Now().UTC().Truncate(time.Second)
	h.acts.Now = func() time.Time { return clock }
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	future := clock.Add(time.Hour)
	rec := sandbox.RuntimeRecord{ID: "rt-1", WorkspaceID: ws.ID, BackendKind: "local", BackendRuntimeID: "rt-1",
		State: sandbox.RuntimeRunning, LastUsedAt: future, CreatedAt: clock, UpdatedAt: future}
	require.NoError(t, h.store.UpsertRuntime(ctx, rec))
	h.acts.recordRuntime(ctx, ws, rec.ID, sandbox.RuntimeRunning)
	rec, err := h.store.GetRuntime(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, clock, rec.LastUsedAt.UTC(), "a future last use is overwritten at the next use")

	ws.HostID, ws.State, ws.LastUsedAt = testHostID, sandboxapi.WorkspaceReady, future
	outcome, reason := workspaceEvictionRefusal(ws, sandboxapi.EvictRequest{MinIdle: time.Minute}, testHostID, clock)
	assert.Equal(t, sandboxapi.OutcomeSkipped, outcome)
	assert.Equal(t, "used 0s ago (rule needs 1m0s)", reason)
}
