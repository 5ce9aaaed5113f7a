package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Egress is an egress proxy for the network suite (RunNetwork): the real
// proxy (internal/egress), whose resolver knows only the names a test gives
// it (SetHost) and never asks a real DNS server, and whose connections to
// the addresses of a TestNet are made inside that network namespace.
type Egress struct {
	Proxy *egress.Proxy
	Log   *SyncBuffer
	hosts sync.Map // name → []netip.Addr
	net   atomic.Pointer[TestNet]
}

// NewEgress returns a test egress proxy; its log (Info and up) is kept in Log.
func NewEgress(t testing.TB) *Egress {
	e := &Egress{Log: &SyncBuffer{}}
	e.Proxy = egress.New(egress.Options{
		Logger: slog.New(slog.NewTextHandler(e.Log, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			if v, ok := e.hosts.Load(host); ok {
				return v.([]netip.Addr), nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			if n := e.net.Load(); n != nil && n.Has(ap.Addr()) {
				return n.Dial(ctx, ap)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ap.String())
		},
	})
	t.Cleanup(e.Proxy.Close)
	return e
}

// SetHost makes the proxy resolve name to addrs.
func (e *Egress) SetHost(name string, addrs ...netip.Addr) { e.hosts.Store(name, addrs) }

// Route sends the proxy's connections to n's addresses into n.
func (e *Egress) Route(n *TestNet) { e.net.Store(n) }

// SyncBuffer is a bytes buffer safe for concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p (io.Writer); it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNet is a network namespace of the test's own (`ip netns add`) with
// addresses that look like the outside world: PublicAddr (198.51.100.2, a
// documentation address the proxy treats as public) and the cloud metadata
// address 169.254.169.254, each with an HTTP server on port 80 answering
// "<greeting> <Host>". Nothing on the host's own network changes: the
// namespace has no link to it, and only the test proxy's dialer (and Get)
// enter it.
type TestNet struct {
	name  string
	fd    int
	addrs []netip.Addr
	// Greeting starts every answer of its servers.
	Greeting string
	hits     atomic.Int32
}

// Test network addresses.
var (
	PublicAddr   = netip.MustParseAddr("198.51.100.2")
	MetadataAddr = netip.MustParseAddr("169.254.169.254")
)

// NewTestNet creates the namespace and its servers, and removes them at
// the end of the test. It needs root and iproute2: it skips without them,
// and fails under CI=true.
func NewTestNet(t *testing.T) *TestNet {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "a test network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		unavailable(t, "a test network namespace needs ip (iproute2)")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := &TestNet{name: "sbxt-" + hex.EncodeToString(b[:]), addrs: []netip.Addr{PublicAddr, MetadataAddr}, Greeting: "testnet-" + hex.EncodeToString(b[:])}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	run("netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	run("-n", n.name, "link", "set", "lo", "up")
	for _, a := range n.addrs {
		run("-n", n.name, "addr", "add", a.String()+"/32", "dev", "lo")
	}
	fd, err := unix.Open("/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	n.fd = fd
	t.Cleanup(func() { _ = unix.Close(fd) })
	for _, a := range n.addrs {
		var ln net.Listener
		require.NoError(t, n.in(func() error {
			var err error
			ln, err = net.Listen("tcp", netip.AddrPortFrom(a, 80).String())
			return err
		}))
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.hits.Add(1)
			fmt.Fprintf(w, "%s %s\n", n.Greeting, r.Host)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return n
}

// Has reports whether a is one of the namespace's addresses.
func (n *TestNet) Has(a netip.Addr) bool {
	for _, x := range n.addrs {
		if x == a.Unmap() {
			return true
		}
	}
	return false
}

// Hits counts the requests its servers answered.
func (n *TestNet) Hits() int { return int(n.hits.Load()) }

// in runs fn on a thread inside the namespace (sockets it creates stay there).
func (n *TestNet) in(fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(orig)
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and dies with its goroutine: never reused
		// in the wrong namespace.
		return err
	}
	runtime.UnlockOSThread()
	return ferr
}

// Dial connects to ap from inside the namespace.
func (n *TestNet) Dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := n.in(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", ap.String())
		return err
	})
	return c, err
}

// Get fetches http://a/ from inside the namespace: the control showing that
// a server answers there.
func (n *TestNet) Get(t *testing.T, a netip.Addr) string {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return n.Dial(ctx, netip.MustParseAddrPort(addr))
		},
	}}
	resp, err := cl.Get("http://" + a.String() + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = fmt.Fprint(&sb, resp.StatusCode, " ")
	buf := make([]byte, 4096)
	k, _ := resp.Body.Read(buf)
	sb.Write(buf[:k])
	return sb.String()
}

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: nothing may skip)", args...)
	}
	t.Skipf(format, args...)
}

