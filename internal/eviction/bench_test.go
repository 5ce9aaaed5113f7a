package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// scaleSnapshot is a host at scale (docs/BENCHMARKS.md "Eviction
// planning"): 10,000 workspaces of every mode and state, a running or
// stopped runtime for each, 500 repo caches, under severe pressure so that
// every tier is planned.
func scaleSnapshot() Snapshot {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Snapshot{HostID: "h1", Now: now, Usage: Usage{UsedBytes: 97 << 30, BudgetBytes: 100 << 30}}
	modes := []sandboxapi.WorkspaceMode{sandboxapi.ModeAnalysis, sandboxapi.ModeTask, sandboxapi.ModeEdit}
	for i := range 500 {
		s.RepoCaches = append(s.RepoCaches, RepoCache{ID: fmt.Sprintf("rc-%05d", i), State: sandbox.RepoCacheReady,
			LastUsedAt: now.Add(-time.Duration(i) * time.Hour), SizeBytes: int64(i+1) << 20, HoldsUnsavedWork: i%7 == 0})
	}
	for i := range 10000 {
		used := now.Add(-time.Duration(i) * 7 * time.Minute)
		w := Workspace{ID: fmt.Sprintf("ws-%06d", i), RepoCacheID: fmt.Sprintf("rc-%05d", i%400), Mode: modes[i%3],
			State: sandboxapi.WorkspaceReady, Dirty: i%4 == 0, UnpushedCommits: i % 5 % 2, LastUsedAt: used, SizeBytes: int64(i%50+1) << 20}
		if i%97 == 0 {
			until := now.Add(time.Hour)
			w.PinnedUntil = &until
		}
		s.Workspaces = append(s.Workspaces, w)
		state := sandbox.RuntimeRunning
		if i%2 == 0 {
			state = sandbox.RuntimeStopped
		}
		s.Runtimes = append(s.Runtimes, Runtime{ID: fmt.Sprintf("rt-%06d", i), WorkspaceID: w.ID, State: state, LastUsedAt: used, StateSince: used})
	}
	return s
}

// BenchmarkNewPlan10k plans a 10,000-workspace, 500-cache host (goal:
// ≤ 200 ms per plan).
func BenchmarkNewPlan10k(b *testing.B) {
	s, p := scaleSnapshot(), DefaultPolicy()
	var actions int
	for b.Loop() {
		actions = len(NewPlan(s, p).Actions)
	}
	b.ReportMetric(float64(actions), "actions")
}

// BenchmarkRawSortBaseline10k is the least any planner does on that host:
// order its workspaces and runtimes by last use.
func BenchmarkRawSortBaseline10k(b *testing.B) {
	s := scaleSnapshot()
	for b.Loop() {
		wss := slices.Clone(s.Workspaces)
		slices.SortFunc(wss, func(a, b Workspace) int { return cmp.Or(a.LastUsedAt.Compare(b.LastUsedAt), cmp.Compare(a.ID, b.ID)) })
		rts := slices.Clone(s.Runtimes)
		slices.SortFunc(rts, func(a, b Runtime) int { return cmp.Or(a.LastUsedAt.Compare(b.LastUsedAt), cmp.Compare(a.ID, b.ID)) })
	}
}
