package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// syncLog collects a host's log (Info and up) for the network tests.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// netServer is an HTTP server on the host's loopback answering "<word> <path>".
type netServer struct {
	port  string
	word  string
	conns atomic.Int32
}

func newNetServer(t *testing.T, word string) *netServer {
	t.Helper()
	s := &netServer{word: word}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%s %s\n", s.word, r.URL.Path) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	return s
}

func (s *netServer) addr() string { return "127.0.0.1:" + s.port }

// proxyGet is a bash script: GET http://$1/$2 through $HTTP_PROXY (bash's
// /dev/tcp: the Docker test image has no curl), printing the answer.
const proxyGet = `p=${HTTP_PROXY#http://}; [ -n "$HTTP_PROXY" ] || { echo "no HTTP_PROXY"; exit 91; }
exec 3<>"/dev/tcp/${p%:*}/${p##*:}" || exit 90
printf 'GET http://%s/%s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$2" "$1" >&3
timeout 20 cat <&3`

// directConnect is a bash script: a TCP connection to $1:$2 around any proxy.
const directConnect = `if timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe "$1" "$2" 2>/dev/null; then echo CONNECTED; else echo FAILED; fi`

// startNetworkHost starts a host whose egress proxy resolves *.e2etest
// names to loopback, with the worker's allow-list allow; its Info log goes
// to the returned buffer.
func startNetworkHost(t *testing.T, name string, allow []string, opts ...hostOption) (*testHost, *syncLog) {
	t.Helper()
	cfg := baseConfig(t, name)
	cfg.NetworkAllow = allow
	for _, o := range opts {
		o(&cfg)
	}
	logs := &syncLog{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: tc, Credentials: creds, Logger: log,
		EgressLookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".e2etest") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}})
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	t.Cleanup(func() { destroyRuntimes(h) })
	return &testHost{Host: h, client: sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfg.TaskQueue})}, logs
}

// TestNetworkPolicyThroughTheSession: a workspace acquired with the limited
// network and an allow entry of its own reaches exactly the worker's and its
// own entries through the egress proxy (by address and by name), gets the
// policy's 403 elsewhere (logged with its id and the destination), has
// nothing around the proxy; a command may narrow the network (none) and
// never widen it; an acquire above SANDBOX_NETWORK_MAX is refused naming
// it; the policy is stored (describe) and replaced by an acquire that
// names another. On the host's runtime (bubblewrap, or Docker under make
// test-e2e-docker), and on Docker in TestNetworkPolicyOnDocker.
func TestNetworkPolicyThroughTheSession(t *testing.T) {
	testNetworkPolicy(t, "netpol")
}

// TestNetworkPolicyOnDocker runs the same on the Docker runtime.
func TestNetworkPolicyOnDocker(t *testing.T) {
	img := os.Getenv("SANDBOX_RUNTIME_IMAGE")
	if img == "" {
		img = "sandboxcore-test:latest"
	}
	if p, err := docker.New(ctxFor(t, time.Minute), docker.Options{Image: img, Supervisor: os.Getenv("SANDBOX_SUPERVISOR_BINARY")}); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker runtime unavailable: %v", err)
		}
		t.Skipf("docker runtime unavailable: %v", err)
	} else {
		_ = p.Close()
	}
	testNetworkPolicy(t, "netpoldocker", func(c *hostworker.Config) { c.RuntimeProvider, c.RuntimeImage = "docker", img })
}