// NetworkOptions configure RunNetwork.
type NetworkOptions struct {
	// Egress is the proxy the factory's providers were given.
	Egress *Egress
}

// Probe scripts (bash, whose /dev/tcp every image of the suite has). The
// proxy's address is taken from HTTP_PROXY, as ordinary tools take it.
const (
	// proxyGetScript: GET http://$1/$2 through $HTTP_PROXY; prints the answer.
	proxyGetScript = `p=${HTTP_PROXY#http://}; [ -n "$HTTP_PROXY" ] || { echo "no HTTP_PROXY"; exit 91; }
exec 3<>"/dev/tcp/${p%:*}/${p##*:}" || exit 90
printf 'GET http://%s/%s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$2" "$1" >&3
timeout 20 cat <&3`
	// connectScript: CONNECT $1 through $HTTP_PROXY, then GET / through the tunnel.
	connectScript = `p=${HTTP_PROXY#http://}; [ -n "$HTTP_PROXY" ] || { echo "no HTTP_PROXY"; exit 91; }
exec 3<>"/dev/tcp/${p%:*}/${p##*:}" || exit 90
printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$1" "$1" >&3
IFS= read -r status <&3; echo "$status"
case "$status" in *" 200 "*) ;; *) timeout 20 cat <&3; exit 0;; esac
while IFS= read -r line <&3; do [ "$line" = $'\r' ] && break; done
printf 'GET /tunnel HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3
timeout 20 cat <&3`
	// directScript: a TCP connection to $1:$2, bypassing any proxy.
	directScript = `if timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe "$1" "$2" 2>/dev/null; then echo CONNECTED; exit 0; fi; echo FAILED; exit 1`
	// loopbackScript: the sandbox's own loopback works: a listener (git
	// daemon) started in the command, reached by the command.
	loopbackScript = `git daemon --listen=127.0.0.1 --port=19418 --base-path=/tmp --reuseaddr >/dev/null 2>&1 &
for i in $(seq 1 50); do if bash -c 'exec 3<>/dev/tcp/127.0.0.1/19418' 2>/dev/null; then echo OWN-LOOPBACK; kill %1; exit 0; fi; sleep 0.1; done
kill %1; echo NO-LOOPBACK; exit 1`
)

// loopbackServer is an HTTP server on the host's loopback counting requests.
type loopbackServer struct {
	port  string
	hits  atomic.Int32
	conns atomic.Int32
	word  string
}

func newLoopbackServer(t *testing.T, word string) *loopbackServer {
	t.Helper()
	s := &loopbackServer{word: word}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.hits.Add(1)
			fmt.Fprintf(w, "%s %s\n", s.word, r.URL.Path)
		})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	return s
}

func (s *loopbackServer) addr() string { return "127.0.0.1:" + s.port }

// RunNetwork runs the network-policy suite (docs/SECURITY.md "Network
// modes") against a provider that reports Isolated and PerCommandNetwork and
// was given opts.Egress: the limited network reaches exactly its allow-list
// through the proxy (by address and by name), a refused destination gets
// the policy's 403, nothing is reached around the proxy (the host's
// loopback, the host's own addresses, 169.254.169.254 — served in a test
// namespace to show it is the policy that refuses it), none reaches only
// its own loopback, each command runs in the network it asks for, and a
// command above the runtime's network is refused. The bash of the runtime
// (with /dev/tcp), timeout and git are needed.
func RunNetwork(t *testing.T, f Factory, opts NetworkOptions) {
	n := newNetSuite(t, f, opts)
	t.Run("ProxyEnvironment", n.proxyEnvironment)
	t.Run("AllowedByAddress", n.allowedByAddress)
	t.Run("AllowedByName", n.allowedByName)
	t.Run("OrdinaryTools", n.ordinaryTools)
	t.Run("RefusedByPolicy", n.refusedByPolicy)
	t.Run("NothingAroundTheProxy", n.nothingAroundTheProxy)
	t.Run("NoneReachesOnlyItsLoopback", n.noneReachesOnlyItsLoopback)
	t.Run("CommandAboveThePolicyIsRefused", n.commandAboveThePolicyIsRefused)
	t.Run("BackgroundProcessesKeepTheirNetwork", n.backgroundProcessesKeepTheirNetwork)
	t.Run("NarrowedSpecEndsWiderSandboxes", n.narrowedSpecEndsWiderSandboxes)
	t.Run("DefaultReachesOnlyPublicDestinations", n.defaultReachesOnlyPublic)
}

