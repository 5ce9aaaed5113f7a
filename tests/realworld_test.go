package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
)

// Real repositories and real faults, end to end: store outages, moved
// repositories, push rejections, submodules, Git LFS and line endings
// through the real service.

// pgSchema creates a fresh schema in the PostgreSQL test database
// (SANDBOX_TEST_DATABASE_URL, a URL), drops it when t ends, and returns the
// database URL parsed, with search_path set to it. It skips without the
// variable, except under CI=true.
func pgSchema(t *testing.T) *url.URL {
	t.Helper()
	dsn := os.Getenv("SANDBOX_TEST_DATABASE_URL")
	if dsn == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("SANDBOX_TEST_DATABASE_URL is unset under CI=true")
		}
		t.Skip("SANDBOX_TEST_DATABASE_URL is unset: skipping the PostgreSQL outage test")
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err, "SANDBOX_TEST_DATABASE_URL must be a postgres:// URL")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "sce_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	_ = conn.Close(ctx)
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u
}

// TestStoreOutage: PostgreSQL goes away mid-session (the TCP proxy between
// the worker and the database is cut). Operations that need no store —
// read_file, list_dir, search, write_file, exec, status, diff, commit —
// keep working from the row the host remembers; one that needs the store (a
// new workspace) fails, within bounds, with the retryable SandboxUnavailable
// naming no host, port, role or database; once the database is back, it works.
func TestStoreOutage(t *testing.T) {
	db := pgSchema(t)
	proxy := storetest.NewTCPProxy(t, db.Host)
	proxied := *db
	proxied.Host = proxy.Addr()
	h := startHost(t, "pgout", func(c *hostworker.Config) { c.DatabaseURL = proxied.String() })
	upstream := gittest.InitRepo(t, t.TempDir()+"/team/project", "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	repoURL := gittest.FileURL(upstream)
	user := uniq(t, "u")
	ctx := ctxFor(t, 5*time.Minute)
	s, _, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", repoURL))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "before.txt", []byte("before\n"), 0))

	proxy.Cut()
	start := time.Now()
	got, err := s.ReadFile(ctx, "before.txt")
	require.NoError(t, err, "read_file needs no store")
	assert.Equal(t, "before\n", string(got))
	assert.Less(t, time.Since(start), 30*time.Second)
	entries, err := s.ListDir(ctx, "")
	require.NoError(t, err)
	assert.NotEmpty(t, entries)
	found, err := s.Search(ctx, sandbox.SearchRequest{Pattern: "before", Literal: true})
	require.NoError(t, err)
	assert.Len(t, found.Matches, 1)
	require.NoError(t, s.WriteFile(ctx, "during.txt", []byte("during\n"), 0))
	res, err := s.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"cat", "during.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "during\n", string(res.Stdout))
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	d, err := s.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d.Files, "during.txt")
	c, err := s.Commit(ctx, sandbox.CommitRequest{Message: "written while the store was down"})
	require.NoError(t, err)
	assert.False(t, c.NothingToCommit)
	quick := time.Now()
	_, err = s.ReadFile(ctx, "during.txt")
	require.NoError(t, err)
	assert.Less(t, time.Since(quick), 10*time.Second, "once the store is known down, nothing waits for it")

	start = time.Now()
	_, _, err = h.client.Acquire(ctx, editRequest(user, "p", "c2", repoURL))
	require.Error(t, err, "a new workspace needs the store")
	assert.True(t, errors.Is(err, sandbox.ErrRuntimeUnavailable), "got %v", err)
	assert.Less(t, time.Since(start), 2*time.Minute, "bounded")
	for _, detail := range []string{db.Hostname(), db.Port(), proxy.Addr(), db.User.Username(), strings.TrimPrefix(db.Path, "/"), db.Query().Get("search_path"), "user=", "database="} {
		assert.NotContains(t, err.Error(), detail, "the error names no connection detail: %v", err)
	}

	require.NoError(t, proxy.Restore())
	require.Eventually(t, func() bool {
		_, _, err := h.client.Acquire(ctx, editRequest(user, "p", "c2", repoURL))
		return err == nil
	}, 90*time.Second, time.Second, "works again once the database is back")
	got, err = s.ReadFile(ctx, "during.txt")
	require.NoError(t, err)
	assert.Equal(t, "during\n", string(got))
}
