// Package storetest is the contract suite every sandbox.Store implementation
// runs (DESIGN.md "Layout": store/sqlite, store/postgres + storetest). It
// asserts real rows through the port only, so it is store-agnostic: the
// behaviour it pins is the one documented on sandbox.Store and in
// docs/DESIGN.md "Storage model".
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Factory prepares one fresh, empty database for test t and returns a function
// that opens a Store on it. The suite calls the factory once per subtest and
// open one or more times: after it closes a Store, the next open must see the
// same rows (persistence across Close and reopen). The suite closes every
// Store it opens; the factory cleans up the database itself (t.Cleanup, t.TempDir).
// open reports failures through t (e.g. require.NoError) rather than returning them.
type Factory func(t *testing.T) (open func() sandbox.Store)

// Run runs the contract suite against the Stores newStore makes. Covered:
// field-exact round trips of all three record types (times in UTC with
// nanoseconds, nil and non-nil optional times, zero times, capabilities,
// repo identity); upsert semantics (update in place, created_at kept);
// per-mode uniqueness conflicts and the non-conflicts next to them;
// not-found kinds; update, touch, list filters and order; idempotent deletes;
// runtimes by workspace; persistence across reopen; concurrent creates.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, f Factory)
	}{
		{"RepoCacheRoundTrip", testRepoCacheRoundTrip},
		{"RepoCacheUpsertUpdates", testRepoCacheUpsertUpdates},
		{"RepoCacheNotFoundAndDelete", testRepoCacheNotFoundAndDelete},
		{"RepoCacheListOrder", testRepoCacheListOrder},
		{"WorkspaceRoundTrip", testWorkspaceRoundTrip},
		{"WorkspaceTimesNormalized", testWorkspaceTimesNormalized},
		{"WorkspaceUniqueness", testWorkspaceUniqueness},
		{"WorkspaceNotFound", testWorkspaceNotFound},
		{"WorkspaceUpdate", testWorkspaceUpdate},
		{"WorkspaceTouch", testWorkspaceTouch},
		{"WorkspaceListFilters", testWorkspaceListFilters},
		{"WorkspaceDelete", testWorkspaceDelete},
		{"RuntimeRoundTrip", testRuntimeRoundTrip},
		{"RuntimeNotFoundAndDelete", testRuntimeNotFoundAndDelete},
		{"RuntimesByWorkspace", testRuntimesByWorkspace},
		{"EmptyIDRejected", testEmptyIDRejected},
		{"PersistsAcrossReopen", testPersistsAcrossReopen},
		{"ConcurrentCreateSameKey", testConcurrentCreateSameKey},
		{"ConcurrentCreateDistinctKeys", testConcurrentCreateDistinctKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

// openStore opens a Store on a fresh database and closes it when t ends.
func openStore(t *testing.T, f Factory) (sandbox.Store, func() sandbox.Store) {
	t.Helper()
	open := f(t)
	reopen := func() sandbox.Store {
		s := open()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return reopen(), reopen
}

// ts returns a UTC time with a nanosecond part, offset by d from a fixed base.
func ts(d time.Duration) time.Time {
	return time.Date(2025, time.March, 4, 5, 6, 7, 123456789, time.UTC).Add(d)
}

func ptr(t time.Time) *time.Time { return &t }

func repoCache(id string) sandbox.RepoCache {
	return sandbox.RepoCache{
		ID:            id,
		RepoName:      "acme/" + id,
		RepoURL:       "https://github.com/acme/" + id + ".git",
		Provider:      "local",
		ProviderHost:  "github.com",
		LocalPath:     "/data/repos/github.com/acme/" + id + "/.bare",
		AuthScopeHash: "sha256:" + id,
		DefaultBranch: "main",
		HostID:        "host-a",
		LastFetchedAt: ts(1*time.Minute + 1),
		LastUsedAt:    ts(2*time.Minute + 2),
		SizeBytes:     123456789012,
		State:         sandbox.RepoCacheReady,
		CreatedAt:     ts(3),
		UpdatedAt:     ts(4*time.Minute + 4),
	}
}

// workspace returns a fully populated workspace whose Key and ID are derived
// the way the service derives them. scope is the base ref (analysis), the
// conversation id (edit) or the task id (task).
func workspace(mode sandboxapi.WorkspaceMode, user, project, scope string) sandboxapi.Workspace {
	req := sandboxapi.WorkspaceRequest{UserID: user, ProjectID: project, Mode: mode}
	ws := sandboxapi.Workspace{
		RepoCacheID: "rc-1",
		Repo: sandboxapi.RepoIdentity{
			Host: "github.com", Owner: "acme/platform", Name: "widgets",
			URL: "https://github.com/acme/platform/widgets.git",
		},
		ProjectID:  project,
		UserID:     user,
		Mode:       mode,
		BaseRef:    "main",
		BaseCommit: "0123456789abcdef0123456789abcdef01234567",
		HostID:     "host-a",
		State:      sandboxapi.WorkspaceReady,
		Dirty:      true,
		PinnedUntil: ptr(time.Date(2200, time.January, 2, 3, 4, 5, 987654321,
			time.UTC)),
		Capabilities: sandboxapi.CapabilitiesFromMode(mode, true),
		LastUsedAt:   ts(10*time.Minute + 7),
		SizeBytes:    4096,
		CreatedAt:    ts(1),
		UpdatedAt:    ts(11*time.Minute + 9),
		// Resolved in a cache fetched just before creation.
		BaseFetchedAt: ptr(ts(-3*time.Second + 11)),
	}
	switch mode {
	case sandboxapi.ModeAnalysis:
		req.BaseRef = scope
		ws.BaseRef = scope
	case sandboxapi.ModeEdit:
		req.ConversationID = scope
		ws.ConversationID = scope
	case sandboxapi.ModeTask:
		req.TaskID = scope
		ws.TaskID = scope
	}
	ws.Key = req.Key()
	ws.ID = sandboxapi.WorkspaceIDForKey(ws.Key)
	ws.BranchName = req.Branch()
	ws.LocalPath = "/data/repos/github.com/acme/platform/widgets/worktrees/" + req.WorktreeDirName()
	return ws
}

func runtimeRecord(id, wsID string) sandbox.RuntimeRecord {
	return sandbox.RuntimeRecord{
		ID:               id,
		WorkspaceID:      wsID,
		BackendKind:      "docker",
		BackendRuntimeID: "container-" + id,
		Image:            "ghcr.io/acme/sandbox:1.2.3",
		State:            sandbox.RuntimeRunning,
		LastStartedAt:    ptr(ts(20*time.Minute + 11)),
		LastUsedAt:       ts(21*time.Minute + 12),
		ExpiresAt:        ptr(ts(6*time.Hour + 13)),
		CreatedAt:        ts(19*time.Minute + 14),
		UpdatedAt:        ts(22*time.Minute + 15),
	}
}

func requireKind(t *testing.T, err error, kind *sandboxapi.Kind, id string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kind, "want %s, got %v", kind.Type, err)
	if id != "" {
		assert.Contains(t, err.Error(), id, "the error message should name the id")
	}
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}

func wsIDs(ws []sandboxapi.Workspace) []string {
	return ids(ws, func(w sandboxapi.Workspace) string { return w.ID })
}

// ---- repo caches ----

func testRepoCacheRoundTrip(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	want := repoCache("rc-1")
	require.NoError(t, s.UpsertRepoCache(ctx, want))
	got, err := s.GetRepoCache(ctx, want.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Zero times round-trip as zero (a cache that has never been fetched).
	zero := repoCache("rc-2")
	zero.LastFetchedAt = time.Time{}
	zero.State = sandbox.RepoCacheCloning
	require.NoError(t, s.UpsertRepoCache(ctx, zero))
	got, err = s.GetRepoCache(ctx, zero.ID)
	require.NoError(t, err)
	assert.True(t, got.LastFetchedAt.IsZero(), "zero time came back as %v", got.LastFetchedAt)
	assert.Equal(t, zero, got)

	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []sandbox.RepoCache{want, zero}, all)
}

func testRepoCacheUpsertUpdates(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	first := repoCache("rc-1")
	require.NoError(t, s.UpsertRepoCache(ctx, first))

	second := first
	second.RepoName = "acme/renamed"
	second.RepoURL = "https://github.com/acme/renamed.git"
	second.Provider = "other"
	second.ProviderHost = "gitlab.example.com"
	second.LocalPath = "/elsewhere/.bare"
	second.AuthScopeHash = "sha256:other"
	second.DefaultBranch = "trunk"
	second.HostID = "host-b"
	second.LastFetchedAt = ts(time.Hour + 1)
	second.LastUsedAt = ts(time.Hour + 2)
	second.SizeBytes = 7
	second.State = sandbox.RepoCacheEvicted
	second.CreatedAt = ts(time.Hour + 3) // ignored: created_at keeps its first value
	second.UpdatedAt = ts(time.Hour + 4)
	require.NoError(t, s.UpsertRepoCache(ctx, second))

	got, err := s.GetRepoCache(ctx, first.ID)
	require.NoError(t, err)
	want := second
	want.CreatedAt = first.CreatedAt
	assert.Equal(t, want, got)

	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 1, "upsert of an existing id must not add a row")
}

func testRepoCacheNotFoundAndDelete(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	_, err := s.GetRepoCache(ctx, "rc-missing")
	requireKind(t, err, sandboxapi.ErrNotFound, "rc-missing")
	assert.NotErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)

	require.NoError(t, s.DeleteRepoCache(ctx, "rc-missing"), "deleting a missing cache is success")

	c := repoCache("rc-1")
	other := repoCache("rc-2")
	require.NoError(t, s.UpsertRepoCache(ctx, c))
	require.NoError(t, s.UpsertRepoCache(ctx, other))
	require.NoError(t, s.DeleteRepoCache(ctx, c.ID))
	_, err = s.GetRepoCache(ctx, c.ID)
	requireKind(t, err, sandboxapi.ErrNotFound, c.ID)
	require.NoError(t, s.DeleteRepoCache(ctx, c.ID), "second delete is success")

	got, err := s.GetRepoCache(ctx, other.ID)
	require.NoError(t, err, "delete must only remove its own row")
	assert.Equal(t, other, got)
}

