package store

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestPlaceholders pins the rendered SQL: $n and ? from one column list,
// the update's key last, upserts that keep the key and created_at.
func TestPlaceholders(t *testing.T) {
	pg, lite := NewStatements(Dollar), NewStatements(Question)
	assert.Equal(t, "UPDATE sandbox_workspaces SET last_used_at = $1, updated_at = $2 WHERE id = $3", pg.TouchWorkspace)
	assert.Equal(t, "UPDATE sandbox_workspaces SET last_used_at = ?, updated_at = ? WHERE id = ?", lite.TouchWorkspace)
	assert.Equal(t, "DELETE FROM sandbox_hosts WHERE host_id = $1", hosts.del(Dollar))
	assert.Equal(t, "SELECT host_id, task_queue, last_heartbeat, data_root, disk_budget_bytes, updated_at FROM sandbox_hosts WHERE host_id = ?", lite.GetHost)

	// The update's key is its last parameter, after every other column in order.
	assert.True(t, strings.HasPrefix(pg.UpdateWorkspace, "UPDATE sandbox_workspaces SET key = $1, repo_cache_id = $2,"), pg.UpdateWorkspace)
	assert.True(t, strings.HasSuffix(pg.UpdateWorkspace, "updated_at = $26, base_fetched_at = $27, network = $28, network_allow = $29 WHERE id = $30"), pg.UpdateWorkspace)
	assert.Equal(t, len(workspaces.columns), strings.Count(lite.UpdateWorkspace, "?"))

	// Upserts keep created_at and the key.
	for _, u := range []struct{ key, q string }{
		{"id", pg.UpsertRepoCache}, {"id", pg.UpsertRuntime}, {"host_id", pg.UpsertHost},
	} {
		_, set, ok := strings.Cut(u.q, "ON CONFLICT ("+u.key+") DO UPDATE SET ")
		require.True(t, ok, u.q)
		assert.NotContains(t, set, "created_at", u.q)
		assert.NotContains(t, " "+set, " "+u.key+" = ", u.q)
	}
	assert.Contains(t, pg.UpsertRepoCache, "ON CONFLICT (id) DO UPDATE SET repo_name = excluded.repo_name,")
	assert.Contains(t, pg.UpsertHost, "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (host_id) DO UPDATE SET task_queue")
}

// TestListWorkspacesQuery pins the filter's conditions, their parameter
// numbering and order, and the limit.
func TestListWorkspacesQuery(t *testing.T) {
	f := sandbox.WorkspaceFilter{
		UserID: "u", HostID: "h", State: sandboxapi.WorkspaceReady,
		LastUsedBefore: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Limit: 7,
	}
	q, args, err := NewStatements(Dollar).ListWorkspaces(f)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(q,
		" FROM sandbox_workspaces WHERE user_id = $1 AND host_id = $2 AND state = $3 AND last_used_at < $4 ORDER BY last_used_at, id LIMIT $5"), q)
	assert.Equal(t, []any{"u", "h", string(sandboxapi.WorkspaceReady), "2025-01-02T03:04:05.000000006Z", int64(7)}, args)

	q, args, err = NewStatements(Question).ListWorkspaces(sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(q, " FROM sandbox_workspaces ORDER BY last_used_at, id"), q)
	assert.Empty(t, args)

	_, _, err = NewStatements(Question).ListWorkspaces(sandbox.WorkspaceFilter{LastUsedBefore: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	q, args = NewStatements(Question).ListRuntimes("ws-1")
	assert.True(t, strings.HasSuffix(q, " FROM sandbox_runtimes WHERE workspace_id = ? ORDER BY last_used_at, id"), q)
	assert.Equal(t, []any{"ws-1"}, args)
	q, args = NewStatements(Question).ListRuntimes("")
	assert.True(t, strings.HasSuffix(q, " FROM sandbox_runtimes ORDER BY last_used_at, id"), q)
	assert.Empty(t, args)
}

// TestTimeCodec round-trips the representable range and rejects the rest.
func TestTimeCodec(t *testing.T) {
	for _, tm := range []time.Time{
		{},
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2025, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		s, err := EncodeTime("f", tm)
		require.NoError(t, err)
		assert.Len(t, s, len(TimeLayout))
		back, err := DecodeTime("f", s)
		require.NoError(t, err)
		assert.True(t, back.Equal(tm), "%s: %s", tm, back)
		assert.Equal(t, time.UTC, back.Location())
	}
	_, err := EncodeTime("f", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = EncodeTime("f", time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = DecodeTime("col", "yesterday")
	require.ErrorContains(t, err, `column col: bad time "yesterday"`)
}

// TestValues pins the column values: NULLs, the update order, the key check.
func TestValues(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	ws := sandboxapi.Workspace{ID: "ws-1", Key: "k", Mode: sandboxapi.ModeAnalysis, LastUsedAt: at}
	values, err := WorkspaceValues(ws)
	require.NoError(t, err)
	require.Len(t, values, len(workspaces.columns))
	assert.Equal(t, "ws-1", values[0])
	assert.Nil(t, values[10], "empty conversation_id is NULL")
	assert.Nil(t, values[11], "empty task_id is NULL")
	assert.Nil(t, values[19], "nil pinned_until is NULL")
	assert.Equal(t, "2025-01-02T03:04:05.000000006Z", values[23])

	update, err := WorkspaceUpdateValues(ws)
	require.NoError(t, err)
	assert.Equal(t, append(values[1:len(values):len(values)], "ws-1"), update)
	_, err = WorkspaceUpdateValues(sandboxapi.Workspace{})
	require.NoError(t, err, "an update with no id matches no row; it is not rejected here")

	for what, err := range map[string]error{
		"workspace":  second(WorkspaceValues(sandboxapi.Workspace{})),
		"repo cache": second(RepoCacheValues(sandbox.RepoCache{})),
		"runtime":    second(RuntimeValues(sandbox.RuntimeRecord{})),
		"host":       second(HostValues(Host{})),
	} {
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, what)
		assert.Equal(t, what+" id: must not be empty", sandboxapi.Message(err))
	}

	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = RuntimeValues(sandbox.RuntimeRecord{ID: "rt", ExpiresAt: &far})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "expires_at")
}

func second(_ []any, err error) error { return err }
