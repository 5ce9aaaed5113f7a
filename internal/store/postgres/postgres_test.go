package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestDatabaseURLEnv names the variable holding the connection string of a
// database the tests may create schemas in (.ci/run exports it after starting
// PostgreSQL).
const TestDatabaseURLEnv = "SANDBOX_TEST_DATABASE_URL"

// testDSN returns the test database's connection string, or skips the test
// when it is unset — except under CI=true, where a missing database is a
// failure, so CI can never pass without running these tests.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(TestDatabaseURLEnv)
	if dsn == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s is unset under CI=true: .ci/run must start PostgreSQL and export it", TestDatabaseURLEnv)
		}
		t.Skipf("%s is unset: skipping the PostgreSQL store tests (start PostgreSQL and set it, e.g. "+
			"postgres://sandboxcore_test:sandboxcore_test@127.0.0.1:5432/sandboxcore_test?sslmode=disable; see .ci/run)",
			TestDatabaseURLEnv)
	}
	return dsn
}

// withSearchPath returns dsn with the run-time parameter search_path=schema.
func withSearchPath(t *testing.T, dsn, schema string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(t, err, "parse %s", TestDatabaseURLEnv)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

// freshSchema creates an empty schema in the test database, drops it (with
// everything in it) when t ends, and returns a connection string whose
// search_path is that schema: a fresh, empty "database" for one test.
func freshSchema(t *testing.T) string {
	t.Helper()
	dsn := testDSN(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "sct_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err, "connect to %s", TestDatabaseURLEnv)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, dsn, schema)
}

func openT(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// factory is the storetest.Factory of this store: a fresh schema per test.
func factory(t *testing.T) func() sandbox.Store {
	dsn := freshSchema(t)
	return func() sandbox.Store {
		s, err := Open(context.Background(), dsn)
		require.NoError(t, err)
		return s
	}
}

func TestContract(t *testing.T) {
	testDSN(t)
	storetest.Run(t, factory)
}

// TestSQLContract is what this store shares with the SQLite store beyond the
// port: the stored time text, the representable years, and two workers on one
// database.
func TestSQLContract(t *testing.T) {
	testDSN(t)
	storetest.RunSQL(t, factory, func(s sandbox.Store, query string, dest ...any) error {
		return s.(*Store).pool.QueryRow(context.Background(), query).Scan(dest...)
	})
}

func TestHostsContract(t *testing.T) {
	testDSN(t)
	storetest.RunHosts(t, func(t *testing.T) func() storetest.HostStore {
		dsn := freshSchema(t)
		return func() storetest.HostStore {
			s, err := Open(context.Background(), dsn)
			require.NoError(t, err)
			return s
		}
	})
}

// TestConcurrentOpenMigrates is several workers starting at once on an empty
// database: every Open succeeds and each migration is applied exactly once.
func TestConcurrentOpenMigrates(t *testing.T) {
	dsn := freshSchema(t)
	const n = 4
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		stores = make([]*Store, n)
		errs   = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = Open(context.Background(), dsn)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "open %d", i)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	ctx := context.Background()
	rows, err := stores[0].pool.Query(ctx,
		`SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
	require.NoError(t, err)
	applied, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
		var v [2]int64
		return v, r.Scan(&v[0], &v[1])
	})
	require.NoError(t, err)
	assert.Equal(t, [][2]int64{{1, 1}, {2, 1}, {3, 1}, {4, 1}}, applied, "each migration applied exactly once")

	// Every store works, and they see each other's rows.
	for i, s := range stores {
		require.NoError(t, s.UpsertRepoCache(ctx, sandbox.RepoCache{ID: fmt.Sprintf("rc-%d", i)}))
	}
	all, err := stores[n-1].ListRepoCaches(ctx)
	require.NoError(t, err)
	assert.Len(t, all, n)
}

// TestOpenWaitsForMigrationLock proves Open migrates under the advisory lock:
// while another session holds it, Open waits; once released, Open finishes.
func TestOpenWaitsForMigrationLock(t *testing.T) {
	dsn := freshSchema(t)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer holder.Close(ctx)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, MigrationLockName)
	require.NoError(t, err)

	done := make(chan error, 1)
	var s *Store
	go func() {
		var err error
		s, err = Open(ctx, dsn)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Open finished while the migration lock was held elsewhere: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	var released bool
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, MigrationLockName).Scan(&released))
	require.True(t, released)
	select {
	case err := <-done:
		require.NoError(t, err)
		require.NoError(t, s.Close())
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not finish after the migration lock was released")
	}

	// A wait cut short by ctx fails instead of hanging, also on a database
	// that is already up to date (every Open takes the lock).
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, MigrationLockName)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = Open(short, dsn)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, sandboxapi.ErrTimeout)
	assert.Contains(t, err.Error(), "migrate did not finish in time")
}

func TestOpenCreatesSchema(t *testing.T) {
	dsn := freshSchema(t)
	ctx := context.Background()
	s := openT(t, dsn)

	var version int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&version))
	assert.Equal(t, 4, version)

	rows, err := s.pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Subset(t, names, []string{
		"sandbox_workspaces_key", "sandbox_workspaces_analysis_uq", "sandbox_workspaces_edit_uq",
		"sandbox_workspaces_task_uq", "sandbox_workspaces_state_last_used", "sandbox_workspaces_size",
		"sandbox_workspaces_repo_cache", "sandbox_workspaces_host",
		"sandbox_repo_caches_state_last_used", "sandbox_repo_caches_size", "sandbox_repo_caches_host",
		"sandbox_runtimes_workspace", "sandbox_runtimes_state_last_used",
		"sandbox_hosts_pkey", "sandbox_hosts_last_heartbeat",
	})

	// The per-mode unique indexes are partial.
	var def string
	require.NoError(t, s.pool.QueryRow(ctx,
		`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'sandbox_workspaces_edit_uq'`).Scan(&def))
	assert.Contains(t, def, "UNIQUE")
	assert.Contains(t, def, "WHERE (mode = 'edit'")

	// Every text column sorts bytewise, whatever the database locale.
	var nonC int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name LIKE 'sandbox\_%' AND data_type = 'text'
		AND coalesce(collation_name, '') <> 'C'`).Scan(&nonC))
	assert.Zero(t, nonC)

	// The sandbox_hosts columns the issue names.
	rows, err = s.pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'sandbox_hosts' ORDER BY ordinal_position`)
	require.NoError(t, err)
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"host_id", "task_queue", "last_heartbeat", "data_root", "disk_budget_bytes", "updated_at"}, cols)

	// Reopening applies nothing new.
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	s2 := openT(t, dsn)
	var n int
	require.NoError(t, s2.pool.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&n))
	assert.Equal(t, 4, n)
}

// TestErrorMapping covers the mappings the contract suite cannot reach
// through valid input: values PostgreSQL cannot store, and failures that are
// not the caller's (a closed store): SandboxUnavailable naming no
// connection detail.
func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	s := openT(t, freshSchema(t))

	nul := "ws-\x00"
	require.ErrorIs(t, s.CreateWorkspace(ctx, sandboxapi.Workspace{ID: nul, Key: "k"}), sandboxapi.ErrInvalidArgument)
	require.ErrorIs(t, s.UpsertRepoCache(ctx, sandbox.RepoCache{ID: "rc", RepoURL: "bad\xff"}), sandboxapi.ErrInvalidArgument)
	_, err := s.GetWorkspace(ctx, nul)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	// Conflicts from UpdateWorkspace (moving a row onto another's key).
	a := sandboxapi.Workspace{ID: "ws-a", Key: "ka", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t1"}
	b := sandboxapi.Workspace{ID: "ws-b", Key: "kb", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t2"}
	require.NoError(t, s.CreateWorkspace(ctx, a))
	require.NoError(t, s.CreateWorkspace(ctx, b))
	b.TaskID = "t1"
	require.ErrorIs(t, s.UpdateWorkspace(ctx, b), sandboxapi.ErrConflict)
	b.TaskID, b.Key = "t2", "ka"
	require.ErrorIs(t, s.UpdateWorkspace(ctx, b), sandboxapi.ErrConflict)
	require.ErrorIs(t, s.UpdateWorkspace(ctx, sandboxapi.Workspace{ID: "ws-none", Key: "kn"}), sandboxapi.ErrWorkspaceNotFound)

	require.NoError(t, s.Close())
	_, err = s.GetWorkspace(ctx, "ws-a")
	require.Error(t, err)
	assert.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	assert.Contains(t, err.Error(), "the store is closed")
	assert.Contains(t, err.Error(), `workspace "ws-a"`)
}

func TestParseDSN(t *testing.T) {
	for _, dsn := range []string{"", "   ", "postgres://user:s3cret@host:notaport/db", "host=h port=notaport password=s3cret"} {
		_, err := ParseDSN(dsn)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "%q", dsn)
		assert.NotContains(t, err.Error(), "s3cret", "the error must not quote the password")
		_, err = Open(context.Background(), dsn)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "%q", dsn)
	}
	for _, dsn := range []string{
		"postgres://u:p@127.0.0.1:5432/db?sslmode=disable&pool_max_conns=3",
		"postgresql:///db?host=/var/run/postgresql",
		"host=127.0.0.1 port=5432 dbname=db user=u password=p sslmode=disable",
	} {
		cfg, err := ParseDSN(dsn)
		require.NoError(t, err, dsn)
		assert.Equal(t, "db", cfg.ConnConfig.Database, dsn)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there, so the connection is refused.
	_, err := Open(ctx, "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	assert.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	assert.Contains(t, err.Error(), "connection refused")
	for _, detail := range []string{"s3cret", "127.0.0.1", ":1", "user=", "database=", "u:"} {
		assert.NotContains(t, err.Error(), detail, "the error names no connection detail")
	}
}

// viaProxy returns dsn with its host and port replaced by the proxy's.
func viaProxy(t *testing.T, dsn string, p *storetest.TCPProxy) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err, "this test needs a URL-form %s", TestDatabaseURLEnv)
	u.Host = p.Addr()
	return u.String()
}

// TestOutageIsSandboxUnavailable: with the database cut away mid-session
// (a TCP proxy closed), a call is retried within Resilience.RetryFor and
// then fails with the retryable SandboxUnavailable, whose message names the
// operation and the kind of failure but no host, port, role or database;
// while the store is down calls fail at once instead of waiting again; a
// short outage inside RetryFor is ridden out; once the database is back, a
// probe finds it and calls succeed.
func TestOutageIsSandboxUnavailable(t *testing.T) {
	dsn := freshSchema(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := storetest.NewTCPProxy(t, u.Host)
	s := openT(t, viaProxy(t, dsn, proxy))
	s.SetResilience(store.Resilience{RetryFor: 1500 * time.Millisecond, AttemptTimeout: 2 * time.Second, ProbeEvery: 5 * time.Second})
	ctx := context.Background()
	ws := sandboxapi.Workspace{ID: "ws-a", Key: "ka", Mode: sandboxapi.ModeTask, UserID: "u", ProjectID: "p", TaskID: "t1"}
	require.NoError(t, s.CreateWorkspace(ctx, ws))

	proxy.Cut()
	start := time.Now()
	_, err = s.GetWorkspace(ctx, ws.ID)
	took := time.Since(start)
	require.Error(t, err)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	assert.True(t, sandboxapi.KindOf(err).Retryable)
	assert.Contains(t, err.Error(), `get workspace "ws-a"`)
	for _, detail := range []string{u.Hostname(), u.Port(), proxy.Addr(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "sct_", "user=", "database="} {
		assert.NotContains(t, err.Error(), detail, "no connection detail in %q", err)
	}
	assert.GreaterOrEqual(t, took, time.Second, "retried for about RetryFor first")
	assert.Less(t, took, 15*time.Second, "bounded")
	down, _ := s.Down()
	assert.True(t, down)

	start = time.Now()
	err = s.TouchWorkspace(ctx, ws.ID, time.Now())
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	assert.Less(t, time.Since(start), time.Second, "while down, calls fail at once (no probe due yet)")
	assert.Contains(t, err.Error(), "not attempted")

	// Back: the next probe (ProbeEvery) finds it.
	require.NoError(t, proxy.Restore())
	s.SetResilience(store.Resilience{RetryFor: 3 * time.Second, AttemptTimeout: 2 * time.Second, ProbeEvery: 100 * time.Millisecond})
	require.Eventually(t, func() bool { _, err := s.GetWorkspace(ctx, ws.ID); return err == nil }, 20*time.Second, 150*time.Millisecond)
	down, _ = s.Down()
	assert.False(t, down)

	// A cut shorter than RetryFor is ridden out by the retries.
	proxy.Cut()
	go func() { time.Sleep(400 * time.Millisecond); _ = proxy.Restore() }()
	got, err := s.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err, "a short outage is retried through")
	assert.Equal(t, ws.ID, got.ID)
}
