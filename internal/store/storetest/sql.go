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

// QueryRow runs query (plain SQL without parameters) on the database under
// the Store s, which the caller's factory opened, and scans its one row into
// dest. RunSQL reads stored column text back with it.
type QueryRow func(s sandbox.Store, query string, dest ...any) error

// RunSQL is the part of the contract the SQL stores (store/sqlite,
// store/postgres) share beyond the sandbox.Store port, given the same
// factory as Run and a QueryRow for the store's own database handle: times
// are stored as fixed-width UTC text with nanoseconds (store.TimeLayout), nil
// times and empty conversation/task ids as NULL; times outside the years
// 0000–9999 are rejected with sandboxapi.ErrInvalidArgument while the range's
// extremes round-trip to the nanosecond; and two Stores open on one database
// at once (two workers or processes) interleave their writes with the
// per-mode uniqueness holding across them. It closes every Store it opens.
func RunSQL(t *testing.T, newStore Factory, queryRow QueryRow) {
	t.Helper()
	t.Run("StoredTimeFormat", func(t *testing.T) { testStoredTimeFormat(t, newStore, queryRow) })
	t.Run("UnrepresentableTimes", func(t *testing.T) { testUnrepresentableTimes(t, newStore) })
	t.Run("TwoStoresOneDatabase", func(t *testing.T) { testTwoStoresOneDatabase(t, newStore) })
}

func testStoredTimeFormat(t *testing.T, f Factory, queryRow QueryRow) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	r := sandbox.RuntimeRecord{
		ID: "rt-1", WorkspaceID: "ws-1", State: sandbox.RuntimeRunning,
		LastUsedAt: time.Date(2025, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)),
	}
	require.NoError(t, s.UpsertRuntime(ctx, r))
	var used string
	var started, expires *string
	require.NoError(t, queryRow(s,
		`SELECT last_used_at, last_started_at, expires_at FROM sandbox_runtimes WHERE id = 'rt-1'`, &used, &started, &expires))
	assert.Equal(t, "2025-01-02T02:04:05.000000600Z", used, "fixed-width UTC text")
	assert.Nil(t, started, "nil *time.Time is NULL")
	assert.Nil(t, expires)

	ws := sandboxapi.Workspace{ID: "ws-1", Key: "k", Mode: sandboxapi.ModeAnalysis}
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	var conv, task *string
	var created string
	require.NoError(t, queryRow(s,
		`SELECT conversation_id, task_id, created_at FROM sandbox_workspaces WHERE id = 'ws-1'`, &conv, &task, &created))
	assert.Nil(t, conv, "empty conversation_id is NULL")
	assert.Nil(t, task, "empty task_id is NULL")
	assert.Equal(t, "0001-01-01T00:00:00.000000000Z", created, "the zero time")
}

func testUnrepresentableTimes(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := sandboxapi.Workspace{ID: "ws-1", Key: "k", Mode: sandboxapi.ModeEdit, ConversationID: "c", PinnedUntil: &far}
	require.ErrorIs(t, s.CreateWorkspace(ctx, ws), sandboxapi.ErrInvalidArgument)
	ws.PinnedUntil = nil
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	require.ErrorIs(t, s.TouchWorkspace(ctx, ws.ID, far), sandboxapi.ErrInvalidArgument)
	_, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{LastUsedBefore: far})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRepoCache(ctx, sandbox.RepoCache{ID: "rc", LastUsedAt: far}), sandboxapi.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRuntime(ctx, sandbox.RuntimeRecord{ID: "rt", ExpiresAt: &far}), sandboxapi.ErrInvalidArgument)

	// The extremes of the representable range round-trip to the nanosecond.
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	first := time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC)
	ws.PinnedUntil = &last
	ws.CreatedAt = first
	require.NoError(t, s.UpdateWorkspace(ctx, ws))
	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	require.NotNil(t, got.PinnedUntil)
	assert.Equal(t, last, *got.PinnedUntil)
	assert.Equal(t, first, got.CreatedAt)
}

func testTwoStoresOneDatabase(t *testing.T, f Factory) {
	ctx := context.Background()
	a, open := openStore(t, f)
	b := open()
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range 2 * n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateWorkspace(ctx, sandboxapi.Workspace{
				ID: fmt.Sprintf("ws-%03d", i), Key: fmt.Sprintf("k-%03d", i),
				Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p",
				// pairs (2k, 2k+1), one on each store, share a task id: one of each pair must conflict
				TaskID: fmt.Sprintf("t-%03d", i/2),
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, sandboxapi.ErrConflict, "create %d", i)
	}
	assert.Equal(t, n, ok)
	all, err := b.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, n)
}
