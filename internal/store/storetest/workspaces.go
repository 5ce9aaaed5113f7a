package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ---- workspaces ----

func testWorkspaceRoundTrip(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)

	analysis := workspace(sandboxapi.ModeAnalysis, "u1", "p1", "release/1.0")
	analysis.Capabilities = sandboxapi.Capabilities{Writable: false, Isolated: true, Persistent: false}
	analysis.Dirty = false
	analysis.PinnedUntil = nil
	analysis.Network = sandboxapi.NetworkNone

	edit := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	edit.Capabilities = sandboxapi.Capabilities{Writable: true, Isolated: false, Persistent: true}
	// The network policy round-trips (docs/SECURITY.md "Network modes"); the
	// task below has none recorded ("" and no entries, as older rows).
	edit.Network = sandboxapi.NetworkLimited
	edit.NetworkAllow = []string{"registry.internal:4873", "*.corp.example", "10.0.0.0/8", "[2001:db8::/32]:443"}

	task := workspace(sandboxapi.ModeTask, "u1", "p1", "task-1")
	task.Capabilities = sandboxapi.Capabilities{Writable: true, Isolated: true, Persistent: true}
	task.State = sandboxapi.WorkspaceCreating
	task.LastUsedAt = time.Time{} // never used yet: zero round-trips as zero

	for _, want := range []sandboxapi.Workspace{analysis, edit, task} {
		require.NoError(t, s.CreateWorkspace(ctx, want), want.Mode)
		got, err := s.GetWorkspace(ctx, want.ID)
		require.NoError(t, err, want.Mode)
		assert.Equal(t, want, got, want.Mode)
	}
	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []sandboxapi.Workspace{analysis, edit, task}, all)

	// An update replaces the policy, and can clear the entries.
	edit.Network, edit.NetworkAllow = sandboxapi.NetworkDefault, nil
	require.NoError(t, s.UpdateWorkspace(ctx, edit))
	got, err := s.GetWorkspace(ctx, edit.ID)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.NetworkDefault, got.Network)
	assert.Nil(t, got.NetworkAllow)
}

func testWorkspaceTimesNormalized(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	zone := time.FixedZone("UTC+5:30", 5*3600+30*60)
	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	ws.LastUsedAt = ws.LastUsedAt.In(zone)
	ws.CreatedAt = ws.CreatedAt.In(zone)
	ws.UpdatedAt = time.Now() // carries a monotonic reading and the local zone
	ws.PinnedUntil = ptr(ws.PinnedUntil.In(zone))
	ws.BaseFetchedAt = ptr(ws.BaseFetchedAt.In(zone))
	require.NoError(t, s.CreateWorkspace(ctx, ws))

	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	for name, pair := range map[string][2]time.Time{
		"LastUsedAt":    {ws.LastUsedAt, got.LastUsedAt},
		"CreatedAt":     {ws.CreatedAt, got.CreatedAt},
		"UpdatedAt":     {ws.UpdatedAt, got.UpdatedAt},
		"PinnedUntil":   {*ws.PinnedUntil, *got.PinnedUntil},
		"BaseFetchedAt": {*ws.BaseFetchedAt, *got.BaseFetchedAt},
	} {
		assert.Equal(t, time.UTC, pair[1].Location(), "%s should come back in UTC", name)
		assert.True(t, pair[0].Equal(pair[1]), "%s: stored %v, got %v", name, pair[0], pair[1])
		assert.Equal(t, pair[0].UTC().Round(0), pair[1], name)
	}
}

