package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
)

// The worker host registry (table sandbox_hosts, migration 00002_hosts.sql).

var _ store.HostRegistry = (*Store)(nil)

const hostColumns = `host_id, task_queue, last_heartbeat, data_root, disk_budget_bytes, updated_at`

// UpsertHost inserts h into sandbox_hosts, or replaces every column of the
// row with h.HostID (store.HostRegistry). Times are stored like every other
// time in this store (fixed-width UTC text, nanoseconds). Errors:
// sandbox.ErrInvalidArgument for an empty HostID or a time outside the years
// 0000–9999; otherwise the driver's error wrapped with the host id.
func (s *Store) UpsertHost(ctx context.Context, h store.Host) error {
	if err := requireID("host", h.HostID); err != nil {
		return err
	}
	var te timeEncoder
	args := []any{h.HostID, h.TaskQueue, te.t("last_heartbeat", h.LastHeartbeat), h.DataRoot,
		h.DiskBudgetBytes, te.t("updated_at", h.UpdatedAt)}
	if te.err != nil {
		return te.err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_hosts (`+hostColumns+`)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (host_id) DO UPDATE SET
			task_queue = excluded.task_queue,
			last_heartbeat = excluded.last_heartbeat,
			data_root = excluded.data_root,
			disk_budget_bytes = excluded.disk_budget_bytes,
			updated_at = excluded.updated_at`, args...)
	if err != nil {
		return fmt.Errorf("sqlite store: upsert host %q: %w", h.HostID, err)
	}
	return nil
}

func scanHost(sc scanner) (store.Host, error) {
	var (
		h                  store.Host
		heartbeat, updated string
	)
	if err := sc.Scan(&h.HostID, &h.TaskQueue, &heartbeat, &h.DataRoot, &h.DiskBudgetBytes, &updated); err != nil {
		return store.Host{}, err
	}
	var td timeDecoder
	h.LastHeartbeat = td.t("last_heartbeat", heartbeat)
	h.UpdatedAt = td.t("updated_at", updated)
	return h, td.err
}

// GetHost returns the sandbox_hosts row with id (store.HostRegistry). Errors:
// sandbox.ErrNotFound (the message names id) when there is none.
func (s *Store) GetHost(ctx context.Context, id string) (store.Host, error) {
	h, err := scanHost(s.db.QueryRowContext(ctx, `SELECT `+hostColumns+` FROM sandbox_hosts WHERE host_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Host{}, sandbox.Errorf(sandbox.ErrNotFound, "host %q not found", id)
	}
	if err != nil {
		return store.Host{}, fmt.Errorf("sqlite store: get host %q: %w", id, err)
	}
	return h, nil
}

// ListHosts returns every sandbox_hosts row ordered by host id (byte order),
// as a non-nil slice (store.HostRegistry).
func (s *Store) ListHosts(ctx context.Context) ([]store.Host, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+hostColumns+` FROM sandbox_hosts ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list hosts: %w", err)
	}
	defer rows.Close()
	out := []store.Host{}
	for rows.Next() {
		h, err := scanHost(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list hosts: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list hosts: %w", err)
	}
	return out, nil
}
