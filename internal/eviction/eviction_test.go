package eviction

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

const day = 24 * time.Hour

// ws builds a ready workspace; flags: "dirty", "unpushed", "unknown", "pinned", "expired-pin".
func ws(id string, mode sandboxapi.WorkspaceMode, idle time.Duration, size int64, flags ...string) Workspace {
	w := Workspace{ID: id, RepoCacheID: "rc-main", Mode: mode, State: sandboxapi.WorkspaceReady, LastUsedAt: ago(idle), SizeBytes: size}
	for _, f := range flags {
		switch f {
		case "dirty":
			w.Dirty = true
		case "unpushed":
			w.UnpushedCommits = 2
		case "unknown":
			w.Unknown = true
		case "pinned":
			t := now.Add(time.Hour)
			w.PinnedUntil = &t
		case "expired-pin":
			t := now.Add(-time.Minute)
			w.PinnedUntil = &t
		case "evicted":
			w.State = sandboxapi.WorkspaceEvicted
		default:
			panic(f)
		}
	}
	return w
}

// ids renders actions as "kind:id" for compact comparison.
func ids(p Plan) []string {
	out := []string{}
	for _, a := range p.Actions {
		out = append(out, fmt.Sprintf("%s:%s", strings.TrimSuffix(string(a.Kind), "_workspace"), a.ID))
	}
	return out
}

func TestPolicyValidate(t *testing.T) {
	require.NoError(t, DefaultPolicy().Validate())
	for name, mut := range map[string]func(*Policy){
		"zero ttl":          func(p *Policy) { p.EditTTL = 0 },
		"negative stop":     func(p *Policy) { p.RuntimeIdleStop = -time.Second },
		"low above high":    func(p *Policy) { p.LowWater = 0.9 },
		"severe below high": func(p *Policy) { p.SevereWater = 0.8 },
		"severe above one":  func(p *Policy) { p.SevereWater = 1.5 },
		"zero low":          func(p *Policy) { p.LowWater = 0 },
	} {
		p := DefaultPolicy()
		mut(&p)
		err := p.Validate()
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
}

func TestRuntimeTier(t *testing.T) {
	p := DefaultPolicy()
	s := Snapshot{Now: now, Runtimes: []Runtime{
		{ID: "rt-busy", WorkspaceID: "w1", State: sandbox.RuntimeRunning, LastUsedAt: ago(19 * time.Minute)},
		{ID: "rt-idle", WorkspaceID: "w2", State: sandbox.RuntimeRunning, LastUsedAt: ago(20 * time.Minute)},
		{ID: "rt-older", WorkspaceID: "w3", State: sandbox.RuntimeRunning, LastUsedAt: ago(3 * time.Hour)},
		{ID: "rt-stopped-new", WorkspaceID: "w4", State: sandbox.RuntimeStopped, LastUsedAt: ago(10 * time.Hour), StateSince: ago(5 * time.Hour)},
		{ID: "rt-stopped-old", WorkspaceID: "w5", State: sandbox.RuntimeStopped, LastUsedAt: ago(10 * time.Hour), StateSince: ago(6 * time.Hour)},
		{ID: "rt-failed", WorkspaceID: "w6", State: sandbox.RuntimeError, LastUsedAt: ago(7 * time.Hour)},
		{ID: "rt-missing", WorkspaceID: "w7", State: sandbox.RuntimeMissing, LastUsedAt: ago(100 * time.Hour)},
	}}
	plan := NewPlan(s, p)
	assert.Equal(t, []string{"stop_runtime:rt-older", "stop_runtime:rt-idle", "destroy_runtime:rt-stopped-old", "destroy_runtime:rt-failed"}, ids(plan))
	for _, a := range plan.Actions {
		assert.Zero(t, a.Bytes, "runtime actions free no planned disk")
		assert.NotEmpty(t, a.WorkspaceID, "runtime actions go through the workspace's session")
		assert.NotEqual(t, ActionEvictWorkspace, a.Kind, "runtime eviction never deletes a workspace")
	}
	assert.Equal(t, PressureNone, plan.Pressure)
}

func TestWorkspaceTiersWithoutPressure(t *testing.T) {
	p := DefaultPolicy()
	cases := []struct {
		name string
		wss  []Workspace
		want []string
	}{
		{"nothing expired", []Workspace{
			ws("a1", sandboxapi.ModeAnalysis, 23*time.Hour, 10),
			ws("t1", sandboxapi.ModeTask, 2*day, 10),
			ws("e1", sandboxapi.ModeEdit, 13*day, 10),
		}, []string{}},
		{"clean tiers in order, LRU within a tier", []Workspace{
			ws("e1", sandboxapi.ModeEdit, 20*day, 10),
			ws("t1", sandboxapi.ModeTask, 4*day, 10),
			ws("a2", sandboxapi.ModeAnalysis, 2*day, 10),
			ws("a1", sandboxapi.ModeAnalysis, 30*day, 10),
			ws("t2", sandboxapi.ModeTask, 30*day, 10),
		}, []string{"evict:a1", "evict:a2", "evict:t2", "evict:t1", "evict:e1"}},
		{"edit TTL is 14 days", []Workspace{
			ws("e13", sandboxapi.ModeEdit, 14*day-time.Second, 10),
			ws("e14", sandboxapi.ModeEdit, 14*day, 10),
		}, []string{"evict:e14"}},
		{"dirty, unpushed or unknown never go without pressure", []Workspace{
			ws("a", sandboxapi.ModeAnalysis, 99*day, 10, "dirty"),
			ws("t", sandboxapi.ModeTask, 99*day, 10, "unpushed"),
			ws("e", sandboxapi.ModeEdit, 99*day, 10, "unknown"),
		}, []string{}},
		{"pinned never, an expired pin does not hold", []Workspace{
			ws("pinned", sandboxapi.ModeAnalysis, 99*day, 10, "pinned"),
			ws("was-pinned", sandboxapi.ModeAnalysis, 99*day, 10, "expired-pin"),
		}, []string{"evict:was-pinned"}},
		{"evicted rows are not evicted again", []Workspace{
			ws("gone", sandboxapi.ModeAnalysis, 99*day, 10, "evicted"),
		}, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := NewPlan(Snapshot{Now: now, Workspaces: c.wss, Usage: Usage{UsedBytes: 1, BudgetBytes: 1000}}, p)
			assert.Equal(t, c.want, ids(plan))
			assert.Equal(t, PressureNone, plan.Pressure)
			for _, a := range plan.Actions {
				assert.False(t, a.SaveWork)
			}
		})
	}
}

