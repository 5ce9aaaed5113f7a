package tests

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// freshDatabaseSchema returns a DSN of SANDBOX_TEST_DATABASE_URL whose
// search_path is a new schema, dropped at cleanup. It skips when the variable
// is unset, except in CI (CI=true), where it fails.
func freshDatabaseSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("SANDBOX_TEST_DATABASE_URL")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SANDBOX_TEST_DATABASE_URL is not set (.ci/run starts PostgreSQL and sets it)")
		}
		t.Skip("SANDBOX_TEST_DATABASE_URL is not set: no PostgreSQL to share between hosts")
	}
	schema := fmt.Sprintf("mh_%d", time.Now().UnixNano())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestTwoHostsShareTemporalAndPostgres runs two worker hosts (two host ids,
// two data roots) on one Temporal and one PostgreSQL: each workspace lives only
// on its own host; with host B stopped, B's sessions fail fast with
// WorkspaceUnavailable while A's keep working; after B restarts, its sessions
// work again with their files intact.
func TestTwoHostsShareTemporalAndPostgres(t *testing.T) {
	dsn := freshDatabaseSchema(t)
	queue := uniq(t, "q")
	hostCfg := func(name string) hostworker.Config {
		cfg := baseConfig(t, name)
		cfg.TaskQueue = queue // one shared queue for both hosts
		cfg.DatabaseURL = dsn
		cfg.SessionOnHostQueue = false
		cfg.HostWait = 3 * time.Second
		return cfg
	}
	start := func(cfg hostworker.Config) *hostworker.Host {
		h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: tc, Credentials: creds, Logger: quiet})
		require.NoError(t, err)
		return h
	}
	nameA, nameB := uniq(t, "hostA"), uniq(t, "hostB")
	cfgB := hostCfg(nameB)
	hostB := start(cfgB)
	defer func() { hostB.Stop() }()
	sc := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: queue})
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")

	// Only B polls: the first workspace lands on B.
	sB, hdB, err := sc.Acquire(ctx, editRequest(user, "p", "onB", url))
	require.NoError(t, err)
	require.Equal(t, nameB, hdB.HostID)
	require.NoError(t, sB.WriteFile(ctx, "b.txt", []byte("written on B\n"), 0))
	// A caller-named branch held on B (checked across hosts below).
	named := editRequest(uniq(t, "v"), "p", "named", url)
	named.BranchName = "agent/" + uniq(t, "x")
	_, hdNamed, err := sc.Acquire(ctx, named)
	require.NoError(t, err)
	require.Equal(t, nameB, hdNamed.HostID)

	hostA := start(hostCfg(nameA))
	defer hostA.Stop()
	// New workspaces go to whichever host picks the acquire; try until one lands on A.
	var sA *sandboxclient.Session
	var hdA sandboxapi.Handle
	for i := 0; i < 30 && hdA.HostID != nameA; i++ {
		sA, hdA, err = sc.Acquire(ctx, editRequest(user, "p", fmt.Sprintf("onA%d", i), url))
		require.NoError(t, err)
	}
	require.Equal(t, nameA, hdA.HostID, "no workspace landed on host A")
	assert.True(t, strings.HasPrefix(hdA.LocalPath, hostA.Config.DataDir))
	assert.True(t, strings.HasPrefix(hdB.LocalPath, cfgB.DataDir))
	_, err = os.Stat(filepath.Join(hostA.Config.DataDir, strings.TrimPrefix(hdB.LocalPath, cfgB.DataDir)))
	assert.True(t, os.IsNotExist(err), "B's workspace must not exist on A")
	_, err = os.Stat(filepath.Join(cfgB.DataDir, strings.TrimPrefix(hdA.LocalPath, hostA.Config.DataDir)))
	assert.True(t, os.IsNotExist(err), "A's workspace must not exist on B")

	// Both hosts registered themselves.
	reg, ok := hostA.Store.(store.HostRegistry)
	require.True(t, ok)
	hosts, err := reg.ListHosts(ctx)
	require.NoError(t, err)
	var ids []string
	for _, h := range hosts {
		ids = append(ids, h.HostID)
	}
	assert.Contains(t, ids, nameA)
	assert.Contains(t, ids, nameB)

	// Host B goes down.
	hostB.Stop()
	began := time.Now()
	_, err = sB.ReadFile(ctx, "b.txt")
	require.Error(t, err)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable)
	// Within the configured wait (the operation's schedule-to-start timeout),
	// plus the SDK's sticky schedule-to-start timeout (5 s: the session's next
	// workflow task first waits on B's sticky queue before A takes it), plus
	// slack for the round trips.
	assert.Less(t, time.Since(began), cfgB.HostWait+10*time.Second, "B's session must fail fast")
	data, err := sA.ReadFile(ctx, "README.md")
	require.NoError(t, err, "A's sessions keep working")
	// Only A serves now: another tenant's workspace asking for the branch
	// held on B is refused there too (it was checked on the host only).
	other := editRequest(uniq(t, "w"), "p", "named", url)
	other.BranchName = named.BranchName
	_, _, err = sc.Acquire(ctx, other)
	require.Error(t, err)
	assert.ErrorIs(t, err, sandboxapi.ErrConflict, "%v", err)
	assert.Contains(t, err.Error(), "is held by another workspace")
	assert.NotEmpty(t, data)
	res, err := sA.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)

	// B comes back: its session works again, files intact.
	hostB = start(cfgB)
	data, err = sB.ReadFile(ctx, "b.txt")
	require.NoError(t, err)
	assert.Equal(t, "written on B\n", string(data))
}
