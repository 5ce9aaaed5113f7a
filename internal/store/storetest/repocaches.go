package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ---- repo caches ----

func testRepoCacheRoundTrip(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	want := repoCache("rc-1")
	require.NoError(t, s.UpsertRepoCache(ctx, want))
	got, err := s.GetRepoCache(ctx, want.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Zero times round-trip as zero (a cache that has never been fetched).
	zero := repoCache("rc-2")
	zero.LastFetchedAt = time.Time{}
	zero.State = sandbox.RepoCacheCloning
	require.NoError(t, s.UpsertRepoCache(ctx, zero))
	got, err = s.GetRepoCache(ctx, zero.ID)
	require.NoError(t, err)
	assert.True(t, got.LastFetchedAt.IsZero(), "zero time came back as %v", got.LastFetchedAt)
	assert.Equal(t, zero, got)

	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []sandbox.RepoCache{want, zero}, all)
}

func testRepoCacheUpsertUpdates(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	first := repoCache("rc-1")
	require.NoError(t, s.UpsertRepoCache(ctx, first))

	second := first
	second.RepoName = "acme/renamed"
	second.RepoURL = "https://github.com/acme/renamed.git"
	second.Provider = "other"
	second.ProviderHost = "gitlab.example.com"
	second.LocalPath = "/elsewhere/.bare"
	second.AuthScopeHash = "sha256:other"
	second.DefaultBranch = "trunk"
	second.HostID = "host-b"
	second.LastFetchedAt = ts(time.Hour + 1)
	second.LastUsedAt = ts(time.Hour + 2)
	second.SizeBytes = 7
	second.State = sandbox.RepoCacheEvicted
	second.CreatedAt = ts(time.Hour + 3) // ignored: created_at keeps its first value
	second.UpdatedAt = ts(time.Hour + 4)
	require.NoError(t, s.UpsertRepoCache(ctx, second))

	got, err := s.GetRepoCache(ctx, first.ID)
	require.NoError(t, err)
	want := second
	want.CreatedAt = first.CreatedAt
	assert.Equal(t, want, got)

	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 1, "upsert of an existing id must not add a row")
}

func testRepoCacheNotFoundAndDelete(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	_, err := s.GetRepoCache(ctx, "rc-missing")
	requireKind(t, err, sandboxapi.ErrNotFound, "rc-missing")
	assert.NotErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)

	require.NoError(t, s.DeleteRepoCache(ctx, "rc-missing"), "deleting a missing cache is success")

	c := repoCache("rc-1")
	other := repoCache("rc-2")
	require.NoError(t, s.UpsertRepoCache(ctx, c))
	require.NoError(t, s.UpsertRepoCache(ctx, other))
	require.NoError(t, s.DeleteRepoCache(ctx, c.ID))
	_, err = s.GetRepoCache(ctx, c.ID)
	requireKind(t, err, sandboxapi.ErrNotFound, c.ID)
	require.NoError(t, s.DeleteRepoCache(ctx, c.ID), "second delete is success")

	got, err := s.GetRepoCache(ctx, other.ID)
	require.NoError(t, err, "delete must only remove its own row")
	assert.Equal(t, other, got)
}

func testRepoCacheListOrder(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	all, err := s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)

	for _, c := range []struct {
		id  string
		age time.Duration
	}{{"rc-c", 3}, {"rc-b", 1}, {"rc-a", 3}, {"rc-d", 2}} {
		rc := repoCache(c.id)
		rc.LastUsedAt = ts(c.age * time.Nanosecond)
		require.NoError(t, s.UpsertRepoCache(ctx, rc))
	}
	all, err = s.ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"rc-b", "rc-d", "rc-a", "rc-c"},
		ids(all, func(c sandbox.RepoCache) string { return c.ID }),
		"least recently used first, ties by id")
}