func TestPressureTiers(t *testing.T) {
	p := DefaultPolicy()
	p.PressureMinIdle = time.Hour
	const budget = 1000 // high 850, low 700, severe 950
	cases := []struct {
		name     string
		used     int64
		wss      []Workspace
		want     []string
		pressure Pressure
	}{
		{"below high water nothing dirty goes", 849, []Workspace{
			ws("t", sandboxapi.ModeTask, 9*day, 500, "dirty"),
		}, []string{}, PressureNone},
		{"dirty task under pressure until low water, LRU first", 900, []Workspace{
			ws("t-new", sandboxapi.ModeTask, 2*time.Hour, 100, "dirty"),
			ws("t-old", sandboxapi.ModeTask, 3*day, 150, "unpushed"),
			ws("t-mid", sandboxapi.ModeTask, 1*day, 100, "dirty"),
			ws("e", sandboxapi.ModeEdit, 9*day, 400, "dirty"),
		}, []string{"evict:t-old", "evict:t-mid"}, PressureHigh},
		{"dirty tasks used recently stay", 900, []Workspace{
			ws("t-busy", sandboxapi.ModeTask, 59*time.Minute, 500, "dirty"),
		}, []string{}, PressureHigh},
		{"clean TTL tier counts toward low water", 900, []Workspace{
			ws("a", sandboxapi.ModeAnalysis, 2*day, 250),
			ws("t", sandboxapi.ModeTask, 2*day, 100, "dirty"),
		}, []string{"evict:a"}, PressureHigh},
		{"dirty edit only under severe pressure, and only while severe", 980, []Workspace{
			ws("t", sandboxapi.ModeTask, 2*day, 10, "dirty"),
			ws("e-old", sandboxapi.ModeEdit, 5*day, 40, "dirty"),
			ws("e-mid", sandboxapi.ModeEdit, 4*day, 40, "dirty"),
			ws("e-new", sandboxapi.ModeEdit, 3*day, 40, "dirty"),
		}, []string{"evict:t", "evict:e-old"}, PressureSevere},
		{"pinned dirty edit survives severe pressure", 999, []Workspace{
			ws("e", sandboxapi.ModeEdit, 50*day, 900, "dirty", "pinned"),
		}, []string{}, PressureSevere},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := NewPlan(Snapshot{Now: now, Workspaces: c.wss, Usage: Usage{UsedBytes: c.used, BudgetBytes: budget}}, p)
			assert.Equal(t, c.want, ids(plan))
			assert.Equal(t, c.pressure, plan.Pressure)
			assert.Equal(t, int64(850), plan.HighBytes)
			assert.Equal(t, int64(700), plan.LowBytes)
			assert.Equal(t, int64(950), plan.SevereBytes)
			for _, a := range plan.Actions {
				if a.Tier == TierDirtyTask || a.Tier == TierDirtyEdit {
					assert.True(t, a.SaveWork, "%s must be saved first", a.ID)
					assert.Equal(t, p.PressureMinIdle, a.MinIdle)
				}
			}
		})
	}
}

