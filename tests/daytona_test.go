package tests

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The Daytona end-to-end tests (make test-e2e-daytona): worker hosts with
// SANDBOX_RUNTIME_PROVIDER=daytona against the fake Daytona (README
// "Daytona"), each sandbox a container of the test image.

// daytonaServer is the fake the hosts of a test use: the one TestMain
// started (make test-e2e-daytona), else one of the test's own (skipped
// without Docker or the test image, except under CI=true).
func daytonaServer(t *testing.T) *fake.Server {
	t.Helper()
	if daytonaFake != nil {
		return daytonaFake
	}
	srv, err := fake.New(fake.Options{Logger: quiet})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fake Daytona: %v", err)
		}
		t.Skipf("fake Daytona unavailable: %v", err)
	}
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		require.Empty(t, srv.Violations(), "spec violations")
	})
	return srv
}

// withDaytona makes a host use srv (SANDBOX_RUNTIME_PROVIDER=daytona with
// DAYTONA_API_URL and DAYTONA_API_KEY, the defaults otherwise).
func withDaytona(srv *fake.Server) hostOption {
	return func(c *hostworker.Config) {
		c.RuntimeProvider = "daytona"
		c.Daytona = hostworker.DaytonaConfig{APIURL: srv.APIURL(), APIKey: srv.APIKey(),
			AutoStopMinutes: hostworker.DefaultDaytonaAutoStopMinutes, AutoArchiveMinutes: hostworker.DefaultDaytonaAutoArchiveMinutes}
	}
}

// sandboxOf is the name of a workspace's sandbox at the fake.
func sandboxOf(h *testHost, wsID string) string {
	return daytona.SandboxName(h.Config.HostID, sandboxapi.RuntimeIDFor(wsID))
}

func describe(t *testing.T, s *sandboxclient.Session) sandboxapi.SessionDescription {
	t.Helper()
	d, err := s.Describe(ctxFor(t, 30*time.Second))
	require.NoError(t, err)
	return d
}

// syncBuffer is a log sink safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDaytonaSandboxDeletedMidSessionComesBackWithTheWork: a sandbox deleted
// behind the service's back mid-session is created again on the next exec
// with the agent's uncommitted files (from the host worktree), and the
// handle and describe say so (runtime_replica); the API key appears in no
// log line (debug level), no workflow history, no argv and no environment
// inside the sandbox.
func TestDaytonaSandboxDeletedMidSessionComesBackWithTheWork(t *testing.T) {
	srv := daytonaServer(t)
	logs := &syncBuffer{}
	cfg := baseConfig(t, "dt-vanish")
	withDaytona(srv)(&cfg)
	hw, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: tc, Credentials: creds,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	h := &testHost{Host: hw, client: sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfg.TaskQueue})}
	t.Cleanup(hw.Stop)
	t.Cleanup(func() { destroyRuntimes(hw) })
	require.Equal(t, "daytona", h.Activities.Runtimes.Kind())

	s, hd, _ := newEditSession(t, h)
	assert.Equal(t, sandboxapi.RuntimeDaytona, hd.RuntimeKind)
	assert.Nil(t, hd.RuntimeReplica, "no runtime yet")
	ctx := ctxFor(t, 3*time.Minute)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "mkdir -p src && echo uncommitted > src/work.txt && echo more >> README.md"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	d := describe(t, s)
	require.NotNil(t, d.RuntimeReplica)
	assert.Equal(t, 0, d.RuntimeReplica.Recreated)
	assert.Nil(t, d.RuntimeReplica.LastRecreatedAt)
	assert.True(t, d.RuntimeReplica.Synced)
	assert.Equal(t, 3, d.RuntimeReplica.Files, "README.md, main.go and src/work.txt")
	b, err := os.ReadFile(filepath.Join(hd.LocalPath, "src", "work.txt"))
	require.NoError(t, err)
	require.Equal(t, "uncommitted\n", string(b), "the command's change is on the host")

	before := time.Now().UTC()
	require.True(t, srv.DeleteOutOfBand(sandboxOf(h, hd.WorkspaceID)))
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "cat src/work.txt README.md; git status --porcelain"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Equal(t, "uncommitted\nhello\nmore\n M README.md\n?? src/\n", string(res.Stdout))
	d = describe(t, s)
	require.NotNil(t, d.RuntimeReplica)
	assert.Equal(t, 1, d.RuntimeReplica.Recreated, "describe says the sandbox was recreated")
	require.NotNil(t, d.RuntimeReplica.LastRecreatedAt)
	assert.False(t, d.RuntimeReplica.LastRecreatedAt.Before(before.Add(-time.Second)))
	assert.True(t, d.RuntimeReplica.Synced)
	_, hd2, err := h.client.Acquire(ctx, editRequest(hd.UserID, hd.ProjectID, "c", hd.Repo.URL))
	require.NoError(t, err)
	require.NotNil(t, hd2.RuntimeReplica, "the handle says so too")
	assert.Equal(t, 1, hd2.RuntimeReplica.Recreated)

	// The key: nowhere in the sandbox's processes or environment, the
	// worker's log or the session's history.
	key := srv.APIKey()
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "env; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null"}})
	require.NoError(t, err)
	require.Greater(t, len(res.Stdout), 100)
	assert.NotContains(t, string(res.Stdout), key)
	for k, v := range srv.SandboxEnv(sandboxOf(h, hd.WorkspaceID)) {
		assert.NotContains(t, k+"="+v, key)
	}
	require.Contains(t, logs.String(), "daytona", "the log was captured")
	assert.NotContains(t, logs.String(), key)
	iter := tc.GetWorkflowHistory(ctx, hd.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		data, err := protojson.Marshal(ev)
		require.NoError(t, err)
		assert.NotContains(t, string(data), key)
		events++
	}
	assert.Greater(t, events, 10)
}

