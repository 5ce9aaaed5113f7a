package activities

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxcore/sandboxcore/internal/credentials"
	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/repocache"
	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/internal/workspace"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// testHost is one worker host's activities wired to real parts, as
// internal/hostworker wires them: a SQLite store, the repo cache and
// worktrees under a temporary data dir driven by real git, and the local
// runtime (with the real sandbox-supervisor), and the worktree backups
// (eviction, checkpoints) under the data dir. The activities run in the
// Temporal SDK's TestActivityEnvironment: no Temporal server is linked.
type testHost struct {
	t       *testing.T
	acts    *Activities
	env     *testsuite.TestActivityEnvironment
	store   *sqlite.Store
	dataDir string
	// upstream is a repository (branch main) served by file:// URL.
	upstream string
}

const testHostID = "host-a"

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := sqlite.Open(ctx, filepath.Join(data, "sandbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	git, err := gitx.New(gitx.Options{AllowFile: true, HomeDir: filepath.Join(data, "git-home"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	repos, err := repocache.New(repocache.Options{Root: data, Git: git, HostID: testHostID, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sup := os.Getenv("SANDBOX_SUPERVISOR_BINARY")
	if sup == "" {
		sup = supervisortest.Binary(t)
	}
	rts := local.New(local.Options{Logger: log, Supervisor: sup, StateDir: filepath.Join(data, "runtimes", "local")})
	wss, err := workspace.New(workspace.Options{Git: git, Locker: repos, HostID: testHostID, Logger: log, Isolated: rts.Capabilities().Isolated})
	if err != nil {
		t.Fatal(err)
	}
	backups, err := workspace.NewBackups(wss, filepath.Join(data, "evicted"))
	if err != nil {
		t.Fatal(err)
	}
	acts := &Activities{Backups: backups,
		Store: st, Repos: repos, Workspaces: wss, Runtimes: rts, Credentials: credentials.Static{},
		Outputs: execoutput.New(filepath.Join(data, "outputs")),
		HostID:  testHostID, URLs: sandboxapi.URLPolicy{AllowFile: true},
		Settings: wire.SessionSettings{RuntimeKind: rts.Kind()}, RuntimeNetwork: sandboxapi.NetworkNone,
		Logger: log,
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	// As the worker runs them: errors translated once, on the way out.
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{ErrorTranslation(log)}})
	Register(env, acts)
	h := &testHost{t: t, acts: acts, env: env, store: st, dataDir: data, upstream: gittest.NewRepo(t, "main")}
	t.Cleanup(func() {
		// Stop every runtime this host started (their supervisors).
		ids, _ := rts.List(context.Background(), nil)
		for _, r := range ids {
			_ = rts.Destroy(context.Background(), r.ID)
		}
	})
	return h
}

// run executes the activity registered under name with in, decoding its
// result into out (when not nil).
func (h *testHost) run(name string, in, out any) error {
	h.t.Helper()
	val, err := h.env.ExecuteActivity(name, in)
	if err != nil {
		return err
	}
	if out != nil {
		if err := val.Get(out); err != nil {
			h.t.Fatalf("%s: decoding the result: %v", name, err)
		}
	}
	return nil
}

// request is an edit-mode request on h.upstream for conversation conv.
func (h *testHost) request(mode sandboxapi.WorkspaceMode, conv string) sandboxapi.WorkspaceRequest {
	req := sandboxapi.WorkspaceRequest{UserID: "alice", ProjectID: "p1", RepoURL: gittest.FileURL(h.upstream), Mode: mode}
	switch mode {
	case sandboxapi.ModeEdit:
		req.ConversationID = conv
	case sandboxapi.ModeTask:
		req.TaskID = conv
	}
	return req
}

// acquire runs the acquire activity for req and fails the test on error.
func (h *testHost) acquire(req sandboxapi.WorkspaceRequest) wire.AcquireActivityResult {
	h.t.Helper()
	var res wire.AcquireActivityResult
	if err := h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey(req.Key()), Request: &req}, &res); err != nil {
		h.t.Fatalf("acquire: %v", err)
	}
	return res
}

// wantAppError asserts that err is a Temporal application error of the
// sandbox error kind want (its stable type string), whose retryable flag is
// the kind's, and returns it.
func wantAppError(t *testing.T, err error, want *sandboxapi.Kind) *temporal.ApplicationError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s", want.Type)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("error %v (%T) is not an application error; want %s", err, err, want.Type)
	}
	if app.Type() != want.Type {
		t.Fatalf("error type %q (%v); want %q", app.Type(), err, want.Type)
	}
	if app.NonRetryable() == want.Retryable {
		t.Fatalf("error %s: NonRetryable = %v, but the kind's Retryable is %v", want.Type, app.NonRetryable(), want.Retryable)
	}
	var d sandboxapi.ErrorDetails
	if !app.HasDetails() || app.Details(&d) != nil {
		t.Fatalf("error %s carries no ErrorDetails", want.Type)
	}
	if wd := want.Details(); d.Family != wd.Family || d.Kind != wd.Kind || d.SubKind != wd.SubKind || d.Retryable != want.Retryable {
		t.Fatalf("error details %+v; want %+v", d, wd)
	}
	return app
}
