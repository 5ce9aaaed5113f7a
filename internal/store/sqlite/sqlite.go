// Package sqlite is the embedded metadata store: sandbox.Store on one SQLite
// file through the pure-Go driver modernc.org/sqlite (DESIGN.md "Embedded
// default and production"). It persists the seed's three tables ("Storage
// Model": sandbox_repo_caches, sandbox_workspaces, sandbox_runtimes), created by
// goose migrations embedded in the binary and applied by Open.
//
// Storage conventions:
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

// timeLayout is fixed-width so that text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// encodeTime returns t in UTC as timeLayout text. field names the column for
// the error (sandbox.ErrInvalidArgument when the year is outside 0000–9999).
func encodeTime(field string, t time.Time) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "%s %s: year outside 0000-9999", field, t.Format(time.RFC3339Nano))
	}
	return t.Format(timeLayout), nil
}

// encodeTimePtr is encodeTime for a nullable column: nil is NULL.
func encodeTimePtr(field string, t *time.Time) (sql.NullString, error) {
	if t == nil {
		return sql.NullString{}, nil
	}
	s, err := encodeTime(field, *t)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: s, Valid: true}, nil
}

func decodeTime(field, s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("column %s: bad time %q: %w", field, s, err)
	}
	return t.UTC(), nil
}

