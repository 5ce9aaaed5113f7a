package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// HostStore is what RunHosts needs of a store: the host registry and Close.
// *sqlite.Store and *postgres.Store satisfy it.
type HostStore interface {
	store.HostRegistry
	Close() error
}

// HostFactory is Factory for the host registry: it prepares one fresh, empty
// database for t and returns a function that opens a HostStore on it (and
// reports its own failures through t). Reopening must see the same rows.
type HostFactory func(t *testing.T) (open func() HostStore)

// RunHosts is the contract suite of store.HostRegistry (the sandbox_hosts
// table): field-exact round trips (nanosecond times back in UTC, zero times),
// upsert replaces every column, not-found kind, empty id rejected, list order
// by host id, persistence across reopen, and concurrent heartbeats from
// several writers. It closes every store it opens.
func RunHosts(t *testing.T, newStore HostFactory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, f HostFactory)
	}{
		{"HostRoundTrip", testHostRoundTrip},
		{"HostUpsertReplaces", testHostUpsertReplaces},
		{"HostNotFoundAndEmptyID", testHostNotFoundAndEmptyID},
		{"HostListOrderAndReopen", testHostListOrderAndReopen},
		{"HostConcurrentHeartbeats", testHostConcurrentHeartbeats},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

func openHostStore(t *testing.T, f HostFactory) (HostStore, func() HostStore) {
	t.Helper()
	open := f(t)
	reopen := func() HostStore {
		s := open()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return reopen(), reopen
}

func host(id string) store.Host {
	return store.Host{
		HostID:          id,
		TaskQueue:       "sandbox-host-" + id,
		LastHeartbeat:   ts(30*time.Minute + 17),
		DataRoot:        "/srv/sandboxcore/" + id,
		DiskBudgetBytes: 500 << 30,
		UpdatedAt:       ts(30*time.Minute + 18),
	}
}

func testHostRoundTrip(t *testing.T, f HostFactory) {
	ctx := context.Background()
	s, _ := openHostStore(t, f)
	want := host("host-a")
	require.NoError(t, s.UpsertHost(ctx, want))
	got, err := s.GetHost(ctx, want.HostID)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Other zones and monotonic readings come back as the same instant in UTC;
	// zero times and a zero budget round-trip as zero.
	zone := time.FixedZone("UTC-7", -7*3600)
	other := host("host-b")
	other.LastHeartbeat = time.Now().In(zone)
	other.UpdatedAt = time.Time{}
	other.DiskBudgetBytes = 0
	other.DataRoot = ""
	require.NoError(t, s.UpsertHost(ctx, other))
	got, err = s.GetHost(ctx, other.HostID)
	require.NoError(t, err)
	assert.Equal(t, time.UTC, got.LastHeartbeat.Location())
	assert.Equal(t, other.LastHeartbeat.UTC().Round(0), got.LastHeartbeat)
	assert.True(t, got.UpdatedAt.IsZero(), "zero time came back as %v", got.UpdatedAt)
	assert.Zero(t, got.DiskBudgetBytes)
}

func testHostUpsertReplaces(t *testing.T, f HostFactory) {
	ctx := context.Background()
	s, _ := openHostStore(t, f)
	first := host("host-a")
	require.NoError(t, s.UpsertHost(ctx, first))
	second := store.Host{
		HostID:          first.HostID,
		TaskQueue:       "sandbox-host-renamed",
		LastHeartbeat:   ts(time.Hour + 1),
		DataRoot:        "/elsewhere",
		DiskBudgetBytes: 1,
		UpdatedAt:       ts(time.Hour + 2),
	}
	require.NoError(t, s.UpsertHost(ctx, second))
	got, err := s.GetHost(ctx, first.HostID)
	require.NoError(t, err)
	assert.Equal(t, second, got)
	all, err := s.ListHosts(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 1, "upsert of an existing id must not add a row")
}

func testHostNotFoundAndEmptyID(t *testing.T, f HostFactory) {
	ctx := context.Background()
	s, _ := openHostStore(t, f)
	_, err := s.GetHost(ctx, "host-missing")
	requireKind(t, err, sandboxapi.ErrNotFound, "host-missing")
	require.ErrorIs(t, s.UpsertHost(ctx, host("")), sandboxapi.ErrInvalidArgument)
	far := host("host-far")
	far.LastHeartbeat = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	require.ErrorIs(t, s.UpsertHost(ctx, far), sandboxapi.ErrInvalidArgument)
	all, err := s.ListHosts(ctx)
	require.NoError(t, err)
	assert.NotNil(t, all)
	assert.Empty(t, all)
}

func testHostListOrderAndReopen(t *testing.T, f HostFactory) {
	ctx := context.Background()
	s, reopen := openHostStore(t, f)
	// Byte order: upper case before lower case, "-" before digits.
	for _, id := range []string{"host-b", "Host-Z", "host-a", "host-10", "host-9", "host_x"} {
		require.NoError(t, s.UpsertHost(ctx, host(id)))
	}
	want := []string{"Host-Z", "host-10", "host-9", "host-a", "host-b", "host_x"}
	hostIDs := func(hs []store.Host) []string {
		return ids(hs, func(h store.Host) string { return h.HostID })
	}
	all, err := s.ListHosts(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, hostIDs(all))
	require.NoError(t, s.Close())

	s = reopen()
	all, err = s.ListHosts(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, hostIDs(all))
	got, err := s.GetHost(ctx, "host-a")
	require.NoError(t, err)
	assert.Equal(t, host("host-a"), got)
}

func testHostConcurrentHeartbeats(t *testing.T, f HostFactory) {
	ctx := context.Background()
	s, _ := openHostStore(t, f)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, goroutines)
	)
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Two writers per host id, several beats each: upserts of one id
			// never conflict with each other.
			h := host([]string{"host-a", "host-b", "host-c", "host-d"}[i%4])
			for beat := range 5 {
				h.LastHeartbeat = ts(time.Duration(i*10 + beat))
				if errs[i] = s.UpsertHost(ctx, h); errs[i] != nil {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "goroutine %d", i)
	}
	all, err := s.ListHosts(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 4)
}