func TestProjectedUsageStopsAtLowWater(t *testing.T) {
	p := DefaultPolicy()
	var wss []Workspace
	for i := range 10 {
		wss = append(wss, ws(fmt.Sprintf("t%d", i), sandboxapi.ModeTask, time.Duration(10-i)*day, 50, "dirty"))
	}
	plan := NewPlan(Snapshot{Now: now, Workspaces: wss, Usage: Usage{UsedBytes: 900, BudgetBytes: 1000}}, p)
	// 900 → 850 → 800 → 750 → 700 (= low water): four evictions.
	require.Len(t, plan.Actions, 4)
	assert.Equal(t, []string{"evict:t0", "evict:t1", "evict:t2", "evict:t3"}, ids(plan))
	assert.Equal(t, int64(700), plan.ProjectedUsedBytes)
	assert.Equal(t, int64(850), plan.Actions[0].ProjectedUsedBytes)
	assert.Equal(t, int64(700), plan.Actions[3].ProjectedUsedBytes)
}

func TestRepoCaches(t *testing.T) {
	p := DefaultPolicy()
	caches := []RepoCache{
		{ID: "rc-used", State: sandbox.RepoCacheReady, LastUsedAt: ago(90 * day), SizeBytes: 900},
		{ID: "rc-small-old", State: sandbox.RepoCacheReady, LastUsedAt: ago(10 * day), SizeBytes: 10},  // score 100
		{ID: "rc-big-recent", State: sandbox.RepoCacheReady, LastUsedAt: ago(2 * day), SizeBytes: 100}, // score 200
		{ID: "rc-mid", State: sandbox.RepoCacheReady, LastUsedAt: ago(5 * day), SizeBytes: 30},         // score 150
		{ID: "rc-unsaved", State: sandbox.RepoCacheReady, LastUsedAt: ago(99 * day), SizeBytes: 999, HoldsUnsavedWork: true},
		{ID: "rc-just-used", State: sandbox.RepoCacheReady, LastUsedAt: ago(time.Minute), SizeBytes: 999},
		{ID: "rc-evicted", State: sandbox.RepoCacheEvicted, LastUsedAt: ago(99 * day), SizeBytes: 999},
		{ID: "rc-evicted-ws", State: sandbox.RepoCacheReady, LastUsedAt: ago(99 * day), SizeBytes: 999},
	}
	wss := []Workspace{
		ws("e", sandboxapi.ModeEdit, time.Hour, 1),
	}
	wss[0].RepoCacheID = "rc-used"
	gone := ws("old", sandboxapi.ModeEdit, 50*day, 0, "evicted")
	gone.RepoCacheID = "rc-evicted-ws"
	wss = append(wss, gone)

	t.Run("no pressure: caches stay", func(t *testing.T) {
		plan := NewPlan(Snapshot{Now: now, Workspaces: wss, RepoCaches: caches, Usage: Usage{UsedBytes: 800, BudgetBytes: 1000}}, p)
		assert.Empty(t, plan.Actions)
	})
	t.Run("pressure: LRU weighted by size, until low water", func(t *testing.T) {
		plan := NewPlan(Snapshot{Now: now, Workspaces: wss, RepoCaches: caches, Usage: Usage{UsedBytes: 860, BudgetBytes: 1000}}, p)
		// 860 -100 (big-recent) = 760, -30 (mid) = 730, -10 (small-old) = 720 > 700: all three, and no more are eligible.
		assert.Equal(t, []string{"remove_repo_cache:rc-big-recent", "remove_repo_cache:rc-mid", "remove_repo_cache:rc-small-old"}, ids(plan))
		held := map[string]string{}
		for _, h := range plan.Held {
			held[h.ID] = h.Reason
		}
		assert.Equal(t, "used by workspaces", held["rc-used"])
		assert.Equal(t, "used by workspaces", held["rc-evicted-ws"], "an evicted workspace keeps its backup in the cache")
		assert.Contains(t, held["rc-unsaved"], "no remote branch")
	})
	t.Run("pressure relieved early: stop", func(t *testing.T) {
		bigger := append([]RepoCache(nil), caches...)
		bigger[2].SizeBytes = 200 // rc-big-recent: 850 - 200 = 650 <= 700
		plan := NewPlan(Snapshot{Now: now, Workspaces: wss, RepoCaches: bigger, Usage: Usage{UsedBytes: 850, BudgetBytes: 1000}}, p)
		assert.Equal(t, []string{"remove_repo_cache:rc-big-recent"}, ids(plan))
		assert.Equal(t, int64(650), plan.ProjectedUsedBytes)
	})
}

