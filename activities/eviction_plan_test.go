package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Usage is summed per owner kind; bytes of no owner count for neither.
func TestUsageByKind(t *testing.T) {
	rc, ws := usageByKind(map[string]int64{"rc:a": 1, "rc:b": 2, "ws:x": 10, "ws:y": 20, "other": 100})
	assert.Equal(t, int64(3), rc)
	assert.Equal(t, int64(30), ws)
}

// The plan keeps only the kinds asked for, then at most
// MaxEvictionActionsPerHost actions (the rest counted); an unknown kind is
// an invalid argument naming the field.
func TestLimitActions(t *testing.T) {
	plan := func(n int) *sandboxapi.PlanEvictionResult {
		out := &sandboxapi.PlanEvictionResult{}
		for i := range n {
			k := sandboxapi.EvictionStopRuntime
			if i%2 == 1 {
				k = sandboxapi.EvictionEvictWorkspace
			}
			out.Plan.Actions = append(out.Plan.Actions, sandboxapi.EvictionAction{Kind: k})
		}
		return out
	}
	out := plan(4)
	require.NoError(t, limitActions(out, []sandboxapi.EvictionActionKind{sandboxapi.EvictionEvictWorkspace}))
	assert.Len(t, out.Plan.Actions, 2)
	for _, a := range out.Plan.Actions {
		assert.Equal(t, sandboxapi.EvictionEvictWorkspace, a.Kind)
	}

	out = plan(sandboxapi.MaxEvictionActionsPerHost + 3)
	require.NoError(t, limitActions(out, nil))
	assert.Len(t, out.Plan.Actions, sandboxapi.MaxEvictionActionsPerHost)
	assert.Equal(t, 3, out.Truncated)

	out = plan(2)
	err := limitActions(out, []sandboxapi.EvictionActionKind{"evict_everything"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Len(t, out.Plan.Actions, 2, "nothing changed")
}

// The rules an eviction request re-checks before any work: another host
// fails; not ready, pinned and recently used are skipped; otherwise it may
// go on.
func TestWorkspaceEvictionRefusal(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	future, past := now.Add(time.Hour), now.Add(-time.Hour)
	ok := sandboxapi.Workspace{HostID: "h", State: sandboxapi.WorkspaceReady, LastUsedAt: now.Add(-2 * time.Hour), PinnedUntil: &past}
	req := sandboxapi.EvictRequest{MinIdle: time.Hour}
	o, why := workspaceEvictionRefusal(ok, req, "h", now)
	assert.Empty(t, o, why)

	cases := map[string]struct {
		edit    func(*sandboxapi.Workspace)
		outcome string
		reason  string
	}{
		"other host": {func(w *sandboxapi.Workspace) { w.HostID = "h2" }, sandboxapi.OutcomeFailed, "workspace lives on host h2, not h"},
		"not ready":  {func(w *sandboxapi.Workspace) { w.State = sandboxapi.WorkspaceEvicted }, sandboxapi.OutcomeSkipped, "workspace is evicted"},
		"pinned":     {func(w *sandboxapi.Workspace) { w.PinnedUntil = &future }, sandboxapi.OutcomeSkipped, "pinned until 2026-05-01T13:00:00Z"},
		"used":       {func(w *sandboxapi.Workspace) { w.LastUsedAt = now.Add(-time.Minute) }, sandboxapi.OutcomeSkipped, "used 1m0s ago (rule needs 1h0m0s)"},
	}
	for name, c := range cases {
		ws := ok
		c.edit(&ws)
		o, why := workspaceEvictionRefusal(ws, req, "h", now)
		assert.Equal(t, c.outcome, o, name)
		assert.Equal(t, c.reason, why, name)
	}
}