// netSuite is RunNetwork's state: a runtime of the limited network whose
// allow-list names allowed, pkg.sbxtest:80, named (by name and address) and
// the metadata address; other is a loopback server it does not allow, tn
// the test network the egress proxy routes to. Each method is one subtest.
type netSuite struct {
	ctx                   context.Context
	env                   Env
	rt                    sandbox.Runtime
	egress                *Egress
	tn                    *TestNet
	allowed, other, named *loopbackServer
	limited               func(*sandbox.RuntimeSpec)
	f                     Factory
}

// newNetSuite creates the runtime and the servers of RunNetwork.
func newNetSuite(t *testing.T, f Factory, opts NetworkOptions) *netSuite {
	require.NotNil(t, opts.Egress, "RunNetwork needs the providers' egress proxy")
	s := &suite{f: f}
	env := s.newEnv(t)
	caps := env.Provider.Capabilities()
	require.True(t, caps.Isolated && caps.PerCommandNetwork, "RunNetwork is for isolated runtimes with a network per command")

	allowed := newLoopbackServer(t, "allowed-"+hex.EncodeToString([]byte(t.Name()))[:8])
	other := newLoopbackServer(t, "other")
	named := newLoopbackServer(t, "named")
	tn := NewTestNet(t)
	opts.Egress.Route(tn)
	opts.Egress.SetHost("pkg.sbxtest", PublicAddr)
	opts.Egress.SetHost("loop.sbxtest", netip.MustParseAddr("127.0.0.1"))
	opts.Egress.SetHost("meta.sbxtest", MetadataAddr)
	opts.Egress.SetHost("other.sbxtest", PublicAddr)

	limited := func(sp *sandbox.RuntimeSpec) {
		sp.Network = sandboxapi.NetworkLimited
		sp.NetworkAllow = []string{allowed.addr(), "pkg.sbxtest:80", "loop.sbxtest:" + named.port, "127.0.0.1:" + named.port, "meta.sbxtest", "169.254.169.254"}
	}
	ctx, _, rt := s.create(t, env, limited)
	return &netSuite{ctx: ctx, env: env, rt: rt, egress: opts.Egress, tn: tn, allowed: allowed, other: other, named: named, limited: limited, f: f}
}

// run runs script under bash in the suite's runtime with network ("" =
// the runtime's), args as $1….
func (n *netSuite) run(t *testing.T, network sandboxapi.Network, script string, args ...string) sandboxapi.ExecResult {
	t.Helper()
	res, err := n.rt.Exec(n.ctx, sandboxapi.ExecRequest{Cmd: append([]string{"bash", "-c", script, "probe"}, args...), Network: network, TimeoutS: 60})
	require.NoError(t, err)
	return res
}

// combined is a result's stdout and stderr, for assertions on either.
func combined(r sandboxapi.ExecResult) string { return string(r.Stdout) + string(r.Stderr) }

// proxyEnvironment: the limited network points tools at the egress forwarder; none has no proxy variables.
func (n *netSuite) proxyEnvironment(t *testing.T) {
	res := n.run(t, "", `printf '%s|%s|%s|%s|%s|%s' "$HTTP_PROXY" "$HTTPS_PROXY" "$http_proxy" "$https_proxy" "$NO_PROXY" "$no_proxy"`)
	u := "http://" + supervisor.EgressListen
	require.Equal(t, strings.Join([]string{u, u, u, u, "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"}, "|"), string(res.Stdout))
	res = n.run(t, sandboxapi.NetworkNone, `printf '%s' "$HTTP_PROXY$https_proxy"`)
	require.Empty(t, string(res.Stdout), "no proxy variables outside the limited network")
}

