package hostworker

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/wire"
)

// HeartbeatEvery is how often a host refreshes its sandbox_hosts row
// (the eviction cron plans for hosts seen recently).
const HeartbeatEvery = 30 * time.Second

// startHeartbeat registers the host in the store's host registry now and
// every HeartbeatEvery until stop is called.
func (h *Host) startHeartbeat(budgetBytes int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	beat := func() {
		now := time.Now().UTC()
		err := h.Store.UpsertHost(ctx, store.Host{
			HostID: h.Config.HostID, TaskQueue: wire.HostTaskQueue(h.Config.HostID),
			LastHeartbeat: now, DataRoot: h.Config.DataDir, DiskBudgetBytes: budgetBytes, UpdatedAt: now,
		})
		if err != nil && ctx.Err() == nil {
			h.log.Warn("host heartbeat", "error", err)
		}
	}
	beat()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() { cancel(); <-done }
}
