package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DB is a database as SQLStore uses it: each call is one statement (its own
// transaction). The SQLite store adapts database/sql to it, the PostgreSQL
// store pgxpool.
type DB interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// QueryRow runs a query expected to return at most one row; a miss
	// surfaces at Scan as the driver's "no rows" error (Dialect.IsNoRows).
	QueryRow(ctx context.Context, q string, args ...any) Row
	// Query runs a query and hands its rows to each, closing them after.
	Query(ctx context.Context, q string, args []any, each func(Rows) error) error
}

// Dialect is what differs between the SQL stores besides their DB: the
// placeholder style of their statements and how their driver's errors map
// onto the sandbox error kinds at the store boundary.
type Dialect struct {
	// Name starts every wrapped driver error ("sqlite store", "postgres store").
	Name string
	// Statements are the SQL texts in the driver's placeholder style.
	Statements *Statements
	// IsNoRows reports the driver's "no rows" error (sql.ErrNoRows, pgx.ErrNoRows).
	IsNoRows func(error) bool
	// IsUniqueViolation reports a UNIQUE or PRIMARY KEY violation.
	IsUniqueViolation func(error) bool
	// IsInvalidValue reports a value the database cannot store or compare
	// (PostgreSQL's SQLSTATE class 22, e.g. a NUL byte in a string); nil
	// when the database has none (SQLite stores any string).
	IsInvalidValue func(error) bool
	// IsTransient reports a failure worth retrying beyond the network
	// failures every dialect shares (NetworkFailure): PostgreSQL's
	// connection errors, shutdowns and "too many connections", SQLite's
	// busy or locked database (resilience.go). nil: network failures only.
	IsTransient func(error) bool
	// Describe names a failure for a client without any connection detail
	// ("SQLSTATE 57P01 (admin shutdown)", "database is locked"), or "" to
	// fall back to NetworkFailure. nil: NetworkFailure only.
	Describe func(error) string
	// AttemptTimeout is this database's default Resilience.AttemptTimeout
	// (0: DefaultAttemptTimeout). An embedded database whose calls queue for
	// one connection and wait out its busy timeout needs longer.
	AttemptTimeout time.Duration
}

// SQLStore is sandbox.Store and HostRegistry on any SQL database through a
// DB and its Dialect: the one implementation of every record method behind
// both the embedded SQLite store and the PostgreSQL store, which supply
// Open, migrations and Close. Rows are encoded and decoded by this package's
// row layer (rows.go), so both databases hold the same values.
//
// Errors are mapped at this boundary: no row → sandboxapi.ErrWorkspaceNotFound
// (workspaces) or sandboxapi.ErrNotFound (repo caches, runtimes, hosts), naming
// the id; unique violation → sandboxapi.ErrConflict; an invalid value →
// sandboxapi.ErrInvalidArgument; a cancelled or expired ctx →
// sandboxapi.ErrTimeout (wrapping ctx's error); any other failure (the database
// unreachable, shutting down, a closed store) → sandboxapi.ErrRuntimeUnavailable
// (SandboxUnavailable, retryable) after bounded retries, its message naming
// no connection detail (resilience.go).
type SQLStore struct {
	db DB
	d  Dialect
	h  health

	mu  sync.Mutex
	res Resilience
}

// NewSQLStore returns the record methods over db in dialect d, with the
// default Resilience.
func NewSQLStore(db DB, d Dialect) *SQLStore {
	s := &SQLStore{db: db, d: d}
	s.SetResilience(Resilience{})
	return s
}

// writeErr maps a failed write of what (e.g. `workspace "ws-…"`) by op.
func (s *SQLStore) writeErr(err error, what, op string) error {
	if s.d.IsUniqueViolation(err) {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: %v", what, err)
	}
	return s.readErr(err, what, op)
}