// allowedByAddress: an allowed address is reached through the proxy, by GET and by CONNECT.
func (n *netSuite) allowedByAddress(t *testing.T) {
	res := n.run(t, "", proxyGetScript, n.allowed.addr(), "via-proxy")
	require.Contains(t, combined(res), "200 OK", combined(res))
	require.Contains(t, combined(res), n.allowed.word+" /via-proxy")
	res = n.run(t, sandboxapi.NetworkLimited, connectScript, n.allowed.addr())
	require.Contains(t, combined(res), "200 Connection established", combined(res))
	require.Contains(t, combined(res), n.allowed.word+" /tunnel")
}

// allowedByName: an allowed name is resolved by the proxy and reached; a name resolving to loopback only when that address is allowed too.
func (n *netSuite) allowedByName(t *testing.T) {
	require.Contains(t, n.tn.Get(t, PublicAddr), n.tn.Greeting, "control: the test network's server answers")
	res := n.run(t, "", proxyGetScript, "pkg.sbxtest", "x")
	require.Contains(t, combined(res), "200 OK", combined(res))
	require.Contains(t, combined(res), n.tn.Greeting+" pkg.sbxtest", "the proxy resolved the name and reached its address")
	res = n.run(t, "", connectScript, "pkg.sbxtest:80")
	require.Contains(t, combined(res), n.tn.Greeting+" pkg.sbxtest:80", combined(res))
	// A name resolving to loopback is reached only because that address is allowed too.
	res = n.run(t, "", proxyGetScript, "loop.sbxtest:"+n.named.port, "n")
	require.Contains(t, combined(res), "named /n", combined(res))
}

// ordinaryTools: curl reaches an allowed name and gets the proxy's 403 for another.
func (n *netSuite) ordinaryTools(t *testing.T) {
	// curl, as a tool reads HTTP_PROXY/HTTPS_PROXY (the Docker test
	// image has none: then only the bash probes above run).
	if res := n.run(t, "", "command -v curl"); res.ExitCode != 0 {
		t.Log("no curl in the runtime")
		return
	}
	res := n.run(t, "", `curl -sS --max-time 20 http://pkg.sbxtest/from-curl`)
	require.Equal(t, 0, res.ExitCode, combined(res))
	require.Contains(t, string(res.Stdout), n.tn.Greeting+" pkg.sbxtest")
	res = n.run(t, "", `curl -sS --max-time 20 -o /dev/null -w '%{http_code}' http://n.other.sbxtest/`)
	require.Equal(t, "403", string(res.Stdout), combined(res))
	res = n.run(t, "", `curl -sS --max-time 20 https://n.other.sbxtest/`)
	require.NotEqual(t, 0, res.ExitCode)
	require.Contains(t, string(res.Stderr), "403", "curl reports the proxy's refusal of the tunnel")
	// curl shows only "CONNECT tunnel failed, response 403": the exec's
	// stderr says what the policy refused and why.
	require.Contains(t, string(res.Stderr), "sandbox: network policy refused CONNECT n.other.sbxtest:443: n.other.sbxtest:443 is not in the allow-list", combined(res))
}

// refusedByPolicy: destinations outside the allow-list and metadata addresses are refused with a reason, never connected to, and logged without the URL path.
func (n *netSuite) refusedByPolicy(t *testing.T) {
	hitsBefore := n.tn.Hits()
	for _, c := range []struct{ script, dest, why string }{
		{proxyGetScript, n.other.addr(), n.other.addr() + " is not in the allow-list"},
		{connectScript, n.other.addr(), n.other.addr() + " is not in the allow-list"},
		{connectScript, "n.other.sbxtest:80", "n.other.sbxtest:80 is not in the allow-list"},
		{connectScript, "pkg.sbxtest:443", "pkg.sbxtest:443 is not in the allow-list"},
		{connectScript, "meta.sbxtest:80", "meta.sbxtest resolves to 169.254.169.254, a cloud metadata address, which is never reachable"},
		{connectScript, "169.254.169.254:80", "169.254.169.254 is a cloud metadata address, which is never reachable"},
		{proxyGetScript, "169.254.169.254", "169.254.169.254 is a cloud metadata address"},
	} {
		res := n.run(t, "", c.script, c.dest, "latest/meta-data")
		require.Contains(t, combined(res), "403 Forbidden", c.dest)
		require.Contains(t, combined(res), "denied by the network policy of workspace "+n.env.Spec.WorkspaceID, c.dest)
		require.Contains(t, combined(res), c.why, c.dest)
	}
	require.Zero(t, n.other.conns.Load(), "a refused destination was never connected to")
	require.Equal(t, hitsBefore, n.tn.Hits(), "no refused request reached the test network")
	require.Contains(t, n.tn.Get(t, MetadataAddr), n.tn.Greeting, "control: a server answers at 169.254.169.254 in the test network, so the refusal is the policy's")
	logs := n.egress.Log.String()
	require.Contains(t, logs, "egress denied")
	require.Contains(t, logs, "destination="+n.other.addr())
	require.Contains(t, logs, "workspace="+n.env.Spec.WorkspaceID)
	require.NotContains(t, logs, "latest/meta-data", "the log holds no URL path")
}

