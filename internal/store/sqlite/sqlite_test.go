package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
)

func factory(t *testing.T) func() sandbox.Store {
	path := filepath.Join(t.TempDir(), "sandbox.db")
	return func() sandbox.Store {
		s, err := Open(context.Background(), path)
		require.NoError(t, err)
		return s
	}
}

func TestContract(t *testing.T) {
	storetest.Run(t, factory)
}

func TestOpenConfiguresDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandbox.db")
	s, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	var journal string
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal))
	assert.Equal(t, "wal", journal)
	var busy, fk, sync int
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy))
	assert.Equal(t, int(BusyTimeout.Milliseconds()), busy)
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk))
	assert.Equal(t, 1, fk)
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	assert.Equal(t, 1, sync, "synchronous NORMAL")
	assert.Equal(t, 1, s.db.Stats().MaxOpenConnections)

	var version int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version`).Scan(&version))
	assert.Equal(t, 2, version, "00001_init.sql and 00002_hosts.sql applied")

	// The partial unique indexes and eviction indexes exist.
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sandbox_workspaces' AND sql IS NOT NULL`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	assert.Subset(t, names, []string{
		"sandbox_workspaces_key", "sandbox_workspaces_analysis_uq", "sandbox_workspaces_edit_uq",
		"sandbox_workspaces_task_uq", "sandbox_workspaces_state_last_used", "sandbox_workspaces_size",
		"sandbox_workspaces_repo_cache", "sandbox_workspaces_host",
	})

	// Reopening applies nothing new and keeps the schema.
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	s2, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	require.NoError(t, s2.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM goose_db_version WHERE version_id = 1`).Scan(&version))
	assert.Equal(t, 1, version)
}

func TestStoredTimeFormat(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sandbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	r := sandbox.RuntimeRecord{
		ID: "rt-1", WorkspaceID: "ws-1", State: sandbox.RuntimeRunning,
		LastUsedAt: time.Date(2025, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)),
	}
	require.NoError(t, s.UpsertRuntime(ctx, r))
	var used string
	var started, expires *string
	require.NoError(t, s.db.QueryRowContext(ctx,
		`SELECT last_used_at, last_started_at, expires_at FROM sandbox_runtimes WHERE id = 'rt-1'`).Scan(&used, &started, &expires))
	assert.Equal(t, "2025-01-02T02:04:05.000000600Z", used, "fixed-width UTC text")
	assert.Nil(t, started, "nil *time.Time is NULL")
	assert.Nil(t, expires)

	ws := sandbox.Workspace{ID: "ws-1", Key: "k", Mode: sandbox.ModeAnalysis}
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	var conv, task *string
	require.NoError(t, s.db.QueryRowContext(ctx,
		`SELECT conversation_id, task_id FROM sandbox_workspaces WHERE id = 'ws-1'`).Scan(&conv, &task))
	assert.Nil(t, conv, "empty conversation_id is NULL")
	assert.Nil(t, task, "empty task_id is NULL")
}

func TestUnrepresentableTimes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sandbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := sandbox.Workspace{ID: "ws-1", Key: "k", Mode: sandbox.ModeEdit, ConversationID: "c", PinnedUntil: &far}
	require.ErrorIs(t, s.CreateWorkspace(ctx, ws), sandbox.ErrInvalidArgument)
	ws.PinnedUntil = nil
	require.NoError(t, s.CreateWorkspace(ctx, ws))
	require.ErrorIs(t, s.TouchWorkspace(ctx, ws.ID, far), sandbox.ErrInvalidArgument)
	_, err = s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{LastUsedBefore: far})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRepoCache(ctx, sandbox.RepoCache{ID: "rc", LastUsedAt: far}), sandbox.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRuntime(ctx, sandbox.RuntimeRecord{ID: "rt", ExpiresAt: &far}), sandbox.ErrInvalidArgument)

	// The largest representable time round-trips.
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	ws.PinnedUntil = &last
	require.NoError(t, s.UpdateWorkspace(ctx, ws))
	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	require.NotNil(t, got.PinnedUntil)
	assert.Equal(t, last, *got.PinnedUntil)
}

func TestOpenRejectsBadPaths(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "")
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	_, err = Open(ctx, filepath.Join(t.TempDir(), "x.db?mode=ro"))
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	_, err = Open(ctx, filepath.Join(t.TempDir(), "no-such-dir", "x.db"))
	require.Error(t, err)
}

// TestTwoStoresOneFile is two processes sharing the data dir: writes from both
// interleave without SQLITE_BUSY (busy_timeout), and uniqueness holds across them.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandbox.db")
	a, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

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
			ws := sandbox.Workspace{
				ID: fmt.Sprintf("ws-%03d", i), Key: fmt.Sprintf("k-%03d", i),
				Mode: sandbox.ModeTask, UserID: "u", ProjectID: "p",
				// pairs (2k, 2k+1) share a task id: one of each pair must conflict
				TaskID: fmt.Sprintf("t-%03d", i/2),
			}
			errs[i] = s.CreateWorkspace(ctx, ws)
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, sandbox.ErrConflict, "create %d", i)
	}
	assert.Equal(t, n, ok)
	all, err := b.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, n)
}

func TestMemoryDatabase(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.UpsertRepoCache(ctx, sandbox.RepoCache{ID: "rc-1"}))
	got, err := s.GetRepoCache(ctx, "rc-1")
	require.NoError(t, err)
	assert.Equal(t, sandbox.RepoCache{ID: "rc-1"}, got)
}