// readErr maps a failed read (or a write that violates no uniqueness): an
// invalid value is ErrInvalidArgument; anything else already is a typed
// error from do.
func (s *SQLStore) readErr(err error, what, op string) error {
	if s.d.IsInvalidValue != nil && s.d.IsInvalidValue(err) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %v", what, err)
	}
	if sandboxapi.KindOf(err) != nil {
		return err
	}
	// Not reached (do types every failure); never the driver's text.
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "metadata store: %s %s failed", op, what)
}

// get runs a one-row query; a miss is notFound naming what.
func get[T any](ctx context.Context, s *SQLStore, q string, id string, scan func(Row) (T, error), notFound *sandboxapi.Kind, kind string) (T, error) {
	what := fmt.Sprintf("%s %q", kind, id)
	var v T
	err := s.do(ctx, "get", what, func(ctx context.Context) error {
		var err error
		v, err = scan(s.db.QueryRow(ctx, q, id))
		return err
	})
	if err != nil {
		var zero T
		if s.d.IsNoRows(err) {
			return zero, sandboxapi.Errorf(notFound, "%s %q not found", kind, id)
		}
		return zero, s.readErr(err, what, "get")
	}
	return v, nil
}

// list runs a query and reads every row with scan into a non-nil slice.
func list[T any](ctx context.Context, s *SQLStore, q string, args []any, scan func(Row) (T, error), what string) ([]T, error) {
	var out []T
	err := s.do(ctx, "list", what, func(ctx context.Context) error {
		return s.db.Query(ctx, q, args, func(rows Rows) error {
			var err error
			out, err = Collect(rows, scan)
			return err
		})
	})
	if err != nil {
		return nil, s.readErr(err, what, "list")
	}
	return out, nil
}

// exec runs a write of what by op with the given values.
func (s *SQLStore) exec(ctx context.Context, q, what, op string, args ...any) (int64, error) {
	var n int64
	err := s.do(ctx, op, what, func(ctx context.Context) error {
		var err error
		n, err = s.db.Exec(ctx, q, args...)
		return err
	})
	if err != nil {
		return 0, s.writeErr(err, what, op)
	}
	return n, nil
}

// ---- repo caches (docs/DESIGN.md "Storage model") ----

// UpsertRepoCache inserts c (docs/DESIGN.md "Storage model"), or
// replaces every column of the row with c.ID except created_at, which keeps
// its first value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandboxapi.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string the database cannot store.
func (s *SQLStore) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	args, err := RepoCacheValues(c)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, s.d.Statements.UpsertRepoCache, fmt.Sprintf("repo cache %q", c.ID), "upsert", args...)
	return err
}

// GetRepoCache returns the repo cache with id (docs/DESIGN.md
// "Storage model"). Errors: sandboxapi.ErrNotFound (message naming id)
// when there is none.
func (s *SQLStore) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	return get(ctx, s, s.d.Statements.GetRepoCache, id, ScanRepoCache, sandboxapi.ErrNotFound, "repo cache")
}

// ListRepoCaches returns every repo cache (docs/DESIGN.md
// "Storage model"), least recently used first (last_used_at ascending,
// then id), as a non-nil slice.
func (s *SQLStore) ListRepoCaches(ctx context.Context) ([]sandbox.RepoCache, error) {
	return list(ctx, s, s.d.Statements.ListRepoCaches, nil, ScanRepoCache, "repo caches")
}

// DeleteRepoCache deletes the repo cache row with id (docs/DESIGN.md
// "Storage model") (not its files, and not the workspaces that
// reference it). A missing row is success.
func (s *SQLStore) DeleteRepoCache(ctx context.Context, id string) error {
	_, err := s.exec(ctx, s.d.Statements.DeleteRepoCache, fmt.Sprintf("repo cache %q", id), "delete", id)
	return err
}

// ---- workspaces (docs/DESIGN.md "Storage model") ----

