package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// lockedBuffer is a log sink safe for the proxy's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// world is a proxy whose resolver and dialer know a few test names: the
// addresses it "dials" are served by HTTP servers on the host's loopback.
type world struct {
	t        *testing.T
	proxy    *Proxy
	sock     string
	log      *lockedBuffer
	lookedUp sync.Map
	names    map[string][]netip.Addr
	// routes maps a checked destination to the loopback server standing in for it.
	routes map[netip.AddrPort]string
	// port is the loopback server's port (it answers "hello from <Host>").
	port uint16
}

func newWorld(t *testing.T, allow ...string) *world {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s", r.Host, r.URL.Path)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	w := &world{t: t, log: &lockedBuffer{}, port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	w.names = map[string][]netip.Addr{
		"pub.test":        {netip.MustParseAddr("198.51.100.7")},
		"a.wild.test":     {netip.MustParseAddr("198.51.100.8")},
		"wild.test":       {netip.MustParseAddr("198.51.100.8")},
		"loop.test":       {netip.MustParseAddr("127.0.0.1")},
		"private.test":    {netip.MustParseAddr("10.1.2.3")},
		"meta.test":       {netip.MustParseAddr("169.254.169.254")},
		"meta6.test":      {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
		"mixed.test":      {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("198.51.100.7")},
		"own.test":        {netip.MustParseAddr("198.51.100.99")},
		"cgnat.test":      {netip.MustParseAddr("100.64.1.1")},
		"mapped.test":     {netip.MustParseAddr("::ffff:127.0.0.1")},
		"unresolved.test": nil,
	}
	loop := net.JoinHostPort("127.0.0.1", fmt.Sprint(w.port))
	w.routes = map[netip.AddrPort]string{}
	for _, a := range []string{"198.51.100.7", "198.51.100.8", "127.0.0.1", "10.1.2.3", "169.254.169.254", "198.51.100.99", "100.64.1.1", "10.9.9.9"} {
		w.routes[netip.AddrPortFrom(netip.MustParseAddr(a), w.port)] = loop
	}
	w.proxy = New(Options{
		Logger: slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			w.lookedUp.Store(host, true)
			a, ok := w.names[host]
			if !ok || a == nil {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			return a, nil
		},
		Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			to, ok := w.routes[ap]
			if !ok {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route to host")}
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", to)
		},
		OwnAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("198.51.100.99")} },
	})
	t.Cleanup(w.proxy.Close)
	w.sock = filepath.Join(t.TempDir(), "egress.sock")
	w.attach(allow...)
	return w
}

func (w *world) attach(allow ...string) {
	w.t.Helper()
	for i, a := range allow {
		allow[i] = strings.ReplaceAll(a, "PORT", fmt.Sprint(w.port))
	}
	rules, err := ParseRules(allow)
	require.NoError(w.t, err)
	require.NoError(w.t, w.proxy.Attach(Policy{WorkspaceID: "ws-test", RuntimeID: "rt-test", Allow: rules}, w.sock))
}

func (w *world) dest(host string) string { return net.JoinHostPort(host, fmt.Sprint(w.port)) }

