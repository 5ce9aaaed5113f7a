// Package storetest is the contract suite every sandbox.Store implementation
// runs (DESIGN.md "Layout": store/sqlite, store/postgres + storetest). It
// asserts real rows through the port only, so it is store-agnostic: the
// behaviour it pins is the one documented on sandbox.Store and in
// docs/DESIGN.md "Storage model".
package storetest

import (
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
