// Package sqlite is the embedded metadata store: sandbox.Store on one SQLite
// file through the pure-Go driver modernc.org/sqlite (DESIGN.md "Embedded
// default and production"). It persists the seed's three tables ("Storage
// Model": sandbox_repo_caches, sandbox_workspaces, sandbox_runtimes), created by
// goose migrations embedded in the binary and applied by Open.
//
// Storage conventions (rows are encoded and SQL is built by the row layer
// of internal/store, which the PostgreSQL store shares):
//   - Times are TEXT in the fixed-width UTC form YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ,
//     so they keep nanoseconds, sort as the instants they name, and read back as
//     time.Time in UTC (the zero time.Time round-trips as zero). Only years
//     0000–9999 are representable; other times are rejected with
//     sandbox.ErrInvalidArgument.
//   - Booleans are INTEGER 0/1. Empty conversation_id and task_id are stored as
//     NULL so the per-mode partial unique indexes ignore them; a nil
//     PinnedUntil, LastStartedAt or ExpiresAt is NULL.
//   - There are no foreign keys between the tables: runtime rows are deleted
//     aggressively while workspaces survive, and whether a repo cache may go is
//     the eviction planner's decision, not the schema's.
//
// Concurrency: the database runs in WAL mode with busy_timeout 5000 ms and
// foreign_keys on, behind a pool of exactly one connection. SQLite admits one
// writer at a time anyway; one connection makes every write in this process
// queue in database/sql instead of failing with SQLITE_BUSY, and every method
// finishes its rows before returning, so nothing can wait on itself. Other
// processes opening the same file wait up to busy_timeout for the write lock.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
)

// BusyTimeout (DESIGN.md "Embedded default and production") is how long a
// statement waits for another connection's (or process's) lock on the database
// file before failing with SQLITE_BUSY.
const BusyTimeout = 5 * time.Second

//go:embed migrations/*.sql
var migrations embed.FS

// Store implements sandbox.Store on one SQLite database file (seed "Storage
// Model"). It is safe for concurrent use. Create it with Open; release it with
// Close. Misses and uniqueness violations wrap the sentinels each method names;
// any other failure (I/O, a closed store, a cancelled ctx) is the driver's
// error wrapped with the operation and id, and wraps no sandbox.Kind.
type Store struct {
	db        *sql.DB
	closeOnce sync.Once
	closeErr  error
}

var _ sandbox.Store = (*Store)(nil)

// Open opens (creating when missing) the SQLite database at path, a plain
// filesystem path (":memory:" gives a private in-memory database, for tests),
// configures it (WAL journal, synchronous NORMAL, busy_timeout BusyTimeout,
// foreign_keys on, immediate transactions, one pooled connection) and applies
// the embedded goose migrations (dialect sqlite3, version table
// goose_db_version) up to the latest. The parent directory must exist.
//
// Errors: sandbox.ErrInvalidArgument when path is empty or contains '?' (it
// would be read as DSN parameters); otherwise the driver's or goose's error,
// wrapped with the path.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, sandbox.Errorf(sandbox.ErrInvalidArgument, "sqlite store path %q: must be a non-empty file path without '?'", path)
	}
	dsn := path + "?_pragma=busy_timeout(" + fmt.Sprint(BusyTimeout.Milliseconds()) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: open: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite store %s: open: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Close closes the database (sandbox.Store.Close). It is idempotent: later
// calls return the first call's result. Calls on a closed Store fail with
// database/sql's "sql: database is closed" error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// statements is the SQL text this store runs, with SQLite's ? placeholders
// (shared with the PostgreSQL store: store.Statements).
var statements = store.NewStatements(store.Question)

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY constraint
// failure (extended result codes 2067 and 1555).
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// ---- repo caches (seed "Storage Model: sandbox_repo_caches") ----

