// Package tests holds sandboxcore's end-to-end tests and benchmarks: an
// embedded Temporal dev server, real worker hosts, real git (file:// and a
// smart-HTTP server with basic auth on loopback), the real SQLite store and the
// local runtime. It is the one test package that links the Temporal server.
package tests

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxcore/sandboxcore/internal/devserver"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// workerProcessEnv makes the test binary act as a sandbox-worker process
// (configured by the usual environment variables), so tests can SIGKILL a
// worker without killing the Temporal server that lives in the test process.
const workerProcessEnv = "SANDBOXCORE_TEST_WORKER"

var (
	temporalAddr string
	// daytonaFake is the Daytona stand-in TestMain starts when
	// SANDBOX_RUNTIME_PROVIDER=daytona and no DAYTONA_API_URL is given (make
	// test-e2e-daytona); nil otherwise.
	daytonaFake *fake.Server
	tc          client.Client
	creds       = &testCredentials{byHost: map[string]sandbox.Credential{}}
	quiet       = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
)

func TestMain(m *testing.M) {
	if os.Getenv(workerProcessEnv) == "1" {
		os.Exit(workerProcess())
	}
	// The runtimes' supervisor, as make build puts it next to the worker;
	// worker processes started by tests inherit the variable.
	sup, err := supervisortest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	os.Setenv("SANDBOX_SUPERVISOR_BINARY", sup)
	// The SDK's sticky cache is made by the first worker of the process,
	// this server's own: its size must be set before (the scale benchmark
	// compares sizes; docs/BENCHMARKS.md "Scale").
	if cfg, err := hostworker.ConfigFromEnv(func(k string) (string, bool) {
		if k == "SANDBOX_WORKFLOW_CACHE_SIZE" {
			return os.LookupEnv(k)
		}
		return "", false
	}); err == nil {
		worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	}
	dev, err := devserver.Start(devserver.Options{SearchAttributes: sandboxapi.SearchAttributeTypes})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
	temporalAddr = dev.Address
	// No gzip on the loopback connection, as the worker's own client to an
	// embedded server (temporalconn: it only costs CPU there).
	tc, err = client.Dial(client.Options{HostPort: dev.Address, Logger: sdklog.NewStructuredLogger(quiet),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	if err := hostworker.RegisterSearchAttributes(context.Background(), tc, "default"); err != nil {
		fmt.Fprintln(os.Stderr, "search attributes:", err)
		os.Exit(1)
	}
	if os.Getenv("SANDBOX_RUNTIME_PROVIDER") == "daytona" && os.Getenv("DAYTONA_API_URL") == "" {
		// The hosts' Daytona: the faithful stand-in, every sandbox a
		// container of the test image (make test-e2e-daytona).
		if daytonaFake, err = fake.New(fake.Options{Logger: quiet}); err == nil {
			_, err = daytonaFake.Start("127.0.0.1:0")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake Daytona:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	removeBenchRepos()
	if daytonaFake != nil {
		daytonaFake.Close()
		if v := daytonaFake.Violations(); len(v) > 0 {
			fmt.Fprintf(os.Stderr, "fake Daytona: %d requests or responses violated the OpenAPI documents:\n%s\n", len(v), strings.Join(v, "\n"))
			code = 1
		}
	}
	tc.Close()
	dev.Stop()
	os.Exit(code)
}

// workerProcess runs a host from the environment until SIGTERM (or SIGKILL).
func workerProcess() int {
	cfg, err := hostworker.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	h, err := hostworker.Start(ctx, cfg, hostworker.Options{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("worker ready")
	<-ctx.Done()
	h.Stop()
	return 0
}

// testCredentials serves credentials registered by tests, by repository host.
type testCredentials struct {
	mu     sync.Mutex
	byHost map[string]sandbox.Credential
}

func (c *testCredentials) set(host string, cred sandbox.Credential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byHost[host] = cred
}

func (c *testCredentials) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cred, ok := c.byHost[scope.Repo.Host]; ok {
		return &cred, nil
	}
	return nil, nil
}

// destroyLeftSandboxes ends the bubblewrap sandboxes that worker processes
// killed by a test left running under dataDir (they outlive a worker by
// design), best effort. Register it before starting the workers.
func destroyLeftSandboxes(t *testing.T, dataDir string) {
	t.Cleanup(func() {
		scratch := filepath.Join(dataDir, "runtimes", "bwrap")
		socks, _ := filepath.Glob(filepath.Join(scratch, ".ctl", "*.sock"))
		if len(socks) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := bwrap.New(ctx, bwrap.Options{ScratchDir: scratch, Supervisor: os.Getenv("SANDBOX_SUPERVISOR_BINARY"), NoCgroups: true})
		if err != nil {
			return
		}
		for _, s := range socks {
			_ = p.Destroy(ctx, strings.TrimSuffix(filepath.Base(s), ".sock"))
		}
	})
}

// testHost is one in-process worker host with its own task queue and data dir.
type testHost struct {
	*hostworker.Host
	client *sandboxclient.Client
}

type hostOption func(*hostworker.Config)

// withMetrics serves the host's Prometheus metrics on a free loopback port.
func withMetrics() hostOption {
	return func(c *hostworker.Config) { c.MetricsAddr = "127.0.0.1:0" }
}

func withIdle(stop, closeAfter time.Duration) hostOption {
	return func(c *hostworker.Config) { c.IdleStop, c.IdleClose = stop, closeAfter }
}

// startHost starts an in-process host named name (its host id and the suffix
// of its task queue), stopped at the end of the test.
func startHost(t testing.TB, name string, opts ...hostOption) *testHost {
	t.Helper()
	return startHostWith(t, name, hostworker.Options{}, opts...)
}

// startHostWith is startHost with extra hostworker.Options (its Credentials
// and Logger are always the tests' own, its Client the tests' own unless
// given).
func startHostWith(t testing.TB, name string, hopts hostworker.Options, opts ...hostOption) *testHost {
	t.Helper()
	cfg := baseConfig(t, name)
	for _, o := range opts {
		o(&cfg)
	}
	hopts.Credentials, hopts.Logger = creds, quiet
	if cfg.TemporalAddress != "" && hopts.Client == nil {
		hopts.Client = tc // else the host embeds its own server (embeddedServer)
	}
	h, err := hostworker.Start(context.Background(), cfg, hopts)
	if err != nil {
		t.Fatalf("start host: %v", err)
	}
	t.Cleanup(h.Stop)
	if k := h.Activities.Runtimes.Kind(); k == "docker" || k == "bwrap" || k == "daytona" {
		// Containers, bubblewrap sandboxes and remote sandboxes outlive a worker by design; a
		// test's must not outlive the test (runs before Stop: cleanups run
		// last in, first out).
		t.Cleanup(func() { destroyRuntimes(h) })
	}
	if want := os.Getenv("SANDBOX_RUNTIME_PROVIDER"); want != "" && want != "auto" && cfg.RuntimeProvider == want && h.Activities.Runtimes.Kind() != want {
		t.Fatalf("SANDBOX_RUNTIME_PROVIDER=%s but the host runs %s", want, h.Activities.Runtimes.Kind())
	}
	return &testHost{Host: h, client: sandboxclient.New(h.Client, sandboxclient.Options{TaskQueue: cfg.TaskQueue})}
}

// embeddedServer makes a host embed its own Temporal dev server as `make
// run` does (a SQLite file in its data dir, no Web UI) instead of using the
// tests' shared in-memory one.
func embeddedServer(t testing.TB) hostOption {
	return func(c *hostworker.Config) {
		port, err := devserver.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		c.TemporalAddress, c.TemporalPort, c.UIPort = "", port, 0
	}
}

// runtimeEnv are the variables that choose and configure a test host's
// runtime: taken from the test's environment (the make test-e2e-* targets set
// them), never defaulted by the tests.
var runtimeEnv = []string{"SANDBOX_RUNTIME_PROVIDER", "SANDBOX_RUNTIME_IMAGE", "DOCKER_HOST", "SANDBOX_SUPERVISOR_BINARY",
	"E2B_API_URL", "E2B_API_KEY", "E2B_API_KEY_FILE", "E2B_TEMPLATE", "E2B_SANDBOX_TIMEOUT", "E2B_MAX_INSTANCE_LENGTH"}

func baseConfig(t testing.TB, name string) hostworker.Config {
	cfg, err := hostworker.ConfigFromEnv(func(k string) (string, bool) {
		switch k {
		case "SANDBOX_DATA_DIR":
			return filepath.Join(t.TempDir(), "data"), true
		case "SANDBOX_HOST_ID":
			return name, true
		case "SANDBOX_TASK_QUEUE":
			return "q-" + name, true
		case "SANDBOX_ALLOW_FILE_URLS", "SANDBOX_ALLOW_HTTP_URLS", "SANDBOX_SESSION_ON_HOST_QUEUE":
			// Like `make run`: one host, session runs on the host's queue.
			return "1", true
		case "TEMPORAL_ADDRESS":
			return temporalAddr, true
		case "TEMPORAL_CONFIG_FILE":
			// Hermetic: not the machine's Temporal CLI profile (its TLS or
			// API key would apply to the test's plaintext server).
			return filepath.Join(t.TempDir(), "no-temporal.toml"), true
		case "PATH":
			// The worker's own PATH, as a real worker has it: the default
			// of SANDBOX_RUNTIME_PATH (Go in /usr/local/go/bin).
			return os.LookupEnv(k)
		case "SANDBOX_WORKFLOW_CACHE_SIZE":
			// The scale benchmark's runs compare sizes (docs/BENCHMARKS.md
			// "Scale"); the process's first host sets it for all.
			return os.LookupEnv(k)
		case "SANDBOX_EVICTION_INTERVAL":
			// Tests that need the eviction schedule create it themselves.
			return "0", true
		case "DAYTONA_API_URL", "DAYTONA_API_KEY":
			if daytonaFake != nil {
				if k == "DAYTONA_API_URL" {
					return daytonaFake.APIURL(), true
				}
				return daytonaFake.APIKey(), true
			}
			return os.LookupEnv(k)
		case "DAYTONA_API_KEY_FILE", "DAYTONA_SNAPSHOT", "DAYTONA_IMAGE", "DAYTONA_TARGET", "DAYTONA_AUTO_STOP_MINUTES", "DAYTONA_AUTO_ARCHIVE_MINUTES":
			if daytonaFake != nil {
				return "", false
			}
			return os.LookupEnv(k)
		}
		if slices.Contains(runtimeEnv, k) {
			// The runtime is the caller's choice (make test-e2e-docker,
			// make test-e2e-daytona and make test-e2e-e2b run the main job's
			// tests on Docker, Daytona and E2B); unset = auto, as make run.
			return os.LookupEnv(k)
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// uniq returns an id unique within this test binary run, safe as a sandbox id.
func uniq(t testing.TB, prefix string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("%s-%s-%d", prefix, strings.Trim(name, "-"), time.Now().UnixNano()%1_000_000_000)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// destroyRuntimes destroys the runtime of every workspace h's store holds
// for h (a missing one is success), best effort.
func destroyRuntimes(h *hostworker.Host) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wss, err := h.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{HostID: h.Config.HostID})
	if err != nil {
		return
	}
	for _, ws := range wss {
		_ = h.Activities.Runtimes.Destroy(ctx, sandboxapi.RuntimeIDFor(ws.ID))
	}
}