// connect sends CONNECT dest and, when the tunnel opens, a GET through it;
// it returns the proxy's status, its body when it refused, or the tunnelled answer.
func (w *world) connect(dest string) (int, string, http.Header) {
	w.t.Helper()
	c, err := net.Dial("unix", w.sock)
	require.NoError(w.t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(w.t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	fmt.Fprintf(c, "GET /through-the-tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", dest)
	inner, err := http.ReadResponse(br, nil)
	require.NoError(w.t, err)
	b, _ := io.ReadAll(inner.Body)
	return resp.StatusCode, string(b), resp.Header
}

// get sends a plain proxied GET of rawURL.
func (w *world) get(rawURL string, hdr http.Header) (int, string, http.Header) {
	w.t.Helper()
	proxyURL, _ := url.Parse("http://egress.invalid")
	cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", w.sock)
		},
	}}
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(w.t, err)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := cl.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestAllowedDestinationsAnswer(t *testing.T) {
	w := newWorld(t, "127.0.0.1:PORT", "pub.test:PORT", "*.wild.test", "loop.test:PORT")
	code, body, _ := w.connect(w.dest("127.0.0.1"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "hello from 127.0.0.1")
	require.Contains(t, body, "/through-the-tunnel")

	code, body, _ = w.get("http://"+w.dest("127.0.0.1")+"/plain", nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "hello from "+w.dest("127.0.0.1")+" /plain", body)

	// By name, resolved by the proxy to a public address.
	code, body, _ = w.connect(w.dest("pub.test"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "hello from "+w.dest("pub.test"))
	code, body, _ = w.get("http://"+w.dest("PUB.test.")+"/x", nil)
	require.Equal(t, http.StatusOK, code, body)

	// A wildcard matches names below it, on any port.
	code, body, _ = w.connect(w.dest("a.wild.test"))
	require.Equal(t, http.StatusOK, code, body)
	code, body, _ = w.connect(w.dest("wild.test"))
	require.Equal(t, http.StatusForbidden, code, body)

	// A name that resolves to loopback is reached because 127.0.0.1:PORT is allowed by address.
	code, body, _ = w.connect(w.dest("loop.test"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, w.log.String(), `workspace=ws-test runtime=rt-test destination=pub.test:`)
}

func TestRefusalsSayPolicy(t *testing.T) {
	w := newWorld(t, "pub.test:1-80", "private.test:PORT", "meta.test", "meta6.test", "mixed.test:PORT", "own.test:PORT",
		"cgnat.test:PORT", "loop.test:PORT", "mapped.test:PORT", "unresolved.test")
	cases := map[string]string{
		"elsewhere.test:443":          "elsewhere.test:443 is not in the allow-list",
		w.dest("pub.test"):            "is not in the allow-list", // port outside 1-80
		w.dest("private.test"):        "private.test resolves to 10.1.2.3, a private address: allow 10.1.2.3:",
		w.dest("loop.test"):           "a loopback address",
		w.dest("mapped.test"):         "a loopback address",
		w.dest("cgnat.test"):          "carrier-grade NAT",
		w.dest("own.test"):            "an address of the worker's host",
		w.dest("meta.test"):           "169.254.169.254, a cloud metadata address, which is never reachable",
		w.dest("meta6.test"):          "a cloud metadata address",
		"169.254.169.254:80":          "169.254.169.254 is a cloud metadata address, which is never reachable",
		"[fd00:ec2::254]:80":          "cloud metadata address",
		"[::ffff:169.254.169.254]:80": "cloud metadata address",
		"[64:ff9b::a9fe:a9fe]:80":     "cloud metadata address",
		"100.100.100.200:80":          "cloud metadata address",
	}
	for dest, want := range cases {
		code, body, hdr := w.connect(dest)
		require.Equal(t, http.StatusForbidden, code, dest)
		require.Contains(t, body, "denied by the network policy of workspace ws-test", dest)
		require.Contains(t, body, want, dest)
		require.Equal(t, "denied", hdr.Get(PolicyHeader), dest)
		require.Contains(t, hdr.Get(ReasonHeader), want, dest)
	}
	// The status line says it too (what pip and git print).
	c, err := net.Dial("unix", w.sock)
	require.NoError(t, err)
	fmt.Fprintf(c, "CONNECT elsewhere.test:443 HTTP/1.1\r\nHost: elsewhere.test:443\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 "+DeniedStatus+": elsewhere.test:443 is not in the allow-list\r\n", line)
	_ = c.Close()
	// A name no entry allows is never resolved (no lookups leave the worker for it).
	w.connect("never-resolved.test:443")
	for _, n := range []string{"never-resolved.test", "elsewhere.test"} {
		_, looked := w.lookedUp.Load(n)
		require.False(t, looked, "%s was resolved though no name entry allows it", n)
	}

	// A name with a private and a public address: only the public one is used.
	code, body, _ := w.connect(w.dest("mixed.test"))
	require.Equal(t, http.StatusOK, code, body)

	// An unresolvable allowed name is a 502, not a policy refusal.
	code, body, hdr := w.connect("unresolved.test:443")
	require.Equal(t, http.StatusBadGateway, code)
	require.Contains(t, body, "cannot resolve unresolved.test")
	require.Empty(t, hdr.Get(PolicyHeader))

	// Plain HTTP is refused the same way, and the log never holds a path or a header.
	code, body, hdr = w.get("http://"+w.dest("private.test")+"/secret-path?token=s3cr3t", http.Header{"X-Secret": {"hunter2"}})
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "GET to "+w.dest("private.test")+" denied by the network policy")
	require.NotContains(t, body, "secret-path")
	require.Equal(t, "denied", hdr.Get(PolicyHeader))
	logs := w.log.String()
	require.Contains(t, logs, "egress denied")
	require.Contains(t, logs, "workspace=ws-test")
	require.Contains(t, logs, "destination="+w.dest("private.test"))
	for _, secret := range []string{"secret-path", "s3cr3t", "hunter2", "X-Secret", "through-the-tunnel"} {
		require.NotContains(t, logs, secret)
	}
}

func TestAttachReplacesThePolicy(t *testing.T) {
	w := newWorld(t, "127.0.0.1:PORT")
	code, _, _ := w.connect(w.dest("127.0.0.1"))
	require.Equal(t, http.StatusOK, code)
	w.attach("pub.test:PORT")
	code, body, _ := w.connect(w.dest("127.0.0.1"))
	require.Equal(t, http.StatusForbidden, code, body)
	code, _, _ = w.connect(w.dest("pub.test"))
	require.Equal(t, http.StatusOK, code)

	// An open tunnel ends with its endpoint.
	c, err := net.Dial("unix", w.sock)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", w.dest("pub.test"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	w.proxy.Detach("rt-test")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the tunnel was closed")
	_, err = net.Dial("unix", w.sock)
	require.Error(t, err, "a detached endpoint's socket is gone")
}

func TestBadRequests(t *testing.T) {
	w := newWorld(t, "pub.test")
	c, err := net.Dial("unix", w.sock)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprintf(c, "GET /relative HTTP/1.1\r\nHost: pub.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	code, body, _ := w.connect("pub.test")
	require.Equal(t, http.StatusBadRequest, code, body)
}

func TestClassify(t *testing.T) {
	for a, want := range map[string]string{
		"8.8.8.8": "", "2606:4700::1111": "", "198.51.100.1": "",
		"127.0.0.2": "loopback", "::1": "loopback", "10.0.0.1": "private", "172.16.5.4": "private", "192.168.1.1": "private",
		"fd12::1": "private", "169.254.1.1": "link-local", "fe80::1": "link-local", "100.64.0.1": "carrier-grade",
		"0.1.2.3": "this network", "224.0.0.1": "multicast", "255.255.255.255": "broadcast", "240.0.0.1": "reserved",
		"::": "unspecified", "::ffff:10.0.0.1": "private", "64:ff9b::a00:1": "private", "2002:a00:1::": "private",
		"198.18.0.1": "benchmarking",
	} {
		got := Classify(netip.MustParseAddr(a))
		if want == "" {
			require.Empty(t, got, a)
		} else {
			require.Contains(t, got, want, a)
		}
	}
	require.True(t, isMetadata(netip.MustParseAddr("::ffff:169.254.169.254")))
	_, err := ParseRules(DefaultAllow)
	require.NoError(t, err, "the default allow-list parses")
}

func TestForRemote(t *testing.T) {
	ra, err := ForRemote([]string{"registry.npmjs.org:443", "*.corp.example", "registry.npmjs.org:80", "192.0.2.7:8080", "10.0.0.0/8",
		"169.254.0.0/16", "0.0.0.0/0", "169.254.169.254", "2001:db8::/32"})
	require.NoError(t, err)
	require.Equal(t, []string{"registry.npmjs.org", "*.corp.example"}, ra.Domains)
	require.Equal(t, []string{"192.0.2.7", "10.0.0.0/8", "2001:db8::/32"}, ra.CIDRs)
	require.Equal(t, []string{"registry.npmjs.org:443", "registry.npmjs.org:80", "192.0.2.7:8080"}, ra.Widened)
	require.Equal(t, []string{"169.254.0.0/16", "0.0.0.0/0", "169.254.169.254"}, ra.Dropped, "nothing opens the metadata address")
}

// TestWildcardCannotExfiltrateThroughDNS: the worker resolves only names the
// policy allows, and a command cannot turn a wildcard into a DNS channel.
// A workspace's own wildcard entry is refused (WorkspaceEntryRefusal; the
// activities refuse it at acquire and drop a stored one); an operator's
// wildcard resolves at most MaxWildcardNames distinct names per runtime
// that only it allows, so past that an attacker-chosen name
// (CONNECT secret-data.wild.test:443) is refused without a lookup, while
// names already admitted and names an exact entry allows still work; and a
// string that is not a host name is never looked up at all.
func TestWildcardCannotExfiltrateThroughDNS(t *testing.T) {
	wild, err := sandboxapi.ParseNetworkRule("*.example.com")
	require.NoError(t, err)
	require.Contains(t, WorkspaceEntryRefusal(wild, nil), "DNS exfiltration")
	exact, err := sandboxapi.ParseNetworkRule("registry.example.com:443")
	require.NoError(t, err)
	require.Empty(t, WorkspaceEntryRefusal(exact, nil))

	w := newWorld(t, "*.wild.test", "pub.test:PORT")
	looked := func(n string) bool { _, ok := w.lookedUp.Load(n); return ok }

	// Not host names: refused, never resolved.
	for _, n := range []string{"sec_ret-.wild.test", "a..wild.test", strings.Repeat("x", 64) + ".wild.test", "-x.wild.test"} {
		code, body, hdr := w.connect(n + ":443")
		require.Equal(t, http.StatusForbidden, code, n)
		require.Equal(t, "denied", hdr.Get(PolicyHeader), n)
		require.Contains(t, body, "is not a host name", n)
		require.False(t, looked(n), "%s was resolved", n)
	}

	// The first MaxWildcardNames names below the wildcard are resolved
	// (a.wild.test answers; the others do not exist: 502).
	code, body, _ := w.connect(w.dest("a.wild.test"))
	require.Equal(t, http.StatusOK, code, body)
	for i := 1; i < MaxWildcardNames; i++ {
		n := fmt.Sprintf("mirror%d.wild.test", i)
		code, _, _ := w.connect(n + ":443")
		require.Equal(t, http.StatusBadGateway, code, n)
		require.True(t, looked(n), n)
	}
	// Then an attacker-chosen label is never sent to the resolver.
	secret := "c2VjcmV0LWRhdGE.wild.test"
	code, body, hdr := w.connect(secret + ":443")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Equal(t, "denied", hdr.Get(PolicyHeader))
	require.Contains(t, body, "matches only a wildcard entry")
	require.False(t, looked(secret), "the attacker-chosen name was resolved")
	code, _, _ = w.get("http://other-"+secret+"/x", nil)
	require.Equal(t, http.StatusForbidden, code)
	require.False(t, looked("other-"+secret), "the attacker-chosen name was resolved (plain HTTP)")

	// Admitted names and exactly allowed names keep working.
	code, body, _ = w.connect(w.dest("a.wild.test"))
	require.Equal(t, http.StatusOK, code, body)
	code, body, _ = w.connect(w.dest("pub.test"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, w.log.String(), "matches only a wildcard entry")
}

// TestWorkspaceEntriesArePublicOnly: a workspace's own address entry (its
// acquire request's network_allow, untrusted) may cover public addresses
// only: loopback, RFC 1918 (the compose stack's Temporal at 172.18.0.5),
// CGNAT, link-local, ULA, a catch-all and the worker host's addresses are
// refused, also through IPv4-mapped, NAT64 and 6to4 forms; the same entries
// are accepted when the worker's list (SANDBOX_NETWORK_ALLOW) covers them.
// 0.0.0.0/0 and ::/0 are refused outright (the strictest reading: a CIDR
// that overlaps a non-public range at all is refused, not applied to its
// public part), so a workspace's list never holds an entry that the proxy
// would match against a private address.
func TestWorkspaceEntriesArePublicOnly(t *testing.T) {
	own := func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("203.0.113.9")} }
	parse := func(e string) sandboxapi.NetworkRule {
		r, err := sandboxapi.ParseNetworkRule(e)
		require.NoError(t, err, e)
		return r
	}
	refused := map[string]string{
		"10.0.0.0/8":           "private addresses",
		"172.18.0.5":           "private addresses",
		"172.18.0.5:7233":      "private addresses",
		"192.168.1.0/24":       "private addresses",
		"0.0.0.0/0":            "loopback",
		"::/0":                 "loopback",
		"fd00::/8":             "unique local addresses",
		"127.0.0.1":            "loopback",
		"100.64.1.1":           "carrier-grade NAT",
		"169.254.1.1":          "link-local",
		"fe80::1":              "link-local",
		"224.0.0.1":            "multicast",
		"255.255.255.255":      "reserved addresses (and the broadcast address)",
		"198.18.0.1":           "benchmarking",
		"96.0.0.0/4":           "carrier-grade NAT", // a wide public-looking CIDR that overlaps 100.64.0.0/10
		"172.0.0.0/8":          "private addresses",
		"::ffff:10.0.0.1":      "private addresses",
		"64:ff9b::ac12:5":      "private addresses (RFC 1918) (as NAT64)",
		"64:ff9b::/96":         "loopback addresses (as NAT64)",
		"2002:ac12:5::/48":     "(as 6to4)",
		"2000::/3":             "(as 6to4)",
		"203.0.113.9":          "an address of the worker's host",
		"203.0.113.0/24":       "203.0.113.9, an address of the worker's host",
		"64:ff9b::cb00:7109":   "203.0.113.9, an address of the worker's host (as NAT64)",
		"169.254.169.254":      "link-local",
		"[fd00:ec2::254]:80":   "unique local",
		"100.100.100.200:8080": "carrier-grade NAT",
	}
	for e, want := range refused {
		why := WorkspaceEntryCheck(nil, parse(e), own)
		require.Contains(t, why, want, e)
		// The operator's list may name each of them; the same entry (or a
		// narrower one inside an operator's entry) is then accepted.
		ops, err := ParseRules([]string{e})
		require.NoError(t, err)
		require.Empty(t, WorkspaceEntryCheck(ops, parse(e), own), e)
	}
	ops, err := ParseRules([]string{"10.0.0.0/8:443", "172.16.0.0/12"})
	require.NoError(t, err)
	require.Empty(t, WorkspaceEntryCheck(ops, parse("10.20.0.0/16:443"), own), "inside an operator's CIDR and port")
	require.Empty(t, WorkspaceEntryCheck(ops, parse("172.18.0.5:7233"), own))
	require.NotEmpty(t, WorkspaceEntryCheck(ops, parse("10.20.0.0/16"), own), "every port: wider than the operator's :443")
	require.NotEmpty(t, WorkspaceEntryCheck(ops, parse("10.20.0.0/16:80"), own), "another port")
	require.NotEmpty(t, WorkspaceEntryCheck(ops, parse("0.0.0.0/0"), own), "wider than the operator's CIDR")

	for _, e := range []string{"8.8.8.8", "1.1.1.0/24:443", "192.0.2.7", "198.51.100.0/24", "2606:4700::/32", "[2606:4700::1111]:443",
		"64:ff9b::808:808", "2002:808:808::/48", "registry.npmjs.org:443", "localhost"} {
		require.Empty(t, WorkspaceEntryCheck(nil, parse(e), own), e)
	}
}

// TestNonPublicClassesMatchClassify: the ranges a workspace's address
// entries may not cover are exactly those whose addresses Classify reports
// as non-public: every sampled address Classify calls non-public is
// refused as a workspace's /32 or /128, every public one accepted, and no
// sampled address inside an accepted CIDR is non-public.
func TestNonPublicClassesMatchClassify(t *testing.T) {
	var samples []netip.Addr
	for _, c := range append(append([]addrClass{}, hostClasses...), nonPublicClasses...) {
		p := c.prefix
		samples = append(samples, p.Addr(), lastAddr(p), p.Addr().Prev(), lastAddr(p).Next())
	}
	for _, s := range []string{"8.8.8.8", "2606:4700::1111", "64:ff9b::a00:1", "64:ff9b::808:808", "2002:a00:1::", "2002:808:808::1",
		"::ffff:192.168.1.1", "::ffff:1.1.1.1", "172.15.255.255", "172.32.0.0", "100.63.255.255", "100.128.0.0"} {
		samples = append(samples, netip.MustParseAddr(s))
	}
	for i := 0; i < 4096; i++ {
		samples = append(samples, netip.AddrFrom4([4]byte{byte(i * 7), byte(i * 13), byte(i), byte(i * 31)}))
	}
	for _, a := range samples {
		if !a.IsValid() {
			continue
		}
		r := sandboxapi.NetworkRule{Prefix: netip.PrefixFrom(a, a.BitLen())}
		why := WorkspaceEntryRefusal(r, nil)
		if Classify(a) != "" {
			require.NotEmpty(t, why, "%s is %s but a workspace may name it", a, Classify(a))
		} else {
			require.Empty(t, why, "%s is public but refused: %s", a, why)
		}
	}
	for _, p := range []string{"8.0.0.0/7", "1.0.0.0/8", "2606:4700::/32", "64:ff9b::800:0/104", "2002:800::/24"} {
		pp := netip.MustParsePrefix(p)
		require.Empty(t, WorkspaceEntryRefusal(sandboxapi.NetworkRule{Prefix: pp}, nil), p)
		for _, a := range []netip.Addr{pp.Addr(), lastAddr(pp)} {
			require.Empty(t, Classify(a), "%s in %s", a, p)
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestWorkspaceNameCannotReachPrivate: a real proxy serving a runtime list
// made by CombineAllow. A workspace's name entry whose name resolves to a
// private address (private.test → 10.1.2.3) is refused at connect, even
// when the workspace's stored list also holds that address (stored before
// the rule: CombineAllow leaves it out); the literal address too. Only the
// operator's address entry opens it.
func TestWorkspaceNameCannotReachPrivate(t *testing.T) {
	w := newWorld(t)
	port := fmt.Sprint(w.port)
	combined, dropped := CombineAllow(nil, []string{"private.test:" + port, "10.1.2.3:" + port, "10.0.0.0/8", "pub.test:" + port}, nil)
	require.Equal(t, []string{"private.test:" + port, "pub.test:" + port}, combined)
	require.Equal(t, []string{"10.1.2.3:" + port, "10.0.0.0/8"}, dropped)
	w.attach(combined...)
	code, body, hdr := w.connect(w.dest("private.test"))
	require.Equal(t, http.StatusForbidden, code, body)
	require.Equal(t, "denied", hdr.Get(PolicyHeader))
	require.Contains(t, body, "private.test resolves to 10.1.2.3, a private address: allow 10.1.2.3:"+port+" (or its CIDR) by address in the worker's SANDBOX_NETWORK_ALLOW")
	code, body, _ = w.connect(w.dest("10.1.2.3"))
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "a private address needs an IP or CIDR entry in the worker's SANDBOX_NETWORK_ALLOW")
	code, body, _ = w.connect(w.dest("pub.test"))
	require.Equal(t, http.StatusOK, code, body)

	// The operator's entry opens the address to the workspace's name.
	combined, dropped = CombineAllow([]string{"10.1.2.3:" + port}, []string{"private.test:" + port, "10.1.2.3:" + port}, nil)
	require.Equal(t, []string{"10.1.2.3:" + port, "private.test:" + port}, combined)
	require.Empty(t, dropped)
	w.attach(combined...)
	code, body, _ = w.connect(w.dest("private.test"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "hello from private.test")
}