func decodeTimePtr(field string, s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := decodeTime(field, s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// nullIfEmpty stores "" as NULL (conversation_id, task_id).
func nullIfEmpty(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// timeEncoder collects encoded times and the first encoding error, so that a
// row's columns can be built in one expression list.
type timeEncoder struct{ err error }

func (e *timeEncoder) t(field string, t time.Time) string {
	s, err := encodeTime(field, t)
	if err != nil && e.err == nil {
		e.err = err
	}
	return s
}

func (e *timeEncoder) p(field string, t *time.Time) sql.NullString {
	s, err := encodeTimePtr(field, t)
	if err != nil && e.err == nil {
		e.err = err
	}
	return s
}

// timeDecoder is timeEncoder's reading twin.
type timeDecoder struct{ err error }

func (d *timeDecoder) t(field, s string) time.Time {
	t, err := decodeTime(field, s)
	if err != nil && d.err == nil {
		d.err = err
	}
	return t
}

func (d *timeDecoder) p(field string, s sql.NullString) *time.Time {
	t, err := decodeTimePtr(field, s)
	if err != nil && d.err == nil {
		d.err = err
	}
	return t
}

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

// requireID rejects an empty id with sandbox.ErrInvalidArgument.
func requireID(what, id string) error {
	if id == "" {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "%s id: must not be empty", what)
	}
	return nil
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// ---- repo caches (seed "Storage Model: sandbox_repo_caches") ----

const repoCacheColumns = `id, repo_name, repo_url, provider, provider_host, local_path,
	auth_scope_hash, default_branch, host_id, last_fetched_at, last_used_at, size_bytes,
	state, created_at, updated_at`

// UpsertRepoCache inserts c (seed "Storage Model: sandbox_repo_caches"), or
// replaces every column of the row with c.ID except created_at, which keeps its
// first value (INSERT … ON CONFLICT(id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	if err := requireID("repo cache", c.ID); err != nil {
		return err
	}
	var te timeEncoder
	args := []any{
		c.ID, c.RepoName, c.RepoURL, c.Provider, c.ProviderHost, c.LocalPath,
		c.AuthScopeHash, c.DefaultBranch, c.HostID,
		te.t("last_fetched_at", c.LastFetchedAt), te.t("last_used_at", c.LastUsedAt),
		c.SizeBytes, string(c.State),
		te.t("created_at", c.CreatedAt), te.t("updated_at", c.UpdatedAt),
	}
	if te.err != nil {
		return te.err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_repo_caches (`+repoCacheColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			repo_name = excluded.repo_name,
			repo_url = excluded.repo_url,
			provider = excluded.provider,
			provider_host = excluded.provider_host,
			local_path = excluded.local_path,
			auth_scope_hash = excluded.auth_scope_hash,
			default_branch = excluded.default_branch,
			host_id = excluded.host_id,
			last_fetched_at = excluded.last_fetched_at,
			last_used_at = excluded.last_used_at,
			size_bytes = excluded.size_bytes,
			state = excluded.state,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "repo cache %q: %v", c.ID, err)
		}
		return fmt.Errorf("sqlite store: upsert repo cache %q: %w", c.ID, err)
	}
	return nil
}

func scanRepoCache(sc scanner) (sandbox.RepoCache, error) {
	var (
		c                                              sandbox.RepoCache
		state                                          string
		lastFetched, lastUsed, createdAt, updatedAtStr string
	)
	err := sc.Scan(&c.ID, &c.RepoName, &c.RepoURL, &c.Provider, &c.ProviderHost, &c.LocalPath,
		&c.AuthScopeHash, &c.DefaultBranch, &c.HostID, &lastFetched, &lastUsed, &c.SizeBytes,
		&state, &createdAt, &updatedAtStr)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	var td timeDecoder
	c.State = sandbox.RepoCacheState(state)
	c.LastFetchedAt = td.t("last_fetched_at", lastFetched)
	c.LastUsedAt = td.t("last_used_at", lastUsed)
	c.CreatedAt = td.t("created_at", createdAt)
	c.UpdatedAt = td.t("updated_at", updatedAtStr)
	return c, td.err
}

// GetRepoCache returns the repo cache with id (seed "Storage Model:
// sandbox_repo_caches"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	c, err := scanRepoCache(s.db.QueryRowContext(ctx,
		`SELECT `+repoCacheColumns+` FROM sandbox_repo_caches WHERE id = ?`, id))
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
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+repoCacheColumns+` FROM sandbox_repo_caches ORDER BY last_used_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list repo caches: %w", err)
	}
	defer rows.Close()
	out := []sandbox.RepoCache{}
	for rows.Next() {
		c, err := scanRepoCache(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list repo caches: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list repo caches: %w", err)
	}
	return out, nil
}

// DeleteRepoCache deletes the repo cache row with id (seed "Storage Model:
// sandbox_repo_caches") (not its files, and not the workspaces that reference
// it). A missing row is success.
func (s *Store) DeleteRepoCache(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandbox_repo_caches WHERE id = ?`, id); err != nil {
		return fmt.Errorf("sqlite store: delete repo cache %q: %w", id, err)
	}
	return nil
}

// ---- workspaces (seed "Storage Model: sandbox_workspaces") ----

const workspaceColumns = `id, key, repo_cache_id, repo_host, repo_owner, repo_name, repo_url,
	project_id, user_id, mode, conversation_id, task_id, base_ref, base_commit, branch_name,
	local_path, host_id, state, dirty, pinned_until, cap_writable, cap_isolated, cap_persistent,
	last_used_at, size_bytes, created_at, updated_at`

// workspaceArgs returns ws's column values in workspaceColumns order.
func workspaceArgs(ws sandbox.Workspace) ([]any, error) {
	var te timeEncoder
	args := []any{
		ws.ID, ws.Key, ws.RepoCacheID, ws.Repo.Host, ws.Repo.Owner, ws.Repo.Name, ws.Repo.URL,
		ws.ProjectID, ws.UserID, string(ws.Mode), nullIfEmpty(ws.ConversationID), nullIfEmpty(ws.TaskID),
		ws.BaseRef, ws.BaseCommit, ws.BranchName, ws.LocalPath, ws.HostID, string(ws.State),
		ws.Dirty, te.p("pinned_until", ws.PinnedUntil),
		ws.Capabilities.Writable, ws.Capabilities.Isolated, ws.Capabilities.Persistent,
		te.t("last_used_at", ws.LastUsedAt), ws.SizeBytes,
		te.t("created_at", ws.CreatedAt), te.t("updated_at", ws.UpdatedAt),
	}
	return args, te.err
}

func scanWorkspace(sc scanner) (sandbox.Workspace, error) {
	var (
		ws                                       sandbox.Workspace
		mode, state                              string
		conversationID, taskID, pinnedUntil      sql.NullString
		lastUsed, createdAt, updatedAt           string
		dirty, capWritable, capIso, capPersisted bool
	)
	err := sc.Scan(&ws.ID, &ws.Key, &ws.RepoCacheID, &ws.Repo.Host, &ws.Repo.Owner, &ws.Repo.Name, &ws.Repo.URL,
		&ws.ProjectID, &ws.UserID, &mode, &conversationID, &taskID, &ws.BaseRef, &ws.BaseCommit, &ws.BranchName,
		&ws.LocalPath, &ws.HostID, &state, &dirty, &pinnedUntil, &capWritable, &capIso, &capPersisted,
		&lastUsed, &ws.SizeBytes, &createdAt, &updatedAt)
	if err != nil {
		return sandbox.Workspace{}, err
	}
	var td timeDecoder
	ws.Mode = sandbox.WorkspaceMode(mode)
	ws.State = sandbox.WorkspaceState(state)
	ws.ConversationID = conversationID.String
	ws.TaskID = taskID.String
	ws.Dirty = dirty
	ws.PinnedUntil = td.p("pinned_until", pinnedUntil)
	ws.Capabilities = sandbox.Capabilities{Writable: capWritable, Isolated: capIso, Persistent: capPersisted}
	ws.LastUsedAt = td.t("last_used_at", lastUsed)
	ws.CreatedAt = td.t("created_at", createdAt)
	ws.UpdatedAt = td.t("updated_at", updatedAt)
	return ws, td.err
}

// CreateWorkspace inserts ws (seed "Storage Model: sandbox_workspaces").
// Errors: sandbox.ErrConflict when a row with ws.ID or ws.Key exists, or one
// with the same uniqueness key of ws.Mode (analysis: user_id, project_id,
// base_ref; edit: user_id, project_id, conversation_id; task: user_id,
// project_id, task_id — seed "Storage Model", suggested uniqueness);
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) CreateWorkspace(ctx context.Context, ws sandbox.Workspace) error {
	if err := requireID("workspace", ws.ID); err != nil {
		return err
	}
	args, err := workspaceArgs(ws)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sandbox_workspaces (`+workspaceColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	if err != nil {
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
	args, err := workspaceArgs(ws)
	if err != nil {
		return err
	}
	// Move id from the front to the WHERE clause.
	args = append(args[1:], ws.ID)
	res, err := s.db.ExecContext(ctx, `UPDATE sandbox_workspaces SET
		key = ?, repo_cache_id = ?, repo_host = ?, repo_owner = ?, repo_name = ?, repo_url = ?,
		project_id = ?, user_id = ?, mode = ?, conversation_id = ?, task_id = ?, base_ref = ?,
		base_commit = ?, branch_name = ?, local_path = ?, host_id = ?, state = ?, dirty = ?,
		pinned_until = ?, cap_writable = ?, cap_isolated = ?, cap_persistent = ?,
		last_used_at = ?, size_bytes = ?, created_at = ?, updated_at = ?
		WHERE id = ?`, args...)
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
	ws, err := scanWorkspace(s.db.QueryRowContext(ctx,
		`SELECT `+workspaceColumns+` FROM sandbox_workspaces WHERE id = ?`, id))
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
	var (
		where []string
		args  []any
	)
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	eq("user_id", f.UserID)
	eq("project_id", f.ProjectID)
	eq("repo_cache_id", f.RepoCacheID)
	eq("host_id", f.HostID)
	eq("mode", string(f.Mode))
	eq("state", string(f.State))
	if !f.LastUsedBefore.IsZero() {
		before, err := encodeTime("last_used_before", f.LastUsedBefore)
		if err != nil {
			return nil, err
		}
		where = append(where, "last_used_at < ?")
		args = append(args, before)
	}
	q := `SELECT ` + workspaceColumns + ` FROM sandbox_workspaces`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY last_used_at, id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list workspaces: %w", err)
	}
	defer rows.Close()
	out := []sandbox.Workspace{}
	for rows.Next() {
		ws, err := scanWorkspace(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list workspaces: %w", err)
		}
		out = append(out, ws)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list workspaces: %w", err)
	}
	return out, nil
}

// TouchWorkspace sets last_used_at and updated_at of the workspace with id to
// at (seed "Storage Model: sandbox_workspaces") (stored in UTC; not clamped, so
// an earlier at moves them back). Errors: sandbox.ErrWorkspaceNotFound when
// there is no such row; sandbox.ErrInvalidArgument for an unrepresentable at.
func (s *Store) TouchWorkspace(ctx context.Context, id string, at time.Time) error {
	ts, err := encodeTime("last_used_at", at)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE sandbox_workspaces SET last_used_at = ?, updated_at = ? WHERE id = ?`, ts, ts, id)
	if err != nil {
		return fmt.Errorf("sqlite store: touch workspace %q: %w", id, err)
	}
	return affectedOrNotFound(res, id)
}

// DeleteWorkspace deletes the workspace row with id (seed "Storage Model:
// sandbox_workspaces") (not its files, and not its runtime rows). A missing row
// is success.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandbox_workspaces WHERE id = ?`, id); err != nil {
		return fmt.Errorf("sqlite store: delete workspace %q: %w", id, err)
	}
	return nil
}

// ---- runtimes (seed "Storage Model: sandbox_runtimes") ----

const runtimeColumns = `id, workspace_id, backend_kind, backend_runtime_id, image, state,
	last_started_at, last_used_at, expires_at, created_at, updated_at`

// UpsertRuntime inserts r (seed "Storage Model: sandbox_runtimes"), or replaces
// every column of the row with r.ID except created_at, which keeps its first
// value (INSERT … ON CONFLICT(id) DO UPDATE). Errors:
// sandbox.ErrInvalidArgument for an empty ID or an unrepresentable time.
func (s *Store) UpsertRuntime(ctx context.Context, r sandbox.RuntimeRecord) error {
	if err := requireID("runtime", r.ID); err != nil {
		return err
	}
	var te timeEncoder
	args := []any{
		r.ID, r.WorkspaceID, r.BackendKind, r.BackendRuntimeID, r.Image, string(r.State),
		te.p("last_started_at", r.LastStartedAt), te.t("last_used_at", r.LastUsedAt),
		te.p("expires_at", r.ExpiresAt), te.t("created_at", r.CreatedAt), te.t("updated_at", r.UpdatedAt),
	}
	if te.err != nil {
		return te.err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_runtimes (`+runtimeColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			workspace_id = excluded.workspace_id,
			backend_kind = excluded.backend_kind,
			backend_runtime_id = excluded.backend_runtime_id,
			image = excluded.image,
			state = excluded.state,
			last_started_at = excluded.last_started_at,
			last_used_at = excluded.last_used_at,
			expires_at = excluded.expires_at,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		if isUniqueViolation(err) {
			return sandbox.Errorf(sandbox.ErrConflict, "runtime %q: %v", r.ID, err)
		}
		return fmt.Errorf("sqlite store: upsert runtime %q: %w", r.ID, err)
	}
	return nil
}

func scanRuntime(sc scanner) (sandbox.RuntimeRecord, error) {
	var (
		r                              sandbox.RuntimeRecord
		state                          string
		lastStarted, expires           sql.NullString
		lastUsed, createdAt, updatedAt string
	)
	err := sc.Scan(&r.ID, &r.WorkspaceID, &r.BackendKind, &r.BackendRuntimeID, &r.Image, &state,
		&lastStarted, &lastUsed, &expires, &createdAt, &updatedAt)
	if err != nil {
		return sandbox.RuntimeRecord{}, err
	}
	var td timeDecoder
	r.State = sandbox.RuntimeState(state)
	r.LastStartedAt = td.p("last_started_at", lastStarted)
	r.LastUsedAt = td.t("last_used_at", lastUsed)
	r.ExpiresAt = td.p("expires_at", expires)
	r.CreatedAt = td.t("created_at", createdAt)
	r.UpdatedAt = td.t("updated_at", updatedAt)
	return r, td.err
}

// GetRuntime returns the runtime record with id (seed "Storage Model:
// sandbox_runtimes"). Errors: sandbox.ErrNotFound (message naming id) when
// there is none.
func (s *Store) GetRuntime(ctx context.Context, id string) (sandbox.RuntimeRecord, error) {
	r, err := scanRuntime(s.db.QueryRowContext(ctx,
		`SELECT `+runtimeColumns+` FROM sandbox_runtimes WHERE id = ?`, id))
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
	q := `SELECT ` + runtimeColumns + ` FROM sandbox_runtimes`
	var args []any
	if workspaceID != "" {
		q += ` WHERE workspace_id = ?`
		args = append(args, workspaceID)
	}
	q += ` ORDER BY last_used_at, id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list runtimes: %w", err)
	}
	defer rows.Close()
	out := []sandbox.RuntimeRecord{}
	for rows.Next() {
		r, err := scanRuntime(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list runtimes: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list runtimes: %w", err)
	}
	return out, nil
}

// DeleteRuntime deletes the runtime record with id (seed "Storage Model:
// sandbox_runtimes") (never the workspace: "Workspace records should survive
// runtime destruction"). A missing row is success.
func (s *Store) DeleteRuntime(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandbox_runtimes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("sqlite store: delete runtime %q: %w", id, err)
	}
	return nil
}
