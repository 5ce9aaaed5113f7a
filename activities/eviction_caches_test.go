package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A repo cache is kept (ErrConflict, nothing removed) when used within
// MinIdle, referenced by a workspace row of this host that is not removed,
// or when nothing can check it for unsaved work.
func TestCheckRepoCacheRemovable(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := &EvictionActivities{Activities: &Activities{Store: st, HostID: "h", Now: func() time.Time { return now }}}
	row := sandbox.RepoCache{ID: "rc-1", LastUsedAt: now.Add(-time.Minute)}

	err = e.checkRepoCacheRemovable(ctx, row, time.Hour, t.TempDir())
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, sandboxapi.Message(err), "used 1m0s ago")

	ws := sandboxapi.Workspace{ID: "ws-a", Key: "ka", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t",
		RepoCacheID: row.ID, HostID: "h", State: sandboxapi.WorkspaceEvicted, LastUsedAt: now, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, st.CreateWorkspace(ctx, ws))
	err = e.checkRepoCacheRemovable(ctx, row, 0, t.TempDir())
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, sandboxapi.Message(err), "used by workspace ws-a (evicted)")

	ws.State = sandboxapi.WorkspaceRemoved
	require.NoError(t, st.UpdateWorkspace(ctx, ws))
	err = e.checkRepoCacheRemovable(ctx, row, 0, t.TempDir())
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, sandboxapi.Message(err), "cannot check it for unsaved work")
}

// Only regular files count, symlinks are not followed.
func TestRegularFileBytes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "f"), make([]byte, 10), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "g"), make([]byte, 5), 0o644))
	outside := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(outside, make([]byte, 1000), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	assert.Equal(t, int64(15), regularFileBytes(dir))
	assert.Equal(t, int64(0), regularFileBytes(filepath.Join(dir, "missing")))
}

// RemoveDependencyCaches removes a planned cache unused for MinIdle, skips
// one given to a runtime since (and everything once the usage is at low
// water), counts a missing one done, and refuses another host's plan.
func TestRemoveDependencyCaches(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := now.Add(-2 * time.Hour)
	caches := &depcache.Caches{Root: filepath.Join(data, "depcache"), Now: func() time.Time { return clock }}
	e := &EvictionActivities{Activities: &Activities{HostID: "h", DepCaches: caches, Now: func() time.Time { return now }},
		DataDir: data, DiskBudgetBytes: 1 << 40}
	old := sandboxapi.Workspace{ID: "ws-old", UserID: "alice", RepoCacheID: "rc-1", LocalPath: t.TempDir()}
	fresh := sandboxapi.Workspace{ID: "ws-fresh", UserID: "bob", RepoCacheID: "rc-1", LocalPath: t.TempDir()}
	oldDir, err := caches.Prepare(old)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(oldDir, "blob"), make([]byte, 4096), 0o644))
	clock = now.Add(-time.Minute)
	freshDir, err := caches.Prepare(fresh)
	require.NoError(t, err)
	id := func(w sandboxapi.Workspace) string { return "user/" + depcache.Key(depcache.ScopeUser, w) }
	action := func(id string) sandboxapi.EvictionAction {
		return sandboxapi.EvictionAction{Kind: sandboxapi.EvictionRemoveDependencyCache, Tier: sandboxapi.TierDependencyCacheLRU, ID: id, MinIdle: time.Hour}
	}

	_, err = e.RemoveDependencyCaches(ctx, wire.RemoveDependencyCachesInput{HostID: "other"})
	require.Error(t, err, "another host's plan")

	res, err := e.RemoveDependencyCaches(ctx, wire.RemoveDependencyCachesInput{HostID: "h",
		Actions: []sandboxapi.EvictionAction{action(id(old)), action(id(fresh)), action("user/" + strings.Repeat("0", depcache.KeyLen))}})
	require.NoError(t, err)
	require.Len(t, res.Results, 3)
	assert.Equal(t, sandboxapi.OutcomeDone, res.Results[0].Outcome, res.Results[0].Reason)
	assert.Equal(t, int64(4096), res.Results[0].FreedBytes)
	assert.NoDirExists(t, oldDir)
	assert.Equal(t, sandboxapi.OutcomeSkipped, res.Results[1].Outcome)
	assert.Contains(t, res.Results[1].Reason, "used 1m0s ago")
	assert.DirExists(t, freshDir)
	assert.Equal(t, sandboxapi.OutcomeDone, res.Results[2].Outcome, "already gone")

	res, err = e.RemoveDependencyCaches(ctx, wire.RemoveDependencyCachesInput{HostID: "h", LowBytes: 1 << 40,
		Actions: []sandboxapi.EvictionAction{action(id(fresh))}})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.OutcomeSkipped, res.Results[0].Outcome)
	assert.Contains(t, res.Results[0].Reason, "pressure relieved")
}

// TestMeasureLeavesOutVolumeImages: with a byte budget, the sparse images
// of disk volumes count for nothing (their length is their size, not their
// use); what a volume holds counts under its owner, where it is mounted.
func TestMeasureLeavesOutVolumeImages(t *testing.T) {
	data := t.TempDir()
	volumes := filepath.Join(data, "volumes")
	owner := filepath.Join(data, "repos", "wt")
	require.NoError(t, os.MkdirAll(volumes, 0o700))
	require.NoError(t, os.MkdirAll(owner, 0o755))
	img, err := os.Create(filepath.Join(volumes, "0123.img"))
	require.NoError(t, err)
	require.NoError(t, img.Truncate(40<<30))
	require.NoError(t, img.Close())
	require.NoError(t, os.WriteFile(filepath.Join(owner, "work"), make([]byte, 100), 0o644))

	e := &EvictionActivities{DataDir: data, DiskBudgetBytes: 1 << 30, VolumesDir: volumes}
	used, budget, sizes, mode, err := e.measure(context.Background(), map[string]string{owner: "ws-1"})
	require.NoError(t, err)
	assert.Equal(t, "bytes", mode)
	assert.Equal(t, int64(1<<30), budget)
	assert.Equal(t, int64(100), used)
	assert.Equal(t, int64(100), sizes["ws-1"])
}