func testWorkspaceUniqueness(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)

	analysis := workspace(sandboxapi.ModeAnalysis, "u1", "p1", "main")
	edit := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	task := workspace(sandboxapi.ModeTask, "u1", "p1", "task-1")
	for _, ws := range []sandboxapi.Workspace{analysis, edit, task} {
		require.NoError(t, s.CreateWorkspace(ctx, ws), "analysis, edit and task rows with the same user/project/base_ref must not collide (%s)", ws.Mode)
	}

	withID := func(ws sandboxapi.Workspace, id string) sandboxapi.Workspace {
		ws.ID = id
		ws.Key = "other-key-" + id
		return ws
	}
	conflicts := map[string]sandboxapi.Workspace{
		"same id": func() sandboxapi.Workspace {
			w := workspace(sandboxapi.ModeEdit, "u9", "p9", "conv-9")
			w.ID = edit.ID
			return w
		}(),
		"same key": func() sandboxapi.Workspace {
			w := workspace(sandboxapi.ModeEdit, "u9", "p9", "conv-9")
			w.Key = edit.Key
			return w
		}(),
		"analysis user/proj/ref":   withID(analysis, "ws-analysis-dup"),
		"edit user/proj/conv":      withID(edit, "ws-edit-dup"),
		"task user/proj/task":      withID(task, "ws-task-dup"),
		"edit key, other base ref": func() sandboxapi.Workspace { w := withID(edit, "ws-edit-dup2"); w.BaseRef = "develop"; return w }(),
		"task key, other repo": func() sandboxapi.Workspace {
			w := withID(task, "ws-task-dup2")
			w.RepoCacheID = "rc-2"
			w.Repo.Name = "gadgets"
			return w
		}(),
	}
	for name, ws := range conflicts {
		err := s.CreateWorkspace(ctx, ws)
		require.Error(t, err, name)
		require.ErrorIs(t, err, sandboxapi.ErrConflict, "%s: got %v", name, err)
	}

	fine := map[string]sandboxapi.Workspace{
		"edit, other conversation":   workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-2"),
		"analysis, other base ref":   workspace(sandboxapi.ModeAnalysis, "u1", "p1", "develop"),
		"task, other task":           workspace(sandboxapi.ModeTask, "u1", "p1", "task-2"),
		"edit, other user":           workspace(sandboxapi.ModeEdit, "u2", "p1", "conv-1"),
		"edit, other project":        workspace(sandboxapi.ModeEdit, "u1", "p2", "conv-1"),
		"analysis, other user":       workspace(sandboxapi.ModeAnalysis, "u2", "p1", "main"),
		"task, other project":        workspace(sandboxapi.ModeTask, "u1", "p2", "task-1"),
		"task named like a conv":     workspace(sandboxapi.ModeTask, "u1", "p1", "conv-1"),
		"edit named like a task":     workspace(sandboxapi.ModeEdit, "u1", "p1", "task-1"),
		"analysis, ref like a conv":  workspace(sandboxapi.ModeAnalysis, "u1", "p1", "conv-1"),
		"analysis, default base ref": workspace(sandboxapi.ModeAnalysis, "u1", "p1", ""),
	}
	for name, ws := range fine {
		require.NoError(t, s.CreateWorkspace(ctx, ws), name)
	}

	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 3+len(fine))
	got, err := s.GetWorkspace(ctx, edit.ID)
	require.NoError(t, err)
	assert.Equal(t, edit, got, "a rejected create must leave the existing row alone")
}

func testWorkspaceNotFound(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	const id = "ws-000000000000000000000000"

	_, err := s.GetWorkspace(ctx, id)
	requireKind(t, err, sandboxapi.ErrWorkspaceNotFound, id)
	assert.NotErrorIs(t, err, sandboxapi.ErrNotFound, "workspace misses belong to the workspace family")

	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	ws.ID = id
	requireKind(t, s.UpdateWorkspace(ctx, ws), sandboxapi.ErrWorkspaceNotFound, id)
	requireKind(t, s.TouchWorkspace(ctx, id, ts(0)), sandboxapi.ErrWorkspaceNotFound, id)

	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Empty(t, all, "update/touch of a missing id must not insert")
}

