// Package sqlite is the embedded metadata store: sandbox.Store on one SQLite
// file through the pure-Go driver modernc.org/sqlite (DESIGN.md "Embedded
// default and production"). It persists the three tables (docs/DESIGN.md
// "Storage model": sandbox_repo_caches, sandbox_workspaces, sandbox_runtimes), created by
// goose migrations embedded in the binary and applied by Open.
//
// Storage conventions (rows are encoded and SQL is built by the row layer
// of internal/store, which the PostgreSQL store shares):
//   - Times are TEXT in the fixed-width UTC form YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ,
//     so they keep nanoseconds, sort as the instants they name, and read back as
//     time.Time in UTC (the zero time.Time round-trips as zero). Only years
//     0000–9999 are representable; other times are rejected with
//     sandboxapi.ErrInvalidArgument.
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
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BusyTimeout (DESIGN.md "Embedded default and production") is how long a
// statement waits for another connection's (or process's) lock on the database
// file before failing with SQLITE_BUSY.
const BusyTimeout = 5 * time.Second

//go:embed migrations/*.sql
var migrations embed.FS

// Store implements sandbox.Store on one SQLite database file (docs/DESIGN.md
// "Storage model"). It is safe for concurrent use. Create it with Open; release it with
// Close. Misses and uniqueness violations wrap the sentinels each method names;
// any other failure (I/O, a closed store, a cancelled ctx) is the driver's
// error wrapped with the operation and id, and wraps no sandboxapi.Kind.
type Store struct {
	// SQLStore holds every record method (shared with the PostgreSQL store).
	*store.SQLStore
	db        *sql.DB
	stmts     *stmtCache
	closeOnce sync.Once
	closeErr  error
}

var (
	_ sandbox.Store      = (*Store)(nil)
	_ store.HostRegistry = (*Store)(nil)
)

// Open opens (creating when missing) the SQLite database at path, a plain
// filesystem path (":memory:" gives a private in-memory database, for tests),
// configures it (WAL journal, synchronous NORMAL, busy_timeout BusyTimeout,
// foreign_keys on, immediate transactions, one pooled connection) and applies
// the embedded goose migrations (dialect sqlite3, version table
// goose_db_version) up to the latest. The parent directory must exist.
//
// Errors: sandboxapi.ErrInvalidArgument when path is empty or contains '?' (it
// would be read as DSN parameters); otherwise the driver's or goose's error,
// wrapped with the path.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "sqlite store path %q: must be a non-empty file path without '?'", path)
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
	stmts := &stmtCache{db: db, m: map[string]*sql.Stmt{}}
	return &Store{SQLStore: store.NewSQLStore(sqlDB{db: db, stmts: stmts}, dialect), db: db, stmts: stmts}, nil
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
	s.closeOnce.Do(func() {
		s.stmts.close()
		s.closeErr = s.db.Close()
	})
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

// dialect is SQLite's: ? placeholders, sql.ErrNoRows, constraint codes;
// SQLite stores any string, so no value is invalid.
var dialect = store.Dialect{
	Name:              "sqlite store",
	Statements:        statements,
	IsNoRows:          func(err error) bool { return errors.Is(err, sql.ErrNoRows) },
	IsUniqueViolation: isUniqueViolation,
	IsTransient: func(err error) bool {
		c := sqliteCode(err) & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	},
	Describe: describe,
	// Calls queue for the one connection and may wait out BusyTimeout.
	AttemptTimeout: 6 * BusyTimeout,
}

// sqliteCode is the (extended) result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// describe names a failure for a client: the SQLite result code's name
// (e.g. "SQLITE_BUSY (database is locked)"), "the store is closed", or "".
func describe(err error) string {
	if errors.Is(err, sql.ErrConnDone) || (err != nil && strings.Contains(err.Error(), "database is closed")) {
		return "the store is closed"
	}
	c := sqliteCode(err)
	if c == 0 {
		return ""
	}
	return fmt.Sprintf("SQLite result code %d (%s)", c, sqlite.ErrorCodeString[c])
}

// sqlDB adapts database/sql to store.DB, running every statement prepared
// once (stmtCache).
type sqlDB struct {
	db    *sql.DB
	stmts *stmtCache
}

func (d sqlDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := d.stmts.get(ctx, q); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = d.db.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqlDB) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	if st := d.stmts.get(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.db.QueryRowContext(ctx, q, args...)
}

func (d sqlDB) Query(ctx context.Context, q string, args []any, each func(store.Rows) error) error {
	var rows *sql.Rows
	var err error
	if st := d.stmts.get(ctx, q); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = d.db.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	return each(rows)
}

// maxStatements bounds the prepared statements kept: the store's fixed
// statements and the filter combinations of its list queries stay well below.
const maxStatements = 256

// stmtCache keeps each SQL text prepared once on the store's connection.
// The SQLite driver parses and plans a statement at every unprepared call:
// for a one-row read that is most of its cost (docs/BENCHMARKS.md).
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

// get returns q prepared, or nil (the caller runs q unprepared) when the
// store is closed, the cache full or the preparation failed (the same error
// then comes from the unprepared call).
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[q]
	full := c.closed || len(c.m) >= maxStatements
	c.mu.Unlock()
	if ok || full {
		return st
	}
	// Prepared outside the lock: it waits for the one connection.
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[q]; ok || c.closed {
		_ = st.Close()
		return prev // nil when closed meanwhile
	}
	c.m[q] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}