// UpsertRepoCache inserts c (seed "Storage Model: sandbox_repo_caches"), or
// replaces every column of the row with c.ID except created_at, which keeps its
// first value (INSERT … ON CONFLICT(id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	args, err := store.RepoCacheValues(c)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, statements.UpsertRepoCache, args...); err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "repo cache %q: %v", c.ID, err)
		}
		return fmt.Errorf("sqlite store: upsert repo cache %q: %w", c.ID, err)
	}
	return nil
}

// GetRepoCache returns the repo cache with id (seed "Storage Model:
// sandbox_repo_caches"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	c, err := store.ScanRepoCache(s.db.QueryRowContext(ctx, statements.GetRepoCache, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.RepoCache{}, sandbox.Errorf(sandbox.ErrNotFound, "repo cache %q not found", id)
	}
	if err != nil {
		return sandbox.RepoCache{}, fmt.Errorf("sqlite store: get repo cache %q: %w", id, err)
	}
	return c, nil
}

// ListRepoCaches returns every repo cache (seed "Storage Model:
// sandbox_repo_caches"), least recently used first (last_used_at ascending,
// then id), as a non-nil slice.
func (s *Store) ListRepoCaches(ctx context.Context) ([]sandbox.RepoCache, error) {
	out, err := list(ctx, s, statements.ListRepoCaches, nil, store.ScanRepoCache)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list repo caches: %w", err)
	}
	return out, nil
}

// DeleteRepoCache deletes the repo cache row with id (seed "Storage Model:
// sandbox_repo_caches") (not its files, and not the workspaces that reference
// it). A missing row is success.
func (s *Store) DeleteRepoCache(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, statements.DeleteRepoCache, id); err != nil {
		return fmt.Errorf("sqlite store: delete repo cache %q: %w", id, err)
	}
	return nil
}

// ---- workspaces (seed "Storage Model: sandbox_workspaces") ----

// CreateWorkspace inserts ws (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrConflict when a row with ws.ID or ws.Key exists, or one
// with the same uniqueness key of ws.Mode (analysis: user_id, project_id,
// base_ref; edit: user_id, project_id, conversation_id; task: user_id,
// project_id, task_id — seed "Storage Model", suggested uniqueness);
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) CreateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	args, err := store.WorkspaceValues(ws)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, statements.CreateWorkspace, args...); err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "workspace %q (key %q) already exists: %v", ws.ID, ws.Key, err)
		}
		return fmt.Errorf("sqlite store: create workspace %q: %w", ws.ID, err)
	}
	return nil
}

// UpdateWorkspace replaces every column of the row with ws.ID (created_at
// included) with ws's values (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrWorkspaceNotFound when there is no such row;
// sandbox.ErrConflict when the new values collide with another row's key or
// mode uniqueness key; sandbox.ErrInvalidArgument for an unrepresentable time.
func (s *Store) UpdateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	args, err := store.WorkspaceUpdateValues(ws)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, statements.UpdateWorkspace, args...)
	if err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "workspace %q (key %q): %v", ws.ID, ws.Key, err)
		}
		return fmt.Errorf("sqlite store: update workspace %q: %w", ws.ID, err)
	}
	return affectedOrNotFound(res, ws.ID)
}

func affectedOrNotFound(res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite store: workspace %q: %w", id, err)
	}
	if n == 0 {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	return nil
}

