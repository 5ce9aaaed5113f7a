package repocache

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/gofrs/flock"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// LockRepo takes the per-repository lock that serializes clone, fetch, removal
// and (in the workspace package) worktree creation, across goroutines and
// processes sharing Root (docs/DESIGN.md "Rules": lock repo cache
// creation by normalized repo identity; sandbox.RepoLocker).
//
// It is two locks taken in order:
//
//  1. an in-process lock keyed by repo.Key() (a channel of capacity one), so
//     goroutines queue without polling; and
//  2. an exclusive flock(2) on <Root>/repos/<host>/<owner>/<repo>.lock, polled
//     every 50 ms with TryLockContext.
//
// flock(2) locks belong to the open file description, and every LockRepo opens
// the lock file anew, so on Linux two LockRepo calls in one process already
// exclude each other (TestFlockIsExclusiveAcrossDescriptorsInOneProcess checks
// it). The in-process lock is kept anyway: it wakes waiters at once instead of
// every poll, and it keeps goroutines exclusive where flock is emulated with
// per-process fcntl locks (NFS). The kernel drops the flock when its holder
// dies, so a SIGKILLed worker never leaves the repository locked. The lock file
// is never deleted (deleting a lock file races with its next taker).
//
// The lock is not reentrant: a holder that calls Ensure, Remove or LockRepo for
// the same repository deadlocks until ctx ends. unlock is idempotent; it is a
// no-op function (never nil) when err is not nil. Errors: ErrInvalidArgument
// (bad identity), ErrRepoLocked wrapping ctx.Err() when ctx ends while waiting,
// ErrRepoCacheUnavailable or ErrInsufficientDisk when the lock file cannot be
// created.
func (c *Cache) LockRepo(ctx context.Context, repo sandboxapi.RepoIdentity) (unlock func(), err error) {
	noop := func() {}
	id, err := identity(repo)
	if err != nil {
		return noop, err
	}
	key := id.Key()
	sem := c.sem(key)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return noop, wrapKind(sandboxapi.ErrRepoLocked, "repository "+key+" is locked by another call in this process", ctx.Err())
	}
	release := func() { <-sem }

	path := c.lockPath(id)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		release()
		return noop, fsError(err, "lock "+key)
	}
	fl := flock.New(path, flock.SetPermissions(0o644))
	ok, err := fl.TryLockContext(ctx, lockPollDelay)
	if !ok || err != nil {
		release()
		if ctx.Err() != nil {
			return noop, wrapKind(sandboxapi.ErrRepoLocked, "repository "+key+" is locked by another process ("+path+")", ctx.Err())
		}
		return noop, fsError(err, "lock "+key)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = fl.Unlock() // also closes the descriptor
			release()
		})
	}, nil
}

// sem returns the in-process lock of a repository key. Entries are never
// deleted: there is one small channel per repository ever used.
func (c *Cache) sem(key string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sems[key]
	if !ok {
		s = make(chan struct{}, 1)
		c.sems[key] = s
	}
	return s
}
