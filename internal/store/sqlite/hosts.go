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

// UpsertHost inserts h into sandbox_hosts, or replaces every column of the
// row with h.HostID (store.HostRegistry). Times are stored like every other
// time in this store (fixed-width UTC text, nanoseconds). Errors:
// sandbox.ErrInvalidArgument for an empty HostID or a time outside the years
// 0000–9999; otherwise the driver's error wrapped with the host id.
func (s *Store) UpsertHost(ctx context.Context, h store.Host) error {
	args, err := store.HostValues(h)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, statements.UpsertHost, args...); err != nil {
		return fmt.Errorf("sqlite store: upsert host %q: %w", h.HostID, err)
	}
	return nil
}

// GetHost returns the sandbox_hosts row with id (store.HostRegistry). Errors:
// sandbox.ErrNotFound (the message names id) when there is none.
func (s *Store) GetHost(ctx context.Context, id string) (store.Host, error) {
	h, err := store.ScanHost(s.db.QueryRowContext(ctx, statements.GetHost, id))
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
	out, err := list(ctx, s, statements.ListHosts, nil, store.ScanHost)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list hosts: %w", err)
	}
	return out, nil
}