func testRepoCacheListOrder(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)

	for _, c := range []struct {
		id  string
		age time.Duration
	}{{"rc-c", 3}, {"rc-b", 1}, {"rc-a", 3}, {"rc-d", 2}} {
		rc := repoCache(c.id)
		rc.LastUsedAt = ts(c.age * time.Nanosecond)
		require.NoError(t, s.UpsertRepoCache(ctx, rc))
	}
	all, err = s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"rc-b", "rc-d", "rc-a", "rc-c"},
		ids(all, func(c sandbox.RepoCache) string { return c.ID }),
		"least recently used first, ties by id")
}

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

// ---- runtimes ----

func testRuntimeRoundTrip(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)

	full := runtimeRecord("rt-1", "ws-1")
	bare := runtimeRecord("rt-2", "ws-1")
	bare.LastStartedAt = nil
	bare.ExpiresAt = nil
	bare.State = sandbox.RuntimeStarting
	bare.Image = ""
	for _, want := range []sandbox.RuntimeRecord{full, bare} {
		require.NoError(t, s.UpsertRuntime(ctx, want))
		got, err := s.GetRuntime(ctx, want.ID)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}

	// Upsert of an existing id updates in place; created_at keeps its first value.
	upd := full
	upd.WorkspaceID = "ws-2"
	upd.BackendKind = "e2b"
	upd.BackendRuntimeID = "sbx-42"
	upd.Image = "base"
	upd.State = sandbox.RuntimeStopped
	upd.LastStartedAt = nil
	upd.LastUsedAt = ts(time.Hour + 1)
	upd.ExpiresAt = ptr(ts(2*time.Hour + 2))
	upd.CreatedAt = ts(3 * time.Hour)
	upd.UpdatedAt = ts(time.Hour + 3)
	require.NoError(t, s.UpsertRuntime(ctx, upd))
	got, err := s.GetRuntime(ctx, full.ID)
	require.NoError(t, err)
	want := upd
	want.CreatedAt = full.CreatedAt
	assert.Equal(t, want, got)

	all, err := s.ListRuntimes(ctx, "")
	require.NoError(t, err)
	assert.ElementsMatch(t, []sandbox.RuntimeRecord{want, bare}, all)
}