func testWorkspaceUpdate(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	other := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-2")
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	require.NoError(t, s.CreateWorkspace(ctx, other))

	upd := ws
	upd.Key = ws.Key + "-v2"
	upd.RepoCacheID = "rc-9"
	upd.Repo = sandboxapi.RepoIdentity{Host: "gitlab.example.com:8443", Owner: "grp/sub", Name: "thing", URL: "https://gitlab.example.com:8443/grp/sub/thing.git"}
	upd.ProjectID = "p7"
	upd.UserID = "u7"
	upd.Mode = sandboxapi.ModeTask
	upd.ConversationID = ""
	upd.TaskID = "task-7"
	upd.BaseRef = "agent/edits-conv-1"
	upd.BaseCommit = "fedcba9876543210fedcba9876543210fedcba98"
	upd.BranchName = "agent/task-task-7"
	upd.LocalPath = "/data/elsewhere"
	upd.HostID = "host-z"
	upd.State = sandboxapi.WorkspaceEvicted
	upd.Dirty = false
	upd.PinnedUntil = nil
	upd.Capabilities = sandboxapi.Capabilities{Writable: false, Isolated: false, Persistent: false}
	upd.LastUsedAt = ts(48*time.Hour + 1)
	upd.SizeBytes = 1 << 40
	upd.CreatedAt = ts(-time.Hour + 2)
	upd.UpdatedAt = ts(48*time.Hour + 3)
	require.NoError(t, s.UpdateWorkspace(ctx, upd))
	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, upd, got, "update replaces every column")

	// Pinning again.
	upd.PinnedUntil = ptr(ts(72*time.Hour + 5))
	upd.Dirty = true
	require.NoError(t, s.UpdateWorkspace(ctx, upd))
	got, err = s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, upd, got)

	// Moving onto another row's uniqueness key conflicts and changes nothing.
	clash := other
	clash.ID = ws.ID
	clash.Key = "unrelated-key"
	err = s.UpdateWorkspace(ctx, clash)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "got %v", err)
	clash = upd
	clash.Key = other.Key
	err = s.UpdateWorkspace(ctx, clash)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "got %v", err)
	got, err = s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, upd, got)
	got, err = s.GetWorkspace(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, other, got)
}

func testWorkspaceTouch(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	ws := workspace(sandboxapi.ModeTask, "u1", "p1", "task-1")
	other := workspace(sandboxapi.ModeTask, "u1", "p1", "task-2")
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	require.NoError(t, s.CreateWorkspace(ctx, other))

	at := ts(5*time.Hour + 999)
	require.NoError(t, s.TouchWorkspace(ctx, ws.ID, at.In(time.FixedZone("x", -7*3600))))
	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	want := ws
	want.LastUsedAt = at
	want.UpdatedAt = at
	assert.Equal(t, want, got, "touch sets last_used_at and updated_at, nothing else")

	got, err = s.GetWorkspace(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, other, got, "touch changes only its own row")
}

