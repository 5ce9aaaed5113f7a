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