func testNetworkPolicy(t *testing.T, name string, opts ...hostOption) {
	wkr := newNetServer(t, "worker-entry")
	own := newNetServer(t, "workspace-entry")
	denied := newNetServer(t, "not-allowed")
	// The worker's list: wkr by address, and own's address (the workspace
	// names own; the name resolves to loopback, which only the worker's
	// list can open).
	h, logs := startNetworkHost(t, name, []string{wkr.addr(), own.addr()}, opts...)
	ctx := ctxFor(t, 5*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	req := editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream))

	// Above the worker's maximum (limited by default): refused, naming it.
	over := req
	over.ConversationID, over.Network = "over", sandboxapi.NetworkDefault
	_, _, err := h.client.Acquire(ctx, over)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	require.Contains(t, err.Error(), "SANDBOX_NETWORK_MAX=limited")

	// A workspace's own entry cannot open the worker's host (its loopback,
	// its addresses, a catch-all): refused, naming the entry.
	req.Network = sandboxapi.NetworkLimited
	for _, entry := range []string{denied.addr(), "0.0.0.0/0"} {
		hostile := req
		hostile.ConversationID, hostile.NetworkAllow = "hostile", []string{"registry.e2etest", entry}
		_, _, err = h.client.Acquire(ctx, hostile)
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, entry)
		require.Contains(t, err.Error(), "network_allow[1]", entry)
	}

	req.NetworkAllow = []string{"Registry.E2ETEST:" + own.port, "registry.e2etest:" + own.port, own.addr()}
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkLimited, hd.Network)
	require.Equal(t, []string{"registry.e2etest:" + own.port, own.addr()}, hd.NetworkAllow, "canonical, each once (the worker's own entry may be repeated)")
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkLimited, d.Workspace.Network)
	require.Equal(t, hd.NetworkAllow, d.Workspace.NetworkAllow)

	run := func(network sandboxapi.Network, script string, args ...string) string {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: append([]string{"bash", "-c", script, "probe"}, args...), Network: network, TimeoutS: 60})
		require.NoError(t, err)
		return string(res.Stdout) + string(res.Stderr)
	}
	// The worker's entry (an address and port), and the workspace's own by name.
	out := run("", proxyGet, wkr.addr(), "w")
	assert.Contains(t, out, "200 OK")
	assert.Contains(t, out, "worker-entry /w")
	out = run(sandboxapi.NetworkLimited, proxyGet, "registry.e2etest:"+own.port, "npm/pkg")
	assert.Contains(t, out, "workspace-entry /npm/pkg", out)
	// Anything else: the policy's answer, logged with the workspace and the destination only.
	out = run("", proxyGet, denied.addr(), "secret/path")
	assert.Contains(t, out, "403 Forbidden")
	assert.Contains(t, out, "denied by the network policy of workspace "+hd.WorkspaceID+": "+denied.addr()+" is not in the allow-list")
	// The exec's stderr names the refusal (the agent's tool may print
	// only its status), through the session as through the runtime.
	assert.Contains(t, out, "sandbox: network policy refused GET "+denied.addr()+": "+denied.addr()+" is not in the allow-list", out)
	assert.Zero(t, denied.conns.Load())
	assert.Contains(t, logs.String(), "egress denied")
	assert.Contains(t, logs.String(), "workspace="+hd.WorkspaceID)
	assert.Contains(t, logs.String(), "destination="+denied.addr())
	assert.NotContains(t, logs.String(), "secret/path")
	// Nothing around the proxy, and no metadata address.
	before := wkr.conns.Load()
	for _, network := range []sandboxapi.Network{sandboxapi.NetworkLimited, sandboxapi.NetworkNone} {
		assert.Contains(t, run(network, directConnect, "127.0.0.1", wkr.port), "FAILED", network)
		assert.Contains(t, run(network, directConnect, "169.254.169.254", "80"), "FAILED", network)
	}
	out = run("", proxyGet, "169.254.169.254", "latest/meta-data/")
	assert.Contains(t, out, "169.254.169.254 is a cloud metadata address, which is never reachable")
	assert.Equal(t, before, wkr.conns.Load())

	// A command may narrow the network: none has no proxy at all.
	assert.Contains(t, run(sandboxapi.NetworkNone, proxyGet, wkr.addr(), "x"), "no HTTP_PROXY")
	// ... never widen it: refused before anything runs, naming the policy.
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkDefault})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	require.Contains(t, err.Error(), "above the network policy of workspace "+hd.WorkspaceID+" (limited)")
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: "open"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	// Background processes take the same network rules.
	if caps := h.Activities.Runtimes.Capabilities(); caps.PerCommandNetwork {
		proc, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: []string{"bash", "-c", proxyGet, "probe", wkr.addr(), "p"}, Network: sandboxapi.NetworkNone})
		require.NoError(t, err)
		var got strings.Builder
		for off, deadline := int64(0), time.Now().Add(30*time.Second); time.Now().Before(deadline); {
			r, err := s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: proc.ProcessID, Offset: off, WaitMS: 1000})
			require.NoError(t, err)
			got.Write(r.Data)
			if off = r.NextOffset; r.EOF {
				break
			}
		}
		assert.Contains(t, got.String(), "no HTTP_PROXY", "a process started with network none")
	}
	_, err = s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: []string{"true"}, Network: sandboxapi.NetworkDefault})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)

	// Above the maximum on an existing workspace: refused, the policy unchanged.
	again := req
	again.Network = sandboxapi.NetworkDefault
	_, _, err = h.client.Acquire(ctx, again)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	d, err = s.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkLimited, d.Workspace.Network)

	// An acquire that names another policy replaces it: none, no entries.
	again.Network, again.NetworkAllow = sandboxapi.NetworkNone, nil
	_, hd2, err := h.client.Acquire(ctx, again)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkNone, hd2.Network)
	require.Empty(t, hd2.NetworkAllow)
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkLimited})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	assert.Contains(t, run("", directConnect, "127.0.0.1", "3128"), "FAILED", "no egress forwarder under none")
	// An acquire that names nothing keeps it.
	_, hd3, err := h.client.Acquire(ctx, editRequest(req.UserID, req.ProjectID, req.ConversationID, req.RepoURL))
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkNone, hd3.Network)

	// Every run replays against the workflow code (the acquire that
	// changed the policy of an active session is behind a GetVersion);
	// SANDBOXCORE_UPDATE_HISTORIES=1 records them for workflows' replay test.
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hd.WorkflowID, 30*time.Second)
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	for i, runID := range runIDs(t, hd.WorkflowID) {
		hist := history(t, hd.WorkflowID, runID)
		require.NoError(t, replayed(replayer, hist), "run %s", runID)
		if os.Getenv(updateHistoriesEnv) == "1" && name == "netpol" {
			data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join("..", "workflows", "testdata", "histories", fmt.Sprintf("session-network-%d.json", i+1)), data, 0o644))
		}
	}
}