// GetWorkspace returns the workspace with id (seed "Storage Model:
// sandbox_workspaces"). Errors: sandbox.ErrWorkspaceNotFound (message naming
// id) when there is none.
func (s *Store) GetWorkspace(ctx context.Context, id string) (sandbox.Workspace, error) {
	ws, err := store.ScanWorkspace(s.db.QueryRowContext(ctx, statements.GetWorkspace, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.Workspace{}, sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	if err != nil {
		return sandbox.Workspace{}, fmt.Errorf("sqlite store: get workspace %q: %w", id, err)
	}
	return ws, nil
}

// ListWorkspaces (seed "Storage Model: sandbox_workspaces") returns the
// workspaces matching every non-zero field of f (equality on UserID, ProjectID,
// RepoCacheID, HostID, Mode, State; last_used_at strictly before
// LastUsedBefore), least recently used first (last_used_at ascending, then id),
// at most f.Limit rows when f.Limit > 0, as a non-nil slice. Errors:
// sandbox.ErrInvalidArgument for an unrepresentable LastUsedBefore.
func (s *Store) ListWorkspaces(ctx context.Context, f sandbox.WorkspaceFilter) ([]sandbox.Workspace, error) {
	q, args, err := statements.ListWorkspaces(f)
	if err != nil {
		return nil, err
	}
	out, err := list(ctx, s, q, args, store.ScanWorkspace)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list workspaces: %w", err)
	}
	return out, nil
}

// TouchWorkspace sets last_used_at and updated_at of the workspace with id to
// at (seed "Storage Model: sandbox_workspaces") (stored in UTC; not clamped, so
// an earlier at moves them back). Errors: sandbox.ErrWorkspaceNotFound when
// there is no such row; sandbox.ErrInvalidArgument for an unrepresentable at.
func (s *Store) TouchWorkspace(ctx context.Context, id string, at time.Time) error {
	ts, err := store.EncodeTime("last_used_at", at)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, statements.TouchWorkspace, ts, ts, id)
	if err != nil {
		return fmt.Errorf("sqlite store: touch workspace %q: %w", id, err)
	}
	return affectedOrNotFound(res, id)
}

// DeleteWorkspace deletes the workspace row with id (seed "Storage Model:
// sandbox_workspaces") (not its files, and not its runtime rows). A missing row
// is success.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, statements.DeleteWorkspace, id); err != nil {
		return fmt.Errorf("sqlite store: delete workspace %q: %w", id, err)
	}
	return nil
}

// ---- runtimes (seed "Storage Model: sandbox_runtimes") ----

// UpsertRuntime inserts r (seed "Storage Model: sandbox_runtimes"), or replaces
// every column of the row with r.ID except created_at, which keeps its first
// value (INSERT … ON CONFLICT(id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) UpsertRuntime(ctx context.Context, r sandbox.RuntimeRecord) error {
	args, err := store.RuntimeValues(r)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, statements.UpsertRuntime, args...); err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "runtime %q: %v", r.ID, err)
		}
		return fmt.Errorf("sqlite store: upsert runtime %q: %w", r.ID, err)
	}
	return nil
}

// GetRuntime returns the runtime record with id (seed "Storage Model:
// sandbox_runtimes"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRuntime(ctx context.Context, id string) (sandbox.RuntimeRecord, error) {
	r, err := store.ScanRuntime(s.db.QueryRowContext(ctx, statements.GetRuntime, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.RuntimeRecord{}, sandbox.Errorf(sandbox.ErrNotFound, "runtime %q not found", id)
	}
	if err != nil {
		return sandbox.RuntimeRecord{}, fmt.Errorf("sqlite store: get runtime %q: %w", id, err)
	}
	return r, nil
}

// ListRuntimes (seed "Storage Model: sandbox_runtimes") returns the runtime
// records of workspaceID, or every record when workspaceID is "", least
// recently used first (last_used_at ascending, then id), as a non-nil slice.
func (s *Store) ListRuntimes(ctx context.Context, workspaceID string) ([]sandbox.RuntimeRecord, error) {
	q, args := statements.ListRuntimes(workspaceID)
	out, err := list(ctx, s, q, args, store.ScanRuntime)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list runtimes: %w", err)
	}
	return out, nil
}

// DeleteRuntime deletes the runtime record with id (seed "Storage Model:
// sandbox_runtimes") (never the workspace: "Workspace records should survive
// runtime destruction"). A missing row is success.
func (s *Store) DeleteRuntime(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, statements.DeleteRuntime, id); err != nil {
		return fmt.Errorf("sqlite store: delete runtime %q: %w", id, err)
	}
	return nil
}

// list runs query q with args and reads every row with scan into a non-nil
// slice, finishing the rows before it returns; the error is the driver's,
// from the query or from reading.
func list[T any](ctx context.Context, s *Store, q string, args []any, scan func(store.Row) (T, error)) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, scan)
}
