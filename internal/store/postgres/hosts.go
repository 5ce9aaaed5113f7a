package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
)

// The worker host registry (table sandbox_hosts, migration 00002_hosts.sql).

const hostColumns = `host_id, task_queue, last_heartbeat, data_root, disk_budget_bytes, updated_at`

// UpsertHost inserts h into sandbox_hosts, or replaces every column of the
// row with h.HostID (store.HostRegistry). Concurrent upserts of one id (two
// workers claiming the same SANDBOX_HOST_ID) never conflict: the last write
// wins. Errors: sandbox.ErrInvalidArgument for an empty HostID, a time
// outside the years 0000–9999 or a string PostgreSQL cannot store.
func (s *Store) UpsertHost(ctx context.Context, h store.Host) error {
	if err := requireID("host", h.HostID); err != nil {
		return err
	}
	var cd codec
	args := []any{h.HostID, h.TaskQueue, cd.t("last_heartbeat", h.LastHeartbeat), h.DataRoot,
		h.DiskBudgetBytes, cd.t("updated_at", h.UpdatedAt)}
	if cd.err != nil {
		return cd.err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sandbox_hosts (`+hostColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (host_id) DO UPDATE SET
			task_queue = excluded.task_queue,
			last_heartbeat = excluded.last_heartbeat,
			data_root = excluded.data_root,
			disk_budget_bytes = excluded.disk_budget_bytes,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		return mapWriteErr(err, fmt.Sprintf("host %q", h.HostID), "upsert")
	}
	return nil
}

func scanHost(row pgx.Row) (store.Host, error) {
	var (
		h                  store.Host
		heartbeat, updated string
	)
	if err := row.Scan(&h.HostID, &h.TaskQueue, &heartbeat, &h.DataRoot, &h.DiskBudgetBytes, &updated); err != nil {
		return store.Host{}, err
	}
	var cd codec
	h.LastHeartbeat = cd.dt("last_heartbeat", heartbeat)
	h.UpdatedAt = cd.dt("updated_at", updated)
	return h, cd.err
}

// GetHost returns the sandbox_hosts row with id (store.HostRegistry). Errors:
// sandbox.ErrNotFound (the message names id) when there is none.
func (s *Store) GetHost(ctx context.Context, id string) (store.Host, error) {
	h, err := scanHost(s.pool.QueryRow(ctx, `SELECT `+hostColumns+` FROM sandbox_hosts WHERE host_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Host{}, sandbox.Errorf(sandbox.ErrNotFound, "host %q not found", id)
	}
	if err != nil {
		return store.Host{}, mapReadErr(err, fmt.Sprintf("host %q", id), "get")
	}
	return h, nil
}

// ListHosts returns every sandbox_hosts row ordered by host id (byte order),
// as a non-nil slice (store.HostRegistry).
func (s *Store) ListHosts(ctx context.Context) ([]store.Host, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+hostColumns+` FROM sandbox_hosts ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list hosts: %w", err)
	}
	out, err := collect(rows, scanHost)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list hosts: %w", err)
	}
	return out, nil
}
