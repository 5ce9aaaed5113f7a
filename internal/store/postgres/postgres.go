// Package postgres is the production metadata store: sandbox.Store (and
// store.HostRegistry) on PostgreSQL through pgx/v5 and pgxpool (DESIGN.md
// "Embedded default and production"; seed "Storage Model" and P8). It persists
// the seed's three tables (sandbox_repo_caches, sandbox_workspaces,
// sandbox_runtimes) plus sandbox_hosts, created by goose migrations embedded in
// the binary and applied by Open under a PostgreSQL advisory lock, so several
// workers starting at once against one database are safe.
//
// It mirrors the embedded SQLite store (internal/store/sqlite) column for
// column and behaviour for behaviour: both encode rows and build their SQL
// with the shared row layer of internal/store, and both run the same contract
// suites (internal/store/storetest):
//   - Times are TEXT in the fixed-width UTC form YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ
//     (timestamptz keeps only microseconds). They keep nanoseconds, sort as the
//     instants they name and read back as time.Time in UTC; the zero time
//     round-trips as zero. Only years 0000–9999 are representable; other times
//     are rejected with sandbox.ErrInvalidArgument.
//   - Every TEXT column has COLLATE "C", so ordering (ties "by id") is byte
//     order whatever the database's locale, as in SQLite.
//   - Empty conversation_id and task_id are NULL so the per-mode partial unique
//     indexes ignore them; a nil PinnedUntil, LastStartedAt or ExpiresAt is NULL.
//   - No foreign keys between the tables (see the migration's header).
//
// Errors are mapped at this boundary: no row → sandbox.ErrWorkspaceNotFound
// (workspaces) or sandbox.ErrNotFound (repo caches, runtimes, hosts); unique
// violation (SQLSTATE 23505) → sandbox.ErrConflict; a value PostgreSQL cannot
// store (SQLSTATE class 22, e.g. a NUL byte in a string) →
// sandbox.ErrInvalidArgument. Any other failure (network, a closed store, a
// cancelled ctx) is pgx's error wrapped with the operation and id, and wraps
// no sandbox.Kind.
//
// Concurrency: a *Store is safe for concurrent use; every call takes a pooled
// connection for one statement (each statement is its own transaction), and
// uniqueness is enforced by the database across every worker sharing it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
)

// DefaultApplicationName is the application_name reported to PostgreSQL (seen
// in pg_stat_activity) when the connection string sets none.
const DefaultApplicationName = "sandboxcore"

// Store implements sandbox.Store and store.HostRegistry on a PostgreSQL
// database. Create it with Open; release it with Close.
type Store struct {
	// SQLStore holds every record method (shared with the SQLite store).
	*store.SQLStore
	pool      *pgxpool.Pool
	closeOnce sync.Once
}

var (
	_ sandbox.Store      = (*Store)(nil)
	_ store.HostRegistry = (*Store)(nil)
)

// ParseDSN checks that dsn is a PostgreSQL connection string pgx accepts: a
// URL (postgres://user:password@host:5432/db?sslmode=disable&pool_max_conns=8)
// or the key=value form ("host=… dbname=…"). Libpq parameters and pgx's pool
// parameters (pool_max_conns, pool_min_conns, pool_max_conn_lifetime, …) are
// accepted; unknown parameters are sent as run-time settings (e.g.
// search_path=myschema).
//
// Errors: sandbox.ErrInvalidArgument with a fixed message that never quotes
// dsn (it may hold a password).
func ParseDSN(dsn string) (*pgxpool.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalidArgument, "postgres connection string: must not be empty")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote parts of dsn (best-effort redaction only).
		return nil, sandbox.Errorf(sandbox.ErrInvalidArgument,
			"postgres connection string: not a valid URL (postgres://user:password@host:5432/db?sslmode=disable) or key=value string")
	}
	return cfg, nil
}

// Open connects to the PostgreSQL database named by dsn (see ParseDSN),
// checks the connection, and applies the embedded goose migrations (dialect
// postgres, version table goose_db_version in the connection's current
// schema) up to the latest, holding a session-level advisory lock
// (MigrationLockName) throughout, so concurrent Opens from several workers
// apply each migration exactly once and all succeed. On an up-to-date
// database the lock is held for a few milliseconds. The tables live in the connection's current schema (the first
// existing schema of search_path, normally "public"); the role needs CREATE on
// it the first time, and on later starts only when a new migration arrives.
//
// The pool uses pgx's defaults (at most max(4, runtime.NumCPU()) connections unless
// pool_max_conns says otherwise); application_name defaults to
// DefaultApplicationName. ctx bounds connecting and migrating, including the
// wait for another worker's migration lock (at most MigrationLockTimeout).
//
// Errors: sandbox.ErrInvalidArgument for a malformed dsn (see ParseDSN);
// otherwise pgx's or goose's error, wrapped with the host and database (never
// the password).
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = DefaultApplicationName
	}
	where := fmt.Sprintf("postgres store %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: connect: %w", where, err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &Store{SQLStore: store.NewSQLStore(pgxDB{pool}, dialect), pool: pool}, nil
}

// Close closes the connection pool, waiting for calls in flight
// (sandbox.Store.Close). It is idempotent and always returns nil. Calls on a
// closed Store fail with pgxpool's "closed pool" error.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// statements is the SQL text this store runs, with PostgreSQL's $n
// placeholders (shared with the SQLite store: store.Statements).
var statements = store.NewStatements(store.Dollar)

// ---- errors ----

// SQLSTATE codes this package maps.
const (
	sqlstateUniqueViolation = "23505"
	sqlstateDataException   = "22" // class prefix
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// dialect is PostgreSQL's: $n placeholders, pgx.ErrNoRows, SQLSTATE 23505
// (unique violation) and class 22 (data exception: a value PostgreSQL cannot
// store or compare, e.g. a NUL byte in a string).
var dialect = store.Dialect{
	Name:              "postgres store",
	Statements:        statements,
	IsNoRows:          func(err error) bool { return errors.Is(err, pgx.ErrNoRows) },
	IsUniqueViolation: func(err error) bool { return pgCode(err) == sqlstateUniqueViolation },
	IsInvalidValue:    func(err error) bool { return strings.HasPrefix(pgCode(err), sqlstateDataException) },
}

// pgxDB adapts a pgxpool.Pool to store.DB.
type pgxDB struct{ pool *pgxpool.Pool }

func (d pgxDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (d pgxDB) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return d.pool.QueryRow(ctx, q, args...)
}

func (d pgxDB) Query(ctx context.Context, q string, args []any, each func(store.Rows) error) error {
	rows, err := d.pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return each(rows)
}
