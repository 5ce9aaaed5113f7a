package activities

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
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
	require.ErrorIs(t, err, sandbox.ErrConflict)
	assert.Contains(t, sandbox.Message(err), "used 1m0s ago")

	ws := sandbox.Workspace{ID: "ws-a", Key: "ka", Mode: sandbox.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t",
		RepoCacheID: row.ID, HostID: "h", State: sandbox.WorkspaceEvicted, LastUsedAt: now, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, st.CreateWorkspace(ctx, ws))
	err = e.checkRepoCacheRemovable(ctx, row, 0, t.TempDir())
	require.ErrorIs(t, err, sandbox.ErrConflict)
	assert.Contains(t, sandbox.Message(err), "used by workspace ws-a (evicted)")

	ws.State = sandbox.WorkspaceRemoved
	require.NoError(t, st.UpdateWorkspace(ctx, ws))
	err = e.checkRepoCacheRemovable(ctx, row, 0, t.TempDir())
	require.ErrorIs(t, err, sandbox.ErrConflict)
	assert.Contains(t, sandbox.Message(err), "cannot check it for unsaved work")
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