func testRuntimeNotFoundAndDelete(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	_, err := s.GetRuntime(ctx, "rt-missing")
	requireKind(t, err, sandboxapi.ErrNotFound, "rt-missing")
	assert.NotErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)
	require.NoError(t, s.DeleteRuntime(ctx, "rt-missing"))

	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	r := runtimeRecord(sandboxapi.RuntimeIDFor(ws.ID), ws.ID)
	require.NoError(t, s.UpsertRuntime(ctx, r))
	require.NoError(t, s.DeleteRuntime(ctx, r.ID))
	_, err = s.GetRuntime(ctx, r.ID)
	requireKind(t, err, sandboxapi.ErrNotFound, r.ID)
	require.NoError(t, s.DeleteRuntime(ctx, r.ID), "second delete is success")

	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err, "the workspace survives its runtime's deletion")
	assert.Equal(t, ws, got)
}

func testRuntimesByWorkspace(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	all, err := s.ListRuntimes(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, all)

	mk := func(id, ws string, used time.Duration) sandbox.RuntimeRecord {
		r := runtimeRecord(id, ws)
		r.LastUsedAt = ts(used)
		require.NoError(t, s.UpsertRuntime(ctx, r))
		return r
	}
	a1 := mk("rt-a1", "ws-a", 30)
	a2 := mk("rt-a2", "ws-a", 10)
	b1 := mk("rt-b1", "ws-b", 20)
	a3 := mk("rt-a3", "ws-a", 30)

	rtIDs := func(rs []sandbox.RuntimeRecord) []string {
		return ids(rs, func(r sandbox.RuntimeRecord) string { return r.ID })
	}
	got, err := s.ListRuntimes(ctx, "ws-a")
	require.NoError(t, err)
	assert.Equal(t, []string{a2.ID, a1.ID, a3.ID}, rtIDs(got), "by workspace, LRU first, ties by id")
	assert.Equal(t, []sandbox.RuntimeRecord{a2, a1, a3}, got)

	got, err = s.ListRuntimes(ctx, "ws-b")
	require.NoError(t, err)
	assert.Equal(t, []sandbox.RuntimeRecord{b1}, got)

	got, err = s.ListRuntimes(ctx, "ws-none")
	require.NoError(t, err)
	assert.Empty(t, got)

	got, err = s.ListRuntimes(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{a2.ID, b1.ID, a1.ID, a3.ID}, rtIDs(got))
}

