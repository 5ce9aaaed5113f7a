package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Remembering is a Store over another one that
// keeps, per worker host, the last workspace and repo cache rows it read or
// wrote, so that operations that need no store keep working while the
// database is unreachable (docs/PRODUCTION.md "Store outages"): every
// activity of a session loads its workspace row first, and on a host the
// row changes only through that host's own calls (acquire, eviction,
// restore — all of which write it through this store). A caller that can
// do with the remembered row says so with AllowRemembered on its context;
// only then, and only when the store failed with
// sandboxapi.ErrRuntimeUnavailable, GetWorkspace and GetRepoCache return the
// remembered row instead of the error. Writes still need the store; a miss
// (ErrWorkspaceNotFound, ErrNotFound) or a delete forgets the row. Safe for
// concurrent use.
//
// The host registry passes through to the wrapped store unchanged.
type Remembering struct {
	Store

	mu     sync.Mutex
	ws     map[string]sandboxapi.Workspace
	caches map[string]sandbox.RepoCache
}

var _ Store = (*Remembering)(nil)

// NewRemembering wraps st.
func NewRemembering(st Store) *Remembering {
	return &Remembering{Store: st, ws: map[string]sandboxapi.Workspace{}, caches: map[string]sandbox.RepoCache{}}
}

type rememberedKey struct{}

// AllowRemembered returns ctx marked so that Remembering may answer a read
// from memory when the store is unavailable.
func AllowRemembered(ctx context.Context) context.Context {
	return context.WithValue(ctx, rememberedKey{}, true)
}

func allowed(ctx context.Context) bool { b, _ := ctx.Value(rememberedKey{}).(bool); return b }

// GetWorkspace reads the row through the store; see Remembering.
func (r *Remembering) GetWorkspace(ctx context.Context, id string) (sandboxapi.Workspace, error) {
	ws, err := r.Store.GetWorkspace(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.ws[id] = ws
	case errors.Is(err, sandboxapi.ErrWorkspaceNotFound):
		delete(r.ws, id)
	case errors.Is(err, sandboxapi.ErrRuntimeUnavailable) && allowed(ctx):
		if mem, ok := r.ws[id]; ok {
			return mem, nil
		}
	}
	return ws, err
}

// GetRepoCache reads the row through the store; see Remembering.
func (r *Remembering) GetRepoCache(ctx context.Context, id string) (sandbox.RepoCache, error) {
	c, err := r.Store.GetRepoCache(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.caches[id] = c
	case errors.Is(err, sandboxapi.ErrNotFound):
		delete(r.caches, id)
	case errors.Is(err, sandboxapi.ErrRuntimeUnavailable) && allowed(ctx):
		if mem, ok := r.caches[id]; ok {
			return mem, nil
		}
	}
	return c, err
}

// CreateWorkspace writes through and remembers the row.
func (r *Remembering) CreateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error {
	err := r.Store.CreateWorkspace(ctx, ws)
	r.remember(ws, err)
	return err
}

// UpdateWorkspace writes through and remembers the row.
func (r *Remembering) UpdateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error {
	err := r.Store.UpdateWorkspace(ctx, ws)
	r.remember(ws, err)
	return err
}

func (r *Remembering) remember(ws sandboxapi.Workspace, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.ws[ws.ID] = ws
	case errors.Is(err, sandboxapi.ErrWorkspaceNotFound):
		delete(r.ws, ws.ID)
	}
}

// TouchWorkspace writes through and updates the remembered row's times.
func (r *Remembering) TouchWorkspace(ctx context.Context, id string, at time.Time) error {
	err := r.Store.TouchWorkspace(ctx, id, at)
	if err == nil {
		r.mu.Lock()
		if ws, ok := r.ws[id]; ok {
			ws.LastUsedAt, ws.UpdatedAt = at.UTC(), at.UTC()
			r.ws[id] = ws
		}
		r.mu.Unlock()
	}
	return err
}

// DeleteWorkspace forgets the row, then deletes it.
func (r *Remembering) DeleteWorkspace(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.ws, id)
	r.mu.Unlock()
	return r.Store.DeleteWorkspace(ctx, id)
}

// UpsertRepoCache writes through and remembers the row.
func (r *Remembering) UpsertRepoCache(ctx context.Context, c sandbox.RepoCache) error {
	err := r.Store.UpsertRepoCache(ctx, c)
	if err == nil {
		r.mu.Lock()
		r.caches[c.ID] = c
		r.mu.Unlock()
	}
	return err
}

// DeleteRepoCache forgets the row, then deletes it.
func (r *Remembering) DeleteRepoCache(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.caches, id)
	r.mu.Unlock()
	return r.Store.DeleteRepoCache(ctx, id)
}
