package bwrap

import (
	"context"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
)

// sharedQuotas are the disk quotas of the shared writable directories
// (sandbox.Mount.Shared: dependency caches), one per host directory: a
// cache counts toward no workspace's own quota, so that one workspace's
// cache growth never stops another's commands, but it has a quota of its
// own (Options.SharedDiskGB, by allocated blocks: a sparse file there costs
// nothing and blocks nobody), measured while a runtime that mounts it runs
// commands (docs/SECURITY.md "Resource limits
// (bubblewrap)"). When it passes that quota and grew, the commands of every
// runtime sharing it that run at that moment are stopped (what wrote there
// cannot be told apart); while it is over, their commands start unable to
// grow files.
type sharedQuotas struct {
	mu sync.Mutex
	by map[string]*sharedQuota // by host directory
}

type sharedQuota struct {
	dir   string
	w     *diskquota.Watcher
	users map[*Runtime]bool
	stop  context.CancelFunc
}

// join makes r a user of the shared directories of cfg that have a quota,
// starting their measurement with the first user.
func (q *sharedQuotas) join(r *Runtime, cfg sandboxConfig) {
	if cfg.limits.DiskGB <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range cfg.mounts {
		if !m.rw || !m.shared {
			continue
		}
		if q.by == nil {
			q.by = map[string]*sharedQuota{}
		}
		sq := q.by[m.src]
		if sq == nil {
			sq = &sharedQuota{dir: m.src, users: map[*Runtime]bool{}}
			sq.w = &diskquota.Watcher{
				Dirs:      func() []string { return []string{sq.dir} },
				Limit:     diskquota.LimitOf(r.p.sharedDiskGB),
				Allocated: true,
				Exceeded:  func(u diskquota.Usage) { q.exceeded(sq, u) },
				Log:       r.p.log.With("shared_dir", m.src),
				Active:    func() bool { return q.active(sq) },
			}
			if r.p.diskReserve >= 0 {
				sq.w.Reserve = diskquota.FreeReserve(r.p.diskReserve, m.src)
			}
			ctx, cancel := context.WithCancel(context.Background())
			sq.stop = cancel
			q.by[m.src] = sq
			go sq.w.Run(ctx)
		}
		sq.users[r] = true
	}
}

// leave ends r's use of every shared directory, stopping the measurement
// of one that no runtime uses any longer.
func (q *sharedQuotas) leave(r *Runtime) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for dir, sq := range q.by {
		delete(sq.users, r)
		if len(sq.users) == 0 {
			sq.stop()
			delete(q.by, dir)
		}
	}
}

// of returns the quotas of the shared directories r uses.
func (q *sharedQuotas) of(r *Runtime) []*sharedQuota {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*sharedQuota
	for _, sq := range q.by {
		if sq.users[r] {
			out = append(out, sq)
		}
	}
	return out
}

// usersOf returns the runtimes using sq now.
func (q *sharedQuotas) usersOf(sq *sharedQuota) []*Runtime {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*Runtime, 0, len(sq.users))
	for r := range sq.users {
		out = append(out, r)
	}
	return out
}

// active is sq's Watcher.Active: a runtime using it runs commands.
func (q *sharedQuotas) active(sq *sharedQuota) bool {
	for _, r := range q.usersOf(sq) {
		if r.commandsRun() {
			return true
		}
	}
	return false
}

// exceeded is sq's Watcher.Exceeded: the commands of every runtime using
// it that runs commands now are stopped.
func (q *sharedQuotas) exceeded(sq *sharedQuota, u diskquota.Usage) {
	for _, r := range q.usersOf(sq) {
		if r.commandsRun() {
			r.overQuota(u)
		}
	}
}

// blocked reports whether one of the shared directories r uses is over its
// quota or cannot be measured (diskquota.Watcher.Blocked).
func (q *sharedQuotas) blocked(ctx context.Context, r *Runtime) bool {
	for _, sq := range q.of(r) {
		if sq.w.Blocked(ctx) {
			return true
		}
	}
	return false
}