func testEmptyIDRejected(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	ws := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	ws.ID = ""
	require.ErrorIs(t, s.CreateWorkspace(ctx, ws), sandboxapi.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRepoCache(ctx, repoCache("")), sandboxapi.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRuntime(ctx, runtimeRecord("", "ws-1")), sandboxapi.ErrInvalidArgument)

	wss, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Empty(t, wss)
	caches, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Empty(t, caches)
	rts, err := s.ListRuntimes(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, rts)
}

// ---- durability and concurrency ----

func testPersistsAcrossReopen(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := openStore(t, f)

	rc := repoCache("rc-1")
	analysis := workspace(sandboxapi.ModeAnalysis, "u1", "p1", "main")
	analysis.PinnedUntil = nil
	edit := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	rt := runtimeRecord(sandboxapi.RuntimeIDFor(edit.ID), edit.ID)
	require.NoError(t, s.UpsertRepoCache(ctx, rc))
	require.NoError(t, s.CreateWorkspace(ctx, analysis))
	require.NoError(t, s.CreateWorkspace(ctx, edit))
	require.NoError(t, s.UpsertRuntime(ctx, rt))
	require.NoError(t, s.TouchWorkspace(ctx, edit.ID, ts(9*time.Hour+9)))
	edit.LastUsedAt, edit.UpdatedAt = ts(9*time.Hour+9), ts(9*time.Hour+9)
	require.NoError(t, s.Close())

	s = reopen()
	gotRC, err := s.GetRepoCache(ctx, rc.ID)
	require.NoError(t, err)
	assert.Equal(t, rc, gotRC)
	wss, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Equal(t, []sandboxapi.Workspace{analysis, edit}, wss)
	gotRT, err := s.GetRuntime(ctx, rt.ID)
	require.NoError(t, err)
	assert.Equal(t, rt, gotRT)

	// Uniqueness still holds after reopening.
	dup := edit
	dup.ID, dup.Key = "ws-dup", "dup"
	require.ErrorIs(t, s.CreateWorkspace(ctx, dup), sandboxapi.ErrConflict)

	// And writes made after reopening persist too.
	require.NoError(t, s.DeleteWorkspace(ctx, analysis.ID))
	require.NoError(t, s.Close())
	s = reopen()
	_, err = s.GetWorkspace(ctx, analysis.ID)
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)
	got, err := s.GetWorkspace(ctx, edit.ID)
	require.NoError(t, err)
	assert.Equal(t, edit, got)
}

const goroutines = 8

func testConcurrentCreateSameKey(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	base := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")

	// Half the callers use the derived id (the normal case), half a different
	// id with the same (user, project, conversation) key: both must collide.
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, goroutines)
	)
	for i := range goroutines {
		ws := base
		if i%2 == 1 {
			ws.ID = fmt.Sprintf("ws-racer-%d", i)
			ws.Key = fmt.Sprintf("racer-%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.CreateWorkspace(ctx, ws)
		}()
	}
	close(start)
	wg.Wait()

	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		assert.ErrorIs(t, err, sandboxapi.ErrConflict, "goroutine %d: %v", i, err)
	}
	assert.Equal(t, 1, ok, "exactly one concurrent create succeeds")
	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 1)
}

func testConcurrentCreateDistinctKeys(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, goroutines)
	)
	for i := range goroutines {
		ws := workspace(sandboxapi.ModeEdit, "u1", "p1", fmt.Sprintf("conv-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if errs[i] = s.CreateWorkspace(ctx, ws); errs[i] != nil {
				return
			}
			if errs[i] = s.TouchWorkspace(ctx, ws.ID, ts(time.Duration(i))); errs[i] != nil {
				return
			}
			_, errs[i] = s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{UserID: "u1"})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "goroutine %d", i)
	}
	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, goroutines)
}
