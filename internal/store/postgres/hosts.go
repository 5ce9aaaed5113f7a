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

// UpsertHost inserts h into sandbox_hosts, or replaces every column of the
// row with h.HostID (store.HostRegistry). Concurrent upserts of one id (two
// workers claiming the same SANDBOX_HOST_ID) never conflict: the last write
// wins. Errors: sandbox.ErrInvalidArgument for an empty HostID, a time
// outside the years 0000–9999 or a string PostgreSQL cannot store.
func (s *Store) UpsertHost(ctx context.Context, h store.Host) error {
	args, err := store.HostValues(h)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, statements.UpsertHost, args...); err != nil {
		return mapWriteErr(err, fmt.Sprintf("host %q", h.HostID), "upsert")
	}
	return nil
}

// GetHost returns the sandbox_hosts row with id (store.HostRegistry). Errors:
// sandbox.ErrNotFound (the message names id) when there is none.
func (s *Store) GetHost(ctx context.Context, id string) (store.Host, error) {
	h, err := store.ScanHost(s.pool.QueryRow(ctx, statements.GetHost, id))
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
	out, err := list(ctx, s, statements.ListHosts, nil, store.ScanHost)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list hosts: %w", err)
	}
	return out, nil
}