func testWorkspaceListFilters(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)

	type spec struct {
		mode              sandboxapi.WorkspaceMode
		user, proj, scope string
		cache, host       string
		state             sandboxapi.WorkspaceState
		lastUsed          time.Duration
	}
	specs := []spec{
		{sandboxapi.ModeAnalysis, "u1", "p1", "main", "rc-1", "host-a", sandboxapi.WorkspaceReady, 50},
		{sandboxapi.ModeEdit, "u1", "p1", "c1", "rc-1", "host-a", sandboxapi.WorkspaceReady, 10},
		{sandboxapi.ModeEdit, "u1", "p2", "c2", "rc-2", "host-b", sandboxapi.WorkspaceEvicted, 30},
		{sandboxapi.ModeTask, "u2", "p1", "t1", "rc-1", "host-b", sandboxapi.WorkspaceReady, 20},
		{sandboxapi.ModeTask, "u2", "p2", "t2", "rc-2", "host-a", sandboxapi.WorkspaceCreating, 40},
		{sandboxapi.ModeEdit, "u2", "p1", "c3", "rc-2", "host-a", sandboxapi.WorkspaceReady, 30}, // ties with c2 on last_used_at
	}
	byScope := map[string]sandboxapi.Workspace{}
	var all []sandboxapi.Workspace
	for _, sp := range specs {
		ws := workspace(sp.mode, sp.user, sp.proj, sp.scope)
		ws.RepoCacheID = sp.cache
		ws.HostID = sp.host
		ws.State = sp.state
		ws.LastUsedAt = ts(sp.lastUsed * time.Minute)
		require.NoError(t, s.CreateWorkspace(ctx, ws))
		byScope[sp.scope] = ws
		all = append(all, ws)
	}
	// Expected order: last_used_at ascending, then id.
	order := func(scopes ...string) []string {
		var out []string
		for _, sc := range scopes {
			out = append(out, byScope[sc].ID)
		}
		return out
	}
	tieFirst, tieSecond := "c2", "c3"
	if byScope["c3"].ID < byScope["c2"].ID {
		tieFirst, tieSecond = "c3", "c2"
	}

	cases := []struct {
		name string
		f    sandbox.WorkspaceFilter
		want []string
	}{
		{"zero filter: everything, LRU first", sandbox.WorkspaceFilter{}, order("c1", "t1", tieFirst, tieSecond, "t2", "main")},
		{"user", sandbox.WorkspaceFilter{UserID: "u1"}, order("c1", "c2", "main")},
		{"project", sandbox.WorkspaceFilter{ProjectID: "p2"}, order("c2", "t2")},
		{"repo cache", sandbox.WorkspaceFilter{RepoCacheID: "rc-1"}, order("c1", "t1", "main")},
		{"host", sandbox.WorkspaceFilter{HostID: "host-b"}, order("t1", "c2")},
		{"mode", sandbox.WorkspaceFilter{Mode: sandboxapi.ModeEdit}, order("c1", tieFirst, tieSecond)},
		{"state", sandbox.WorkspaceFilter{State: sandboxapi.WorkspaceReady}, order("c1", "t1", "c3", "main")},
		{"last used strictly before", sandbox.WorkspaceFilter{LastUsedBefore: ts(30 * time.Minute)}, order("c1", "t1")},
		{"last used before, one nanosecond later", sandbox.WorkspaceFilter{LastUsedBefore: ts(30*time.Minute + 1)}, order("c1", "t1", tieFirst, tieSecond)},
		{"limit", sandbox.WorkspaceFilter{Limit: 3}, order("c1", "t1", tieFirst)},
		{"limit larger than rows", sandbox.WorkspaceFilter{Limit: 100}, order("c1", "t1", tieFirst, tieSecond, "t2", "main")},
		{"combined", sandbox.WorkspaceFilter{UserID: "u2", ProjectID: "p1", HostID: "host-a", Mode: sandboxapi.ModeEdit, State: sandboxapi.WorkspaceReady, RepoCacheID: "rc-2", LastUsedBefore: ts(time.Hour)}, order("c3")},
		{"combined with limit", sandbox.WorkspaceFilter{HostID: "host-a", State: sandboxapi.WorkspaceReady, Limit: 2}, order("c1", "c3")},
		{"no match", sandbox.WorkspaceFilter{UserID: "u1", HostID: "host-b", Mode: sandboxapi.ModeTask}, nil},
		{"unknown user", sandbox.WorkspaceFilter{UserID: "nobody"}, nil},
	}
	for _, tc := range cases {
		got, err := s.ListWorkspaces(ctx, tc.f)
		require.NoError(t, err, tc.name)
		if tc.want == nil {
			assert.Empty(t, got, tc.name)
			continue
		}
		assert.Equal(t, tc.want, wsIDs(got), tc.name)
	}

	// Listed rows are complete rows.
	got, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.ElementsMatch(t, all, got)
}

func testWorkspaceDelete(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	keep := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-2")
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	require.NoError(t, s.CreateWorkspace(ctx, keep))

	require.NoError(t, s.DeleteWorkspace(ctx, ws.ID))
	_, err := s.GetWorkspace(ctx, ws.ID)
	requireKind(t, err, sandboxapi.ErrWorkspaceNotFound, ws.ID)
	require.NoError(t, s.DeleteWorkspace(ctx, ws.ID), "second delete is success")
	require.NoError(t, s.DeleteWorkspace(ctx, "ws-never-existed"), "deleting a missing workspace is success")

	got, err := s.GetWorkspace(ctx, keep.ID)
	require.NoError(t, err)
	assert.Equal(t, keep, got)

	// The key is free again once the row is gone.
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	got, err = s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, ws, got)
}