// CreateWorkspace inserts ws (docs/DESIGN.md "Storage model").
// Errors: sandboxapi.ErrConflict when a row with ws.ID or ws.Key exists, or one
// with the same uniqueness key of ws.Mode (analysis: user_id, project_id,
// base_ref; edit: user_id, project_id, conversation_id; task: user_id,
// project_id, task_id — docs/DESIGN.md "Storage model", suggested uniqueness), also
// when the other row is being inserted concurrently by another worker;
// sandboxapi.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string the database cannot store.
func (s *SQLStore) CreateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error {
	args, err := WorkspaceValues(ws)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("workspace %q", ws.ID)
	err = s.do(ctx, "create", what, func(ctx context.Context) error {
		_, err := s.db.Exec(ctx, s.d.Statements.CreateWorkspace, args...)
		return err
	})
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %q (key %q) already exists: %v", ws.ID, ws.Key, err)
		}
		return s.readErr(err, what, "create")
	}
	return nil
}

// UpdateWorkspace replaces every column of the row with ws.ID (created_at
// included) with ws's values (docs/DESIGN.md "Storage model").
// Errors: sandboxapi.ErrWorkspaceNotFound when there is no such row;
// sandboxapi.ErrConflict when the new values collide with another row's key or
// mode uniqueness key; sandboxapi.ErrInvalidArgument for an unrepresentable
// time or a string the database cannot store.
func (s *SQLStore) UpdateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error {
	args, err := WorkspaceUpdateValues(ws)
	if err != nil {
		return err
	}
	n, err := s.exec(ctx, s.d.Statements.UpdateWorkspace, fmt.Sprintf("workspace %q (key %q)", ws.ID, ws.Key), "update", args...)
	return affectedOrNotFound(n, err, ws.ID)
}

// affectedOrNotFound is sandboxapi.ErrWorkspaceNotFound when a workspace
// statement changed no row.
func affectedOrNotFound(n int64, err error, id string) error {
	if err == nil && n == 0 {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %q not found", id)
	}
	return err
}

// GetWorkspace returns the workspace with id (docs/DESIGN.md
// "Storage model"). Errors: sandboxapi.ErrWorkspaceNotFound (message naming
// id) when there is none.
func (s *SQLStore) GetWorkspace(ctx context.Context, id string) (sandboxapi.Workspace, error) {
	return get(ctx, s, s.d.Statements.GetWorkspace, id, ScanWorkspace, sandboxapi.ErrWorkspaceNotFound, "workspace")
}

// ListWorkspaces (docs/DESIGN.md "Storage model") returns the
// workspaces matching every non-zero field of f (equality on UserID,
// ProjectID, RepoCacheID, HostID, Mode, State; last_used_at strictly before
// LastUsedBefore), least recently used first (last_used_at ascending, then
// id), at most f.Limit rows when f.Limit > 0, as a non-nil slice. Errors:
// sandboxapi.ErrInvalidArgument for an unrepresentable LastUsedBefore or a
// string the database cannot compare.
func (s *SQLStore) ListWorkspaces(ctx context.Context, f sandbox.WorkspaceFilter) ([]sandboxapi.Workspace, error) {
	q, args, err := s.d.Statements.ListWorkspaces(f)
	if err != nil {
		return nil, err
	}
	return list(ctx, s, q, args, ScanWorkspace, "workspaces")
}

// TouchWorkspace sets last_used_at and updated_at of the workspace with id
// to at (docs/DESIGN.md "Storage model") (stored in UTC; not
// clamped, so an earlier at moves them back). Errors:
// sandboxapi.ErrWorkspaceNotFound when there is no such row;
// sandboxapi.ErrInvalidArgument for an unrepresentable at.
func (s *SQLStore) TouchWorkspace(ctx context.Context, id string, at time.Time) error {
	ts, err := EncodeTime("last_used_at", at)
	if err != nil {
		return err
	}
	n, err := s.exec(ctx, s.d.Statements.TouchWorkspace, fmt.Sprintf("workspace %q", id), "touch", ts, ts, id)
	return affectedOrNotFound(n, err, id)
}

