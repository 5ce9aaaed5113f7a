// Package store holds what the metadata stores (store/sqlite, store/postgres)
// share beyond the sandbox.Store port: the worker host registry (the
// sandbox_hosts table, docs/DESIGN.md "Storage model"), and the row layer both stores
// run on their own driver (rows.go, statements.go): the tables' column lists,
// the fixed-width UTC nanosecond time text (TimeLayout), the mapping of each
// record to its column values and back from a scanned Row, and the SQL text
// of every statement, rendered with PostgreSQL's $n or SQLite's ?
// placeholders. What differs per database stays in its package: connecting,
// the migrations (one set per dialect), and mapping the driver's errors to
// sandbox kinds.
//
// The registry is not part of sandbox.Store (the rows every operation
// needs): Store is both, what each concrete store implements and what the
// worker opens; a consumer declares the part it needs in its own port
// (activities.Store, docs/DESIGN.md "Ports").
package store

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Store is a metadata store with its host registry: the rows of
// sandbox.Store and HostRegistry. *sqlite.Store and *postgres.Store
// implement it (contract suites storetest.Run and storetest.RunHosts);
// Remembering wraps one and is one.
type Store interface {
	sandbox.Store
	HostRegistry
}

// Host is one worker host's row in sandbox_hosts: which machine holds which
// local workspaces, and where to send their activities.
type Host struct {
	// HostID is the worker's host id (SANDBOX_HOST_ID); primary key, non-empty.
	HostID string `json:"host_id"`
	// TaskQueue is the host-specific Temporal task queue the worker polls
	// (wire.HostTaskQueue(HostID), "sandbox-host-<host id>").
	TaskQueue string `json:"task_queue"`
	// LastHeartbeat is when the worker last reported itself alive. Stored with
	// nanosecond precision; read back in UTC. The zero time means "never".
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// DataRoot is the absolute path of the host's data directory
	// (SANDBOX_DATA_DIR) on that host.
	DataRoot string `json:"data_root"`
	// DiskBudgetBytes is the host's disk budget for repo caches and
	// workspaces, in bytes; 0 means no budget is configured.
	DiskBudgetBytes int64 `json:"disk_budget_bytes"`
	// UpdatedAt is when the row was last written (set by the caller, like
	// every other timestamp the stores persist). Nanoseconds, UTC on read.
	UpdatedAt time.Time `json:"updated_at"`
}

// HostRegistry persists worker host registrations (the sandbox_hosts table).
// *sqlite.Store and *postgres.Store implement it; storetest.RunHosts is its
// contract suite.
type HostRegistry interface {
	// UpsertHost inserts h, or replaces every column of the row with h.HostID.
	// Errors: sandboxapi.ErrInvalidArgument for an empty HostID or a time outside
	// the years 0000–9999.
	UpsertHost(ctx context.Context, h Host) error
	// GetHost returns the host with id. Errors: sandboxapi.ErrNotFound (the
	// message names id) when there is none.
	GetHost(ctx context.Context, id string) (Host, error)
	// ListHosts returns every host ordered by host id (byte order), as a
	// non-nil slice.
	ListHosts(ctx context.Context) ([]Host, error)
}
