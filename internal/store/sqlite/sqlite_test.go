package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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

// TestSQLContract is what this store shares with the PostgreSQL store beyond
// the port: the stored time text, the representable years, and two processes
// on one database file (their writes wait on each other through busy_timeout
// instead of failing with SQLITE_BUSY).
func TestSQLContract(t *testing.T) {
	storetest.RunSQL(t, factory, func(s sandbox.Store, query string, dest ...any) error {
		return s.(*Store).db.QueryRowContext(context.Background(), query).Scan(dest...)
	})
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
	assert.Equal(t, 4, version, "00001_init.sql, 00002_hosts.sql, 00003_base_fetched_at.sql and 00004_network_policy.sql applied")

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

func TestOpenRejectsBadPaths(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = Open(ctx, filepath.Join(t.TempDir(), "x.db?mode=ro"))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = Open(ctx, filepath.Join(t.TempDir(), "no-such-dir", "x.db"))
	require.Error(t, err)
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

func benchWorkspace(b testing.TB, s *Store) sandboxapi.Workspace {
	req := sandboxapi.WorkspaceRequest{UserID: "u", ProjectID: "p", Mode: sandboxapi.ModeEdit, ConversationID: "c"}
	now := time.Now().UTC()
	ws := sandboxapi.Workspace{
		Key: req.Key(), ID: sandboxapi.WorkspaceIDForKey(req.Key()), RepoCacheID: "rc-1",
		Repo:   sandboxapi.RepoIdentity{Host: "github.com", Owner: "acme", Name: "widgets", URL: "https://github.com/acme/widgets.git"},
		UserID: "u", ProjectID: "p", Mode: sandboxapi.ModeEdit, ConversationID: "c", BaseRef: "main", BranchName: req.Branch(),
		BaseCommit: "0123456789abcdef0123456789abcdef01234567", LocalPath: "/data/repos/github.com/acme/widgets/worktrees/" + req.WorktreeDirName(),
		HostID: "h", State: sandboxapi.WorkspaceReady, Capabilities: sandboxapi.CapabilitiesFromMode(sandboxapi.ModeEdit, true),
		LastUsedAt: now, CreatedAt: now, UpdatedAt: now,
	}
	require.NoError(b, s.CreateWorkspace(context.Background(), ws))
	return ws
}

// Statements are prepared once and reused; a closed store still fails as
// the store fails when closed (SandboxUnavailable, "the store is closed"),
// prepared statement or not.
func TestStatementsArePreparedOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sandbox.db"))
	require.NoError(t, err)
	ws := benchWorkspace(t, s)
	for range 3 {
		got, err := s.GetWorkspace(ctx, ws.ID)
		require.NoError(t, err)
		assert.Equal(t, ws.LocalPath, got.LocalPath)
	}
	s.stmts.mu.Lock()
	n := len(s.stmts.m)
	s.stmts.mu.Unlock()
	assert.Equal(t, 2, n, "one insert, one select")
	require.NoError(t, s.Close())
	_, err = s.GetWorkspace(ctx, ws.ID)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.ErrorContains(t, err, "the store is closed")
	assert.Empty(t, s.stmts.m)
}

// BenchmarkGetWorkspace reads one workspace row (what every session
// operation's activity does first) through the store, next to the same
// query unprepared on the same database (the store before its statements
// were prepared once).
func BenchmarkGetWorkspace(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "sandbox.db"))
	require.NoError(b, err)
	defer s.Close()
	ws := benchWorkspace(b, s)
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetWorkspace(ctx, ws.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-unprepared", func(b *testing.B) {
		for b.Loop() {
			row := s.db.QueryRowContext(ctx, statements.GetWorkspace, ws.ID)
			if _, err := store.ScanWorkspace(row); err != nil {
				b.Fatal(err)
			}
		}
	})
}