// DeleteWorkspace deletes the workspace row with id (docs/DESIGN.md
// "Storage model") (not its files, and not its runtime rows). A missing
// row is success.
func (s *SQLStore) DeleteWorkspace(ctx context.Context, id string) error {
	_, err := s.exec(ctx, s.d.Statements.DeleteWorkspace, fmt.Sprintf("workspace %q", id), "delete", id)
	return err
}

// ---- runtimes (docs/DESIGN.md "Storage model") ----

// UpsertRuntime inserts r (docs/DESIGN.md "Storage model"), or
// replaces every column of the row with r.ID except created_at, which keeps
// its first value (INSERT … ON CONFLICT (id) DO UPDATE). Errors:
// sandboxapi.ErrInvalidArgument for an empty ID, an unrepresentable time or a
// string the database cannot store.
func (s *SQLStore) UpsertRuntime(ctx context.Context, r sandbox.RuntimeRecord) error {
	args, err := RuntimeValues(r)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, s.d.Statements.UpsertRuntime, fmt.Sprintf("runtime %q", r.ID), "upsert", args...)
	return err
}

// GetRuntime returns the runtime record with id (docs/DESIGN.md
// "Storage model"). Errors: sandboxapi.ErrNotFound (message naming id) when
// there is none.
func (s *SQLStore) GetRuntime(ctx context.Context, id string) (sandbox.RuntimeRecord, error) {
	return get(ctx, s, s.d.Statements.GetRuntime, id, ScanRuntime, sandboxapi.ErrNotFound, "runtime")
}

// ListRuntimes (docs/DESIGN.md "Storage model") returns the runtime
// records of workspaceID, or every record when workspaceID is "", least
// recently used first (last_used_at ascending, then id), as a non-nil slice.
func (s *SQLStore) ListRuntimes(ctx context.Context, workspaceID string) ([]sandbox.RuntimeRecord, error) {
	q, args := s.d.Statements.ListRuntimes(workspaceID)
	return list(ctx, s, q, args, ScanRuntime, "runtimes")
}

// DeleteRuntime deletes the runtime record with id (docs/DESIGN.md
// "Storage model") (never the workspace: "Workspace records should survive
// runtime destruction"). A missing row is success.
func (s *SQLStore) DeleteRuntime(ctx context.Context, id string) error {
	_, err := s.exec(ctx, s.d.Statements.DeleteRuntime, fmt.Sprintf("runtime %q", id), "delete", id)
	return err
}

// ---- worker hosts (table sandbox_hosts, migration 00002_hosts.sql) ----

// UpsertHost inserts h into sandbox_hosts, or replaces every column of the
// row with h.HostID (HostRegistry). Concurrent upserts of one id (two
// workers claiming the same SANDBOX_HOST_ID) never conflict: the last write
// wins. Errors: sandboxapi.ErrInvalidArgument for an empty HostID, a time
// outside the years 0000–9999 or a string the database cannot store.
func (s *SQLStore) UpsertHost(ctx context.Context, h Host) error {
	args, err := HostValues(h)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, s.d.Statements.UpsertHost, fmt.Sprintf("host %q", h.HostID), "upsert", args...)
	return err
}

// GetHost returns the sandbox_hosts row with id (HostRegistry). Errors:
// sandboxapi.ErrNotFound (the message names id) when there is none.
func (s *SQLStore) GetHost(ctx context.Context, id string) (Host, error) {
	return get(ctx, s, s.d.Statements.GetHost, id, ScanHost, sandboxapi.ErrNotFound, "host")
}

// ListHosts returns every sandbox_hosts row ordered by host id (byte
// order), as a non-nil slice (HostRegistry).
func (s *SQLStore) ListHosts(ctx context.Context) ([]Host, error) {
	return list(ctx, s, s.d.Statements.ListHosts, nil, ScanHost, "hosts")
}