// TestNetworkCLI: sandboxctl acquire --network/--network-allow, describe
// and exec --network.
func TestNetworkCLI(t *testing.T) {
	bin := buildCLI(t)
	own := newNetServer(t, "cli-entry")
	h, _ := startNetworkHost(t, "netcli", []string{own.addr()}) // the name resolves to loopback: only the worker's list opens it
	queue := h.Config.TaskQueue
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	user := uniq(t, "u")
	r := runCLI(t, bin, queue, "", "acquire", "--repo", gittest.FileURL(upstream), "--user", user, "--project", "p", "--conversation", "c",
		"--network", "limited", "--network-allow", "cli.e2etest:"+own.port, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var hd sandboxapi.Handle
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &hd))
	require.Equal(t, sandboxapi.NetworkLimited, hd.Network)
	require.Equal(t, []string{"cli.e2etest:" + own.port}, hd.NetworkAllow)

	r = runCLI(t, bin, queue, "", "describe", hd.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^network\s+limited$`, r.stdout)
	assert.Regexp(t, `(?m)^network_allow\s+cli\.e2etest:`+own.port+`$`, r.stdout)

	r = runCLI(t, bin, queue, "", "exec", hd.WorkspaceID, "--network", "limited", "--", "bash", "-c", proxyGet, "probe", "cli.e2etest:"+own.port, "cli")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "cli-entry /cli")
	r = runCLI(t, bin, queue, "", "exec", hd.WorkspaceID, "--network", "none", "--", "bash", "-c", proxyGet, "probe", "cli.e2etest:"+own.port, "cli")
	assert.Equal(t, 91, r.code, "no proxy under none: %s", r.stdout)
	r = runCLI(t, bin, queue, "", "exec", hd.WorkspaceID, "--network", "default", "--", "true")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "SandboxCommandRejected")
	assert.Contains(t, r.stderr, "network policy")

	r = runCLI(t, bin, queue, "", "acquire", "--repo", gittest.FileURL(upstream), "--user", user, "--project", "p", "--conversation", "c2",
		"--network-allow", "http://bad/")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "network_allow[0]")
}