// TestDependencyCaches: only under pressure, never one used within
// PressureMinIdle, highest idle time × size first, until low water; a
// future last use counts as now.
func TestDependencyCaches(t *testing.T) {
	p := DefaultPolicy()
	deps := []DependencyCache{
		{ID: "user/small-old", LastUsedAt: ago(10 * day), SizeBytes: 10},  // score 100
		{ID: "user/big-recent", LastUsedAt: ago(2 * day), SizeBytes: 100}, // score 200
		{ID: "repo/mid", LastUsedAt: ago(5 * day), SizeBytes: 30},         // score 150
		{ID: "user/just-used", LastUsedAt: ago(time.Minute), SizeBytes: 999},
		{ID: "user/future", LastUsedAt: now.Add(day), SizeBytes: 999},
	}
	plan := NewPlan(Snapshot{Now: now, DependencyCaches: deps, Usage: Usage{UsedBytes: 800, BudgetBytes: 1000}}, p)
	assert.Empty(t, plan.Actions, "no pressure: caches stay")
	plan = NewPlan(Snapshot{Now: now, DependencyCaches: deps, Usage: Usage{UsedBytes: 860, BudgetBytes: 1000}}, p)
	assert.Equal(t, []string{"remove_dependency_cache:user/big-recent", "remove_dependency_cache:repo/mid", "remove_dependency_cache:user/small-old"}, ids(plan))
	for _, a := range plan.Actions {
		assert.Equal(t, TierDependencyCacheLRU, a.Tier)
		assert.Equal(t, p.PressureMinIdle, a.MinIdle)
		assert.Empty(t, a.WorkspaceID)
	}
	assert.Equal(t, int64(720), plan.ProjectedUsedBytes)
	deps[1].SizeBytes = 200 // 850 - 200 = 650 <= 700
	plan = NewPlan(Snapshot{Now: now, DependencyCaches: deps, Usage: Usage{UsedBytes: 850, BudgetBytes: 1000}}, p)
	assert.Equal(t, []string{"remove_dependency_cache:user/big-recent"}, ids(plan), "stops at low water")
}

func TestFullPlanOrder(t *testing.T) {
	p := DefaultPolicy()
	wss := []Workspace{
		ws("edit-dirty", sandboxapi.ModeEdit, 30*day, 100, "dirty"),
		ws("task-dirty", sandboxapi.ModeTask, 30*day, 100, "dirty"),
		ws("edit-clean", sandboxapi.ModeEdit, 30*day, 100),
		ws("task-clean", sandboxapi.ModeTask, 30*day, 100),
		ws("analysis-clean", sandboxapi.ModeAnalysis, 30*day, 100),
		ws("pinned", sandboxapi.ModeAnalysis, 90*day, 100, "pinned"),
	}
	caches := []RepoCache{{ID: "rc-free", State: sandbox.RepoCacheReady, LastUsedAt: ago(30 * day), SizeBytes: 400}}
	deps := []DependencyCache{{ID: "user/dep", LastUsedAt: ago(30 * day), SizeBytes: 5}}
	rts := []Runtime{{ID: "rt-1", WorkspaceID: "task-dirty", State: sandbox.RuntimeRunning, LastUsedAt: ago(time.Hour)}}
	plan := NewPlan(Snapshot{Now: now, Workspaces: wss, RepoCaches: caches, DependencyCaches: deps, Runtimes: rts, Usage: Usage{UsedBytes: 1000, BudgetBytes: 1000}}, p)
	assert.Equal(t, PressureSevere, plan.Pressure)
	assert.Equal(t, []string{
		"stop_runtime:rt-1",
		"evict:analysis-clean", "evict:task-clean", "evict:edit-clean", // 700: low water reached
	}, ids(plan))

	// Each tier is reached only when the previous ones are not enough.
	for i := range wss[:5] {
		wss[i].SizeBytes = 10
	}
	plan = NewPlan(Snapshot{Now: now, Workspaces: wss, RepoCaches: caches, DependencyCaches: deps, Runtimes: rts, Usage: Usage{UsedBytes: 1000, BudgetBytes: 1000}}, p)
	assert.Equal(t, []string{
		"stop_runtime:rt-1",
		"evict:analysis-clean", "evict:task-clean", "evict:edit-clean",
		"evict:task-dirty", "evict:edit-dirty",
		"remove_dependency_cache:user/dep",
		"remove_repo_cache:rc-free",
	}, ids(plan))
	tiers := []Tier{}
	for _, a := range plan.Actions {
		tiers = append(tiers, a.Tier)
	}
	assert.Equal(t, []Tier{TierRuntimeIdle, TierCleanAnalysis, TierCleanTask, TierCleanEdit, TierDirtyTask, TierDirtyEdit, TierDependencyCacheLRU, TierRepoCacheLRU}, tiers)
	for _, a := range plan.Actions {
		assert.NotEqual(t, "pinned", a.ID)
	}
}