// TestDaytonaIdleCloseDeletesTheSandbox: after SANDBOX_IDLE_STOP the
// session hibernates the runtime (the sandbox is stopped after a sync) and
// after SANDBOX_IDLE_CLOSE it destroys it, through the destroy-runtime path:
// the stopped remote sandbox is deleted (a replica holds nothing the host
// lacks), the workspace stays, and the next exec creates a new sandbox with
// every file (a deliberate destroy, so nothing counts as recreated).
func TestDaytonaIdleCloseDeletesTheSandbox(t *testing.T) {
	srv := daytonaServer(t)
	h := startHost(t, "dt-idle", withDaytona(srv), withIdle(time.Second, 3*time.Second))
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo kept > kept.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	name := sandboxOf(h, hd.WorkspaceID)
	st, _ := srv.SandboxState(name)
	require.Equal(t, "started", st)

	require.Eventually(t, func() bool { st, _ := srv.SandboxState(name); return st == "stopped" }, time.Minute, 50*time.Millisecond,
		"SANDBOX_IDLE_STOP stops the sandbox")
	waitClosed(t, hd.WorkflowID, time.Minute)
	require.Eventually(t, func() bool { st, _ := srv.SandboxState(name); return st == "" }, 30*time.Second, 50*time.Millisecond,
		"SANDBOX_IDLE_CLOSE deletes the stopped sandbox")
	assert.Nil(t, describe(t, s).RuntimeReplica, "no runtime, no replica")
	b, err := os.ReadFile(filepath.Join(hd.LocalPath, "kept.txt"))
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(b))

	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "kept.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(res.Stdout))
	st, _ = srv.SandboxState(name)
	assert.Equal(t, "started", st, "a new sandbox")
	d := describe(t, s)
	require.NotNil(t, d.RuntimeReplica)
	assert.Equal(t, 0, d.RuntimeReplica.Recreated, "destroyed on purpose: not a vanished sandbox")
}

// TestDaytonaOrphanRuntimesAreCollected: a sandbox whose workspace no longer
// exists is listed by `sandboxctl runtimes gc --dry-run` (and deleted by
// nothing then), deleted by the eviction run; other sandboxes stay.
func TestDaytonaOrphanRuntimesAreCollected(t *testing.T) {
	srv := daytonaServer(t)
	bin := buildCLI(t)
	h := startHost(t, "dt-orphans", withDaytona(srv))
	ctx := ctxFor(t, 3*time.Minute)
	sA, hA, _ := newEditSession(t, h)
	upstream := hA.Repo.URL
	sB, hB, err := h.client.Acquire(ctx, editRequest(hA.UserID, "p", "other", upstream))
	require.NoError(t, err)
	for _, s := range []*sandboxclient.Session{sA, sB} {
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode)
	}
	nameA, nameB := sandboxOf(h, hA.WorkspaceID), sandboxOf(h, hB.WorkspaceID)
	require.NoError(t, h.Store.DeleteWorkspace(ctx, hA.WorkspaceID), "workspace A no longer exists")

	r := runCLI(t, bin, h.Config.TaskQueue, "", "runtimes", "gc", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, sandboxapi.RuntimeIDFor(hA.WorkspaceID))
	assert.Contains(t, r.stdout, hA.WorkspaceID)
	assert.NotContains(t, r.stdout, sandboxapi.RuntimeIDFor(hB.WorkspaceID))
	assert.Contains(t, r.stdout, "1 orphan runtimes (dry run: nothing deleted)")
	st, _ := srv.SandboxState(nameA)
	assert.Equal(t, "started", st, "a dry run deletes nothing")

	res, err := h.client.RunEviction(ctx, sandboxapi.EvictionInput{})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Summary.OrphansDeleted, "%+v", res.Hosts)
	require.Eventually(t, func() bool { st, _ := srv.SandboxState(nameA); return st == "" }, 30*time.Second, 50*time.Millisecond)
	st, _ = srv.SandboxState(nameB)
	assert.Equal(t, "started", st, "a sandbox whose workspace exists stays")

	r = runCLI(t, bin, h.Config.TaskQueue, "", "runtimes", "gc", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no orphan runtimes")
}

// TestDaytonaPreviewURL: preview_url returns Daytona's signed preview URL of
// the port (the token inside the URL, an expiry one hour ahead); a bad port
// is refused by the update's validator, a workspace without a runtime gets
// SandboxNotFound.
func TestDaytonaPreviewURL(t *testing.T) {
	srv := daytonaServer(t)
	h := startHost(t, "dt-preview", withDaytona(srv))
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	_, err := s.PreviewURL(ctx, 8080)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "no runtime yet")
	_, err = s.PreviewURL(ctx, 70000)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	var se *sandboxapi.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "port", se.Field, "details.field")

	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	u, err := s.PreviewURL(ctx, 8080)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(u.URL, "http://8080-"), u.URL)
	assert.Contains(t, u.URL, ".preview.")
	assert.Empty(t, u.Token, "signed: the token is in the URL")
	require.NotNil(t, u.ExpiresAt)
	assert.WithinDuration(t, time.Now().Add(daytona.PreviewExpiry), *u.ExpiresAt, time.Minute)
}
