package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MigrationLockTimeout bounds how long Open waits for another process's
// migration lock (and then for its own migrations) when ctx has no earlier
// deadline.
const MigrationLockTimeout = 5 * time.Minute

// MigrationLockName names the session-level advisory lock Open holds while it
// migrates. The lock key is hashtextextended(MigrationLockName || ':' ||
// current_schema(), 0), so each schema of a database migrates under its own
// lock, and an operator can see a waiting worker in pg_locks.
const MigrationLockName = "sandboxcore.migrations"

// advisoryLocker is a goose lock.SessionLocker that takes a blocking
// pg_advisory_lock (no polling: a waiter proceeds the moment the holder
// unlocks or its session ends) keyed by MigrationLockName and the current
// schema.
type advisoryLocker struct{}

var _ lock.SessionLocker = advisoryLocker{}

const lockKey = `hashtextextended($1 || ':' || coalesce(current_schema(), ''), 0)`

// SessionLock blocks until the lock is held or ctx ends (pgx then cancels the
// wait on the server).
func (advisoryLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, MigrationLockName); err != nil {
		return fmt.Errorf("take migration lock %s: %w", MigrationLockName, err)
	}
	return nil
}

// SessionUnlock releases the lock; PostgreSQL also releases it when the
// session ends, so a crashed migrator never blocks the others for long.
func (advisoryLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, MigrationLockName).Scan(&released); err != nil {
		return fmt.Errorf("release migration lock %s: %w", MigrationLockName, err)
	}
	if !released {
		return errors.New("release migration lock " + MigrationLockName + ": it was not held")
	}
	return nil
}

// migrate applies the embedded migrations up to the latest, under the
// advisory lock, through a database/sql view of pool.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, MigrationLockTimeout)
	defer cancel()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(advisoryLocker{}))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}
