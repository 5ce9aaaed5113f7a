// Package postgres is the production metadata store: sandbox.Store (and
// store.HostRegistry) on PostgreSQL through pgx/v5 and pgxpool (DESIGN.md
// "Embedded default and production"; docs/DESIGN.md "Storage model"). It persists
// the three tables (sandbox_repo_caches, sandbox_workspaces,
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
//     are rejected with sandboxapi.ErrInvalidArgument.
//   - Every TEXT column has COLLATE "C", so ordering (ties "by id") is byte
//     order whatever the database's locale, as in SQLite.
//   - Empty conversation_id and task_id are NULL so the per-mode partial unique
//     indexes ignore them; a nil PinnedUntil, LastStartedAt or ExpiresAt is NULL.
//   - No foreign keys between the tables (see the migration's header).
//
// Errors are mapped at this boundary: no row → sandboxapi.ErrWorkspaceNotFound
// (workspaces) or sandboxapi.ErrNotFound (repo caches, runtimes, hosts); unique
// violation (SQLSTATE 23505) → sandboxapi.ErrConflict; a value PostgreSQL cannot
// store (SQLSTATE class 22, e.g. a NUL byte in a string) →
// sandboxapi.ErrInvalidArgument; a cancelled ctx → sandboxapi.ErrTimeout; any
// other failure (the server unreachable or shutting down, a closed store)
// → sandboxapi.ErrRuntimeUnavailable after bounded retries, naming no
// connection detail (store.Resilience).
//
// Concurrency: a *Store is safe for concurrent use; every call takes a pooled
// connection for one statement (each statement is its own transaction), and
// uniqueness is enforced by the database across every worker sharing it.
package postgres

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
// Errors: sandboxapi.ErrInvalidArgument with a fixed message that never quotes
// dsn (it may hold a password).
func ParseDSN(dsn string) (*pgxpool.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "postgres connection string: must not be empty")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote parts of dsn (best-effort redaction only).
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
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
// Errors: sandboxapi.ErrInvalidArgument for a malformed dsn (see ParseDSN);
// sandboxapi.ErrTimeout (wrapping ctx's error) when ctx ends first, e.g. while
// waiting for another worker's migration lock;
// sandboxapi.ErrRuntimeUnavailable when the database cannot be reached or the
// migrations fail, its message naming the kind of failure (describe:
// "cannot connect: connection refused", "SQLSTATE 28P01 (invalid
// authorization)") and never the host, port, role, database or password.
// The driver's full text goes to slog.Default() for the operator.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = DefaultApplicationName
	}
	fail := func(step string, err error) error {
		slog.Error("postgres store: "+step+" failed", "error", err)
		if ctx.Err() != nil {
			return sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "postgres store (DATABASE_URL): %s did not finish in time", step)
		}
		d := describe(err)
		if d == "" {
			d = store.NetworkFailure(err)
		}
		if d == "" {
			d = "details in the worker log"
		}
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "postgres store (DATABASE_URL): %s failed (%s)", step, d)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fail("open", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fail("connect", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fail("migrate", err)
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
// store or compare, e.g. a NUL byte in a string); transient failures and
// their descriptions for clients (isTransient, describe).
var dialect = store.Dialect{
	Name:              "postgres store",
	Statements:        statements,
	IsNoRows:          func(err error) bool { return errors.Is(err, pgx.ErrNoRows) },
	IsUniqueViolation: func(err error) bool { return pgCode(err) == sqlstateUniqueViolation },
	IsInvalidValue:    func(err error) bool { return strings.HasPrefix(pgCode(err), sqlstateDataException) },
	IsTransient:       isTransient,
	Describe:          describe,
}

// isTransient: a connection that could not be made or broke (ConnectError,
// pgconn's safe-to-retry and timeout errors), SQLSTATE class 08
// (connection exception), 57P01–57P03 (the server is shutting down or
// starting), 53300 (too many connections), 40001 and 40P01 (serialization
// failure, deadlock).
func isTransient(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	switch code := pgCode(err); {
	case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", code == "53300", code == "40001", code == "40P01":
		return true
	}
	return false
}

// sqlstateNames describe the SQLSTATE classes a client may meet when the
// store fails (PostgreSQL's appendix A "Error codes"); the server's message
// is never shown, as it may name the role or the database.
var sqlstateNames = map[string]string{
	"08": "connection exception", "28": "invalid authorization", "3D": "no such database",
	"53": "insufficient resources", "57": "operator intervention (server shutting down or starting)",
	"40": "transaction rollback", "42": "syntax error or access rule violation", "XX": "internal error",
}

// describe names err for a client: "SQLSTATE <code> (<class>)" for a
// server error, the network failure of a connection attempt, or "".
func describe(err error) string {
	if code := pgCode(err); code != "" {
		if name, ok := sqlstateNames[code[:min(2, len(code))]]; ok {
			return "SQLSTATE " + code + " (" + name + ")"
		}
		return "SQLSTATE " + code
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return "the store is closed"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if d := store.NetworkFailure(err); d != "" {
			return "cannot connect: " + d
		}
		return "cannot connect"
	}
	return ""
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