// nothingAroundTheProxy: no direct connection leaves the limited or none network.
func (n *netSuite) nothingAroundTheProxy(t *testing.T) {
	before := n.allowed.conns.Load()
	targets := [][2]string{{"127.0.0.1", n.allowed.port}, {MetadataAddr.String(), "80"}, {PublicAddr.String(), "80"}, {"8.8.8.8", "53"}}
	if ha := hostAddr(); ha != "" {
		targets = append(targets, [2]string{ha, n.allowed.port})
	}
	for _, network := range []sandboxapi.Network{sandboxapi.NetworkLimited, sandboxapi.NetworkNone} {
		for _, tg := range targets {
			res := n.run(t, network, directScript, tg[0], tg[1])
			require.Contains(t, string(res.Stdout), "FAILED", "%s: a direct connection to %s:%s", network, tg[0], tg[1])
		}
	}
	require.Equal(t, before, n.allowed.conns.Load(), "the host's loopback server saw no direct connection")
}

// noneReachesOnlyItsLoopback: the none network has its own loopback and no egress forwarder.
func (n *netSuite) noneReachesOnlyItsLoopback(t *testing.T) {
	res := n.run(t, sandboxapi.NetworkNone, loopbackScript)
	require.Contains(t, string(res.Stdout), "OWN-LOOPBACK", combined(res))
	res = n.run(t, sandboxapi.NetworkNone, directScript, "127.0.0.1", strings.Split(supervisor.EgressListen, ":")[1])
	require.Contains(t, string(res.Stdout), "FAILED", "the none network has no egress forwarder")
}

// commandAboveThePolicyIsRefused: a command or process asking for a network above the policy is SandboxCommandRejected.
func (n *netSuite) commandAboveThePolicyIsRefused(t *testing.T) {
	_, err := n.rt.Exec(n.ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkDefault})
	require.Error(t, err)
	require.True(t, errors.Is(err, sandboxapi.ErrCommandRejected), "%v", err)
	require.Contains(t, err.Error(), "network policy (limited)")
	if pr, ok := n.rt.(sandbox.ProcessRuntime); ok {
		_, err := pr.StartProcess(n.ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "5"}, Network: sandboxapi.NetworkDefault})
		require.True(t, errors.Is(err, sandboxapi.ErrCommandRejected), "%v", err)
	}
}