func TestNoBudgetMeansNoPressure(t *testing.T) {
	plan := NewPlan(Snapshot{Now: now, Usage: Usage{UsedBytes: 1 << 40},
		Workspaces: []Workspace{ws("t", sandboxapi.ModeTask, 99*day, 1<<30, "dirty")},
		RepoCaches: []RepoCache{{ID: "rc", State: sandbox.RepoCacheReady, LastUsedAt: ago(99 * day), SizeBytes: 1 << 30}}}, DefaultPolicy())
	assert.Equal(t, PressureNone, plan.Pressure)
	assert.Empty(t, plan.Actions)
	assert.Zero(t, Usage{UsedBytes: 5}.Fraction())
	assert.InDelta(t, 0.5, Usage{UsedBytes: 5, BudgetBytes: 10}.Fraction(), 1e-9)
}

func TestPlanDoesNotModifySnapshot(t *testing.T) {
	wss := []Workspace{ws("b", sandboxapi.ModeAnalysis, 9*day, 1), ws("a", sandboxapi.ModeAnalysis, 10*day, 1)}
	NewPlan(Snapshot{Now: now, Workspaces: wss}, DefaultPolicy())
	assert.Equal(t, "b", wss[0].ID)
}

// A time in the future (a skewed clock, a bad row) counts as "used now":
// never a negative idle time, never planned with a time after Now, and
// sorted like a workspace used now (ties by id).
func TestFutureTimesCountAsNow(t *testing.T) {
	p := DefaultPolicy()
	future := now.Add(100 * day)
	assert.Equal(t, now, NotAfter(future, now))
	assert.Equal(t, ago(time.Hour), NotAfter(ago(time.Hour), now))
	assert.Zero(t, Idle(future, now))
	assert.Equal(t, time.Hour, Idle(ago(time.Hour), now))

	wss := []Workspace{ws("a-future", sandboxapi.ModeTask, 0, 400, "dirty"), ws("b-now", sandboxapi.ModeTask, 0, 400, "dirty")}
	wss[0].LastUsedAt = future
	p.PressureMinIdle = time.Nanosecond // "used now" must still fail any positive idle rule
	plan := NewPlan(Snapshot{Now: now, Workspaces: wss, Usage: Usage{UsedBytes: 1000, BudgetBytes: 1000},
		Runtimes: []Runtime{{ID: "rt", WorkspaceID: "a-future", State: sandbox.RuntimeStopped, LastUsedAt: future, StateSince: future}}}, p)
	assert.Empty(t, plan.Actions)
	p.PressureMinIdle = 0
	plan = NewPlan(Snapshot{Now: now, Workspaces: wss, Usage: Usage{UsedBytes: 1000, BudgetBytes: 1000}}, p)
	assert.Equal(t, []string{"evict:a-future"}, ids(plan), "a future time sorts as now: ties by id")
	for _, a := range plan.Actions {
		assert.Equal(t, now, a.LastUsedAt, "no planned time is after Now")
	}
	assert.Equal(t, future, wss[0].LastUsedAt, "the snapshot is not modified")
}
