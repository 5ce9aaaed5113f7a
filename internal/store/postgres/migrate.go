package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MigrationLockTimeout bounds how long Open waits for the migration lock
// (another worker migrating) plus its own migrations, when ctx has no earlier
// deadline.
const MigrationLockTimeout = 5 * time.Minute

// MigrationLockName names the session-level advisory lock Open holds while it
// checks and applies migrations. The lock key is
// hashtextextended(MigrationLockName || ':' || current_schema(), 0), so each
// schema of a database migrates under its own lock; a waiting worker shows in
// pg_locks (locktype 'advisory') and pg_stat_activity (application_name).
const MigrationLockName = "sandboxcore.migrations"

// lockKey is the SQL expression of the advisory lock key ($1 = MigrationLockName).
const lockKey = `hashtextextended($1 || ':' || coalesce(current_schema(), ''), 0)`

// migrate applies the embedded migrations up to the latest. It first takes the
// advisory lock on a dedicated session (blocking: no polling, a waiter
// proceeds the moment the holder finishes) and holds it for the whole of
// goose's run — including goose's creation of its version table, which goose
// itself would do outside any session locker — then ends that session, which
// releases the lock even if an explicit unlock could not be sent. A worker that
// dies while holding the lock releases it when its session ends.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, MigrationLockTimeout)
	defer cancel()
	lockConn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("migrations: connect for the migration lock: %w", err)
	}
	defer lockConn.Close(context.WithoutCancel(ctx))
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, MigrationLockName); err != nil {
		return fmt.Errorf("migrations: take lock %s: %w", MigrationLockName, err)
	}

	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, MigrationLockName); err != nil {
		return fmt.Errorf("migrations: release lock %s: %w", MigrationLockName, err)
	}
	return nil
}