// backgroundProcessesKeepTheirNetwork: background processes run with the network they asked for.
func (n *netSuite) backgroundProcessesKeepTheirNetwork(t *testing.T) {
	pr, ok := n.rt.(sandbox.ProcessRuntime)
	if !ok {
		t.Skip("no background processes")
	}
	none, err := pr.StartProcess(n.ctx, sandbox.ProcessSpec{Cmd: []string{"bash", "-c", directScript + "; sleep 30", "probe", "127.0.0.1", strings.Split(supervisor.EgressListen, ":")[1]}, Network: sandboxapi.NetworkNone})
	require.NoError(t, err)
	lim, err := pr.StartProcess(n.ctx, sandbox.ProcessSpec{Cmd: []string{"bash", "-c", proxyGetScript + "; sleep 30", "probe", n.allowed.addr(), "bg"}})
	require.NoError(t, err)
	read := func(id, want string) {
		t.Helper()
		var got string
		require.Eventually(t, func() bool {
			o, err := pr.ReadProcess(n.ctx, id, sandbox.ProcessReadRequest{Wait: time.Second})
			require.NoError(t, err)
			got = string(o.Data)
			return strings.Contains(got, want)
		}, 30*time.Second, 50*time.Millisecond, "process %s: %q", id, got)
	}
	read(none.ID, "FAILED")
	read(lim.ID, n.allowed.word+" /bg")
	list, err := pr.ListProcesses(n.ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, p := range list {
		ids[p.ID] = true
	}
	require.True(t, ids[none.ID] && ids[lim.ID], "both listed: %v", ids)
	require.NoError(t, pr.SignalProcess(n.ctx, none.ID, "KILL"))
	require.NoError(t, pr.SignalProcess(n.ctx, lim.ID, "KILL"))
}

// narrowedSpecEndsWiderSandboxes: re-creating the runtime with a narrower network refuses the wider one.
func (n *netSuite) narrowedSpecEndsWiderSandboxes(t *testing.T) {
	spec := n.env.Spec
	n.limited(&spec)
	spec.Network = sandboxapi.NetworkNone
	rt2, err := n.env.Provider.Create(n.ctx, spec)
	require.NoError(t, err)
	_, err = rt2.Exec(n.ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkLimited})
	require.True(t, errors.Is(err, sandboxapi.ErrCommandRejected), "%v", err)
	res, err := rt2.Exec(n.ctx, sandboxapi.ExecRequest{Cmd: []string{"bash", "-c", directScript, "probe", "127.0.0.1", strings.Split(supervisor.EgressListen, ":")[1]}})
	require.NoError(t, err)
	require.Contains(t, string(res.Stdout), "FAILED")
}

// hostAddr returns a non-loopback address of the host ("" when none): what
// a runtime must not reach directly either.
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// defaultReachesOnlyPublic: the default network has a namespace of its
// own, whose only way out is its own egress endpoint: nothing is reached
// around the proxy (the host's loopback, where the worker's, Temporal's and
// the Web UI's ports listen; the host's own addresses; the metadata
// address), and through it every public destination by name or address on
// any port — never the host's loopback, a name resolving to it, its own
// addresses or the metadata address, none of which any allow-list names.
func (n *netSuite) defaultReachesOnlyPublic(t *testing.T) {
	s := &suite{f: n.f}
	ctx, env, rt := s.create(t, s.newEnv(t), func(sp *sandbox.RuntimeSpec) { sp.Network = sandboxapi.NetworkDefault })
	run := func(script string, args ...string) sandboxapi.ExecResult {
		t.Helper()
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: append([]string{"bash", "-c", script, "probe"}, args...), TimeoutS: 60})
		require.NoError(t, err)
		return res
	}
	before := n.other.conns.Load()
	targets := [][2]string{{"127.0.0.1", n.other.port}, {MetadataAddr.String(), "80"}, {PublicAddr.String(), "80"}}
	ha := hostAddr()
	if ha != "" {
		targets = append(targets, [2]string{ha, n.other.port})
	}
	for _, tg := range targets {
		res := run(directScript, tg[0], tg[1])
		require.Contains(t, string(res.Stdout), "FAILED", "default: a direct connection to %s:%s", tg[0], tg[1])
	}
	// Public destinations, by name and by address, on any port.
	res := run(proxyGetScript, "other.sbxtest", "public")
	require.Contains(t, combined(res), n.tn.Greeting+" other.sbxtest", combined(res))
	res = run(connectScript, PublicAddr.String()+":80")
	require.Contains(t, combined(res), "200 Connection established", combined(res))
	// Never the host or the metadata address.
	refused := []string{n.other.addr(), "loop.sbxtest:" + n.other.port, "[::1]:" + n.other.port, "169.254.169.254:80", "meta.sbxtest:80"}
	if ha != "" {
		refused = append(refused, net.JoinHostPort(ha, n.other.port))
	}
	for _, dest := range refused {
		res := run(connectScript, dest)
		require.Contains(t, combined(res), "403 Forbidden", dest)
		require.Contains(t, combined(res), "denied by the network policy of workspace "+env.Spec.WorkspaceID, dest)
	}
	require.Equal(t, before, n.other.conns.Load(), "the host's loopback server saw no connection from the default network")
}
