package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestRememberingServesRowsWhileTheStoreIsDown: the rows a host last read
// or wrote answer reads marked AllowRemembered when the store fails with
// SandboxUnavailable (here: closed); unmarked reads, writes and rows never
// seen still fail; a miss forgets the row.
func TestRememberingServesRowsWhileTheStoreIsDown(t *testing.T) {
	ctx := context.Background()
	inner, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	r := store.NewRemembering(inner)
	now := time.Now().UTC().Truncate(time.Second)
	ws := sandboxapi.Workspace{ID: "ws-a", Key: "ka", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t1",
		State: sandboxapi.WorkspaceReady, HostID: "h1", LastUsedAt: now, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, r.CreateWorkspace(ctx, ws))
	gone := sandboxapi.Workspace{ID: "ws-gone", Key: "kg", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t2"}
	require.NoError(t, r.CreateWorkspace(ctx, gone))
	require.NoError(t, inner.DeleteWorkspace(ctx, gone.ID)) // behind its back
	_, err = r.GetWorkspace(ctx, gone.ID)
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound, "a miss forgets the row")
	rc := sandbox.RepoCache{ID: "rc-1", RepoName: "o/r", State: sandbox.RepoCacheReady, LastUsedAt: now, CreatedAt: now, UpdatedAt: now, LastFetchedAt: now}
	require.NoError(t, r.UpsertRepoCache(ctx, rc))
	later := now.Add(time.Minute)
	require.NoError(t, r.TouchWorkspace(ctx, ws.ID, later))
	_, err = r.GetHost(ctx, "h1")
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "the host registry passes through")

	require.NoError(t, inner.Close()) // the store is gone
	allow := store.AllowRemembered(ctx)
	got, err := r.GetWorkspace(allow, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, ws.ID, got.ID)
	assert.Equal(t, later, got.LastUsedAt, "touches are remembered")
	gotRC, err := r.GetRepoCache(allow, rc.ID)
	require.NoError(t, err)
	assert.Equal(t, rc.ID, gotRC.ID)

	_, err = r.GetWorkspace(ctx, ws.ID)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable, "only callers that allow it get remembered rows")
	_, err = r.GetWorkspace(allow, gone.ID)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable, "a row never seen (or forgotten) is not invented")
	_, err = r.GetWorkspace(allow, "ws-never")
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.ErrorIs(t, r.UpdateWorkspace(allow, ws), sandboxapi.ErrRuntimeUnavailable, "writes need the store")
}

// Remembering is a store.Store: the host registry's contract holds through
// it (it passes through to the wrapped store).
func TestRememberingHostsContract(t *testing.T) {
	storetest.RunHosts(t, func(t *testing.T) func() storetest.HostStore {
		path := filepath.Join(t.TempDir(), "sandbox.db")
		return func() storetest.HostStore {
			s, err := sqlite.Open(context.Background(), path)
			require.NoError(t, err)
			return store.NewRemembering(s)
		}
	})
}
