package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const syscallODirectory = syscall.O_DIRECTORY

// Defaults of a Proxy.
const (
	// DialTimeout bounds one connection attempt to a destination.
	DialTimeout = 15 * time.Second
	// LookupTimeout bounds resolving one name.
	LookupTimeout = 10 * time.Second
	// MaxTunnels bounds the open connections of one endpoint; more wait.
	MaxTunnels = 256
	// headerTimeout bounds reading a request's headers; idleTimeout closes
	// a kept-alive client connection without requests.
	headerTimeout = 30 * time.Second
	idleTimeout   = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
	// ownAddrsEvery is how long the host's interface addresses are cached.
	ownAddrsEvery = 10 * time.Second
	// MaxWildcardNames bounds the distinct names an endpoint (one runtime,
	// from its Attach) resolves that only a wildcard entry allows: a
	// command chooses those names, and every lookup sends one to the
	// wildcard zone's name servers. Beyond it such names are refused
	// (403) without a lookup; names an exact entry allows are not counted.
	MaxWildcardNames = 16
)

// PolicyHeader is set on every answer the proxy itself makes to a refused
// request ("denied"), so a client can tell a policy refusal from the
// destination's own 403.
const PolicyHeader = "X-Sandboxcore-Network-Policy"

// DeniedStatus begins the status line of a refusal: 403 with a reason
// phrase that says why, which tools that print the proxy's status line
// (Python's http.client, so pip; git) show as they are. The line goes on
// with ": " and the policy's reason (DeniedStatusLine).
const DeniedStatus = "403 Forbidden by the sandbox's network policy"

// ReasonHeader carries the policy's reason on every refusal (the same text
// as the status line's and the body's), for clients that show headers
// but neither (curl -v prints it; curl alone shows only "response 403").
const ReasonHeader = "X-Sandboxcore-Denied-Reason"

// maxReasonPhrase bounds the reason in a refusal's status line and header.
const maxReasonPhrase = 512

// DeniedStatusLine is the status line of a refusal for reason, without
// "HTTP/1.1 ": DeniedStatus, ": ", and the reason made safe for a header
// (control characters dropped, at most maxReasonPhrase bytes).
func DeniedStatusLine(reason string) string {
	return DeniedStatus + ": " + headerSafe(reason)
}

// headerSafe drops control characters and non-ASCII from s and clips it,
// so it can stand in a status line or a header value.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > maxReasonPhrase {
		s = s[:maxReasonPhrase] + "..."
	}
	return s
}

// Options configure a Proxy. The zero value resolves names with the system
// resolver and discards its log.
type Options struct {
	// Logger receives one record per refused request (workspace, runtime,
	// destination host:port, reason) at Info, and per allowed connection at
	// Debug; never a path, a query or a header.
	Logger *slog.Logger
	// Lookup resolves a host name to its addresses; nil uses
	// net.DefaultResolver. (Tests resolve names of their own with it.)
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a checked address; nil uses a net.Dialer with
	// DialTimeout.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// OwnAddrs lists the worker host's own addresses (refused for a name
	// unless an address entry allows them); nil uses net.InterfaceAddrs,
	// cached for a few seconds.
	OwnAddrs func() []netip.Addr
	// ControlPlane are the endpoints (host:port) no command may reach,
	// whatever an allow-list says: the Temporal frontend, the Web UI, the
	// codec server, the metrics endpoint, the store (hostworker passes the
	// configured ones). One is refused as written and at every address its
	// host resolves to (looked up at most every ControlPlaneRefresh); an
	// empty or unspecified host (a listen address such as ":9464") stands
	// for the loopback and every address of the worker's host. Malformed
	// entries are ignored.
	ControlPlane []string
}

// ControlPlaneRefresh bounds how long the addresses of Options.ControlPlane
// names are reused before they are looked up again.
const ControlPlaneRefresh = 30 * time.Second

// Proxy is the worker's egress proxy: one endpoint per runtime (Attach). It
// is safe for concurrent use.
type Proxy struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	endpoints map[string]*endpoint

	ownMu   sync.Mutex
	own     map[netip.Addr]bool
	ownTime time.Time

	cpMu    sync.Mutex
	cpAddrs map[netip.AddrPort]bool // the control plane's resolved endpoints
	cpTime  time.Time
}

// Policy is what one endpoint allows: the workspace and runtime it serves
// (for the log and the refusals), its complete allow-list, and whether it
// is the default network's (AnyPublic).
type Policy struct {
	WorkspaceID string
	RuntimeID   string
	Allow       Rules
	// AnyPublic allows, beyond Allow, every public destination on every
	// port: any name (resolved by the worker) whose addresses are public,
	// any public address given literally — never loopback, private,
	// link-local, CGNAT or other non-public ranges (Classify), the worker
	// host's own addresses or the cloud metadata addresses, unless Allow
	// names them. The default network's endpoint (docs/SECURITY.md
	// "Network modes").
	AnyPublic bool
}

// New returns a proxy with no endpoint.
func New(opts Options) *Proxy {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Proxy{opts: opts, log: log.With("component", "egress"), endpoints: map[string]*endpoint{}}
}

// Attach serves pol's runtime at the unix socket path (created, mode 0666:
// the directory holding it decides who reaches it; a stale socket file is
// replaced). Attaching a runtime that is served already replaces its policy
// (connections open keep the one they were checked with) and, when path
// differs, moves it. Errors: the socket cannot be created.
func (p *Proxy) Attach(pol Policy, path string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.endpoints[pol.RuntimeID]; ok {
		if e.path == path && e.alive() {
			e.setPolicy(pol)
			return nil
		}
		e.close()
		delete(p.endpoints, pol.RuntimeID)
	}
	_ = os.Remove(path)
	ln, err := listenUnix(path)
	if err != nil {
		return fmt.Errorf("egress endpoint %s: %w", filepath.Base(filepath.Dir(path)), err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return fmt.Errorf("egress endpoint: %w", err)
	}
	e := &endpoint{p: p, path: path, ln: ln, slots: make(chan struct{}, MaxTunnels), done: make(chan struct{})}
	e.setPolicy(pol)
	e.transport = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := splitHostPort(addr, 80)
			if err != nil {
				return nil, err
			}
			return e.dial(ctx, e.policy(), host, port)
		},
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	e.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// The server's own messages could name a URL: dropped.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		_ = e.srv.Serve(ln)
		close(e.done)
	}()
	p.endpoints[pol.RuntimeID] = e
	return nil
}

// Detach stops serving runtime id (its socket is removed; open tunnels are
// closed). A runtime not served is no error.
func (p *Proxy) Detach(runtimeID string) {
	p.mu.Lock()
	e, ok := p.endpoints[runtimeID]
	delete(p.endpoints, runtimeID)
	p.mu.Unlock()
	if ok {
		e.close()
	}
}

// Close detaches every endpoint.
func (p *Proxy) Close() {
	p.mu.Lock()
	eps := p.endpoints
	p.endpoints = map[string]*endpoint{}
	p.mu.Unlock()
	for _, e := range eps {
		e.close()
	}
}

// ownAddr reports whether a is one of the host's own addresses.
func (p *Proxy) ownAddr(a netip.Addr) bool {
	if p.opts.OwnAddrs != nil {
		for _, o := range p.opts.OwnAddrs() {
			if o.Unmap() == a {
				return true
			}
		}
		return false
	}
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	if p.own == nil || time.Since(p.ownTime) > ownAddrsEvery {
		p.own = map[netip.Addr]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, ad := range addrs {
				if n, ok := ad.(*net.IPNet); ok {
					if x, ok := netip.AddrFromSlice(n.IP); ok {
						p.own[x.Unmap()] = true
					}
				}
			}
		}
		p.ownTime = time.Now()
	}
	return p.own[a]
}

func (p *Proxy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	if p.opts.Lookup != nil {
		return p.opts.Lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (p *Proxy) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	if p.opts.Dial != nil {
		return p.opts.Dial(ctx, ap)
	}
	d := net.Dialer{Timeout: DialTimeout}
	return d.DialContext(ctx, "tcp", ap.String())
}

// endpoint serves one runtime.
type endpoint struct {
	p         *Proxy
	path      string
	ln        *net.UnixListener
	srv       *http.Server
	transport *http.Transport
	slots     chan struct{}
	done      chan struct{}

	mu        sync.Mutex
	pol       Policy
	tunnels   map[net.Conn]struct{} // hijacked connections, closed with the endpoint
	closed    bool
	wildNames map[string]bool // names only a wildcard allowed that were admitted (MaxWildcardNames)
}

// admitWildcardName reports whether host, allowed only by a wildcard entry,
// may be resolved: it was admitted before, or fewer than MaxWildcardNames
// names were (then it is admitted now).
func (e *endpoint) admitWildcardName(host string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wildNames[host] {
		return true
	}
	if len(e.wildNames) >= MaxWildcardNames {
		return false
	}
	if e.wildNames == nil {
		e.wildNames = map[string]bool{}
	}
	e.wildNames[host] = true
	return true
}

// track records a hijacked connection (false: the endpoint is closing, the
// caller closes it).
func (e *endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	if e.tunnels == nil {
		e.tunnels = map[net.Conn]struct{}{}
	}
	e.tunnels[c] = struct{}{}
	return true
}

func (e *endpoint) untrack(c net.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.tunnels, c)
}

func (e *endpoint) setPolicy(pol Policy) {
	e.mu.Lock()
	e.pol = pol
	e.mu.Unlock()
}

func (e *endpoint) policy() Policy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pol
}

func (e *endpoint) alive() bool {
	select {
	case <-e.done:
		return false
	default:
		_, err := os.Lstat(e.path)
		return err == nil
	}
}

func (e *endpoint) close() {
	_ = e.srv.Close()
	e.transport.CloseIdleConnections()
	e.mu.Lock()
	e.closed = true
	for c := range e.tunnels {
		_ = c.Close()
	}
	e.mu.Unlock()
	<-e.done
	_ = os.Remove(e.path)
}

// ServeHTTP answers one proxy request: CONNECT, or an absolute http:// URL.
func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-r.Context().Done():
		return
	}
	pol := e.policy()
	switch {
	case r.Method == http.MethodConnect:
		host, port, err := splitHostPort(r.Host, 0)
		if err != nil || port == 0 {
			e.answer(w, http.StatusBadRequest, "CONNECT needs host:port (got %q)", clipText(r.Host))
			return
		}
		e.connect(w, r, pol, host, port)
	case r.URL.IsAbs() && strings.EqualFold(r.URL.Scheme, "http"):
		host, port, err := splitHostPort(r.URL.Host, 80)
		if err != nil {
			e.answer(w, http.StatusBadRequest, "bad host %q", clipText(r.URL.Host))
			return
		}
		e.forward(w, r, pol, host, port)
	case r.URL.IsAbs():
		e.answer(w, http.StatusBadRequest, "%s URLs go through CONNECT (set HTTPS_PROXY)", clipText(r.URL.Scheme))
	default:
		e.answer(w, http.StatusBadRequest, "this is the sandbox's egress proxy: send CONNECT host:port or an absolute http:// URL")
	}
}

// answer writes the proxy's own plain-text answer.
func (e *endpoint) answer(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "sandboxcore egress proxy: "+format+"\n", args...)
}

// deny answers a refused destination with 403 (DeniedStatusLine: the
// status line carries the reason, PolicyHeader, ReasonHeader with the
// reason, and a body naming the policy and the reason) and logs it.
func (e *endpoint) deny(w http.ResponseWriter, pol Policy, method, dest string, d *Denial) {
	e.p.log.Info("egress denied", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "method", method, "destination", dest, "reason", d.Reason)
	body := fmt.Sprintf("sandboxcore egress proxy: %s to %s denied by the network policy of workspace %s: %s\n", method, dest, pol.WorkspaceID, d.Reason)
	if hj, ok := w.(http.Hijacker); ok {
		if c, buf, err := hj.Hijack(); err == nil {
			defer c.Close()
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s: denied\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
				DeniedStatusLine(d.Reason), PolicyHeader, ReasonHeader, headerSafe(d.Reason), len(body), body)
			_ = buf.Flush()
			return
		}
	}
	w.Header().Set(PolicyHeader, "denied")
	w.Header().Set(ReasonHeader, headerSafe(d.Reason))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, body)
}

// failed answers a destination that could not be reached (502).
func (e *endpoint) failed(w http.ResponseWriter, pol Policy, method, dest string, err error) {
	e.p.log.Info("egress failed", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "method", method, "destination", dest, "error", err)
	e.answer(w, http.StatusBadGateway, "%s to %s failed: %v", method, dest, err)
}

// decide returns the addresses host:port may be connected to, in order, or
// why not. A name is resolved only when a name entry allows it.
func (e *endpoint) decide(ctx context.Context, pol Policy, host string, port uint16) ([]netip.AddrPort, *Denial, error) {
	aps, d, err := e.decidePolicy(ctx, pol, host, port)
	if d != nil || err != nil {
		return aps, d, err
	}
	for _, ap := range aps {
		if e.p.controlPlane(ctx, host, ap) {
			return nil, &Denial{Reason: net.JoinHostPort(host, strconv.Itoa(int(port))) + " is an endpoint of the sandbox service itself (Temporal, its Web UI, the codec server, the metrics or the store), which no command may reach"}, nil
		}
	}
	return aps, nil, nil
}

// controlPlane reports whether ap (reached as host) is one of the
// Options.ControlPlane endpoints.
func (p *Proxy) controlPlane(ctx context.Context, host string, ap netip.AddrPort) bool {
	if len(p.opts.ControlPlane) == 0 {
		return false
	}
	a := ap.Addr().Unmap()
	for _, ep := range p.opts.ControlPlane {
		h, ps, err := net.SplitHostPort(ep)
		if err != nil || ps != strconv.Itoa(int(ap.Port())) {
			continue
		}
		if strings.EqualFold(h, host) {
			return true
		}
		if ha, err := netip.ParseAddr(h); h == "" || (err == nil && ha.IsUnspecified()) {
			if a.IsLoopback() || a.IsUnspecified() || p.ownAddr(a) {
				return true
			}
		}
	}
	p.cpMu.Lock()
	defer p.cpMu.Unlock()
	if p.cpAddrs == nil || time.Since(p.cpTime) > ControlPlaneRefresh {
		p.cpAddrs = map[netip.AddrPort]bool{}
		for _, ep := range p.opts.ControlPlane {
			h, ps, err := net.SplitHostPort(ep)
			port, perr := strconv.ParseUint(ps, 10, 16)
			if err != nil || perr != nil || h == "" {
				continue
			}
			addrs := []netip.Addr{}
			if ha, err := netip.ParseAddr(h); err == nil {
				addrs = append(addrs, ha)
			} else if rs, err := p.lookup(ctx, h); err == nil {
				addrs = rs
			}
			for _, x := range addrs {
				p.cpAddrs[netip.AddrPortFrom(x.Unmap(), uint16(port))] = true
			}
		}
		p.cpTime = time.Now()
	}
	return p.cpAddrs[netip.AddrPortFrom(a, ap.Port())]
}

// decidePolicy decides host:port by pol alone: the addresses to connect to,
// or why not.
func (e *endpoint) decidePolicy(ctx context.Context, pol Policy, host string, port uint16) ([]netip.AddrPort, *Denial, error) {
	own := e.p.ownAddr
	if a, err := netip.ParseAddr(host); err == nil {
		via := ""
		if pol.AnyPublic {
			// Decided as a resolved name's address is: public, or allowed.
			via = a.Unmap().String()
		}
		if d := pol.Allow.checkAddr(a, port, own, via); d != nil {
			return nil, d, nil
		}
		return []netip.AddrPort{netip.AddrPortFrom(a.Unmap(), port)}, nil, nil
	}
	if !validHostName(host) {
		return nil, &Denial{Reason: clipText(host) + " is not a host name"}, nil
	}
	allowed, viaWildcard := pol.Allow.nameAllowed(host, port)
	if !allowed && pol.AnyPublic {
		allowed, viaWildcard = true, false // every public destination
	}
	if !allowed {
		return nil, &Denial{Reason: host + ":" + strconv.Itoa(int(port)) + " is not in the allow-list"}, nil
	}
	if viaWildcard && !e.admitWildcardName(host) {
		return nil, &Denial{Reason: fmt.Sprintf("%s matches only a wildcard entry, and this runtime's commands have already had %d names under wildcard entries resolved (the limit: the worker resolves no more names of a command's choosing); allow the host by its exact name", host, MaxWildcardNames)}, nil
	}
	addrs, err := e.p.lookup(ctx, host)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot resolve %s: %w", host, lookupErr(err))
	}
	var out []netip.AddrPort
	var first *Denial
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if seen[a] {
			continue
		}
		seen[a] = true
		if d := pol.Allow.checkAddr(a, port, own, host); d != nil {
			if first == nil {
				first = d
			}
			continue
		}
		out = append(out, netip.AddrPortFrom(a, port))
	}
	if len(out) == 0 {
		if first == nil {
			return nil, nil, fmt.Errorf("cannot resolve %s: no address", host)
		}
		return nil, first, nil
	}
	return out, nil, nil
}

// dial connects to host:port after deciding it; a refusal is a *Denial.
func (e *endpoint) dial(ctx context.Context, pol Policy, host string, port uint16) (net.Conn, error) {
	addrs, d, err := e.decide(ctx, pol, host, port)
	if d != nil {
		return nil, d
	}
	if err != nil {
		return nil, err
	}
	var last error
	for _, ap := range addrs {
		c, err := e.p.dialAddr(ctx, ap)
		if err == nil {
			e.p.log.Debug("egress", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "destination", net.JoinHostPort(host, strconv.Itoa(int(port))), "address", ap.String())
			return c, nil
		}
		last = err
	}
	return nil, dialErr(last)
}

// connect serves CONNECT: a tunnel to the checked destination.
func (e *endpoint) connect(w http.ResponseWriter, r *http.Request, pol Policy, host string, port uint16) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	up, err := e.dial(r.Context(), pol, host, port)
	var d *Denial
	switch {
	case errors.As(err, &d):
		e.deny(w, pol, "CONNECT", dest, d)
		return
	case err != nil:
		e.failed(w, pol, "CONNECT", dest, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		e.answer(w, http.StatusInternalServerError, "cannot tunnel")
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if !e.track(down) {
		return
	}
	defer e.untrack(down)
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	splice(down, buf, up)
}

// splice copies both ways until both directions ended (half-closes passed on).
func splice(down net.Conn, buf *bufio.ReadWriter, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var src io.Reader = down
		if n := buf.Reader.Buffered(); n > 0 {
			src = io.MultiReader(io.LimitReader(buf.Reader, int64(n)), down)
		}
		_, _ = io.Copy(up, src)
		closeWrite(up)
	}()
	_, _ = io.Copy(down, up)
	closeWrite(down)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// forward serves a plain HTTP request by absolute URL.
func (e *endpoint) forward(w http.ResponseWriter, r *http.Request, pol Policy, host string, port uint16) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	// Decide before anything of the request is sent on (the dial decides
	// again, for every connection the transport opens).
	if _, d, _ := e.decide(r.Context(), pol, host, port); d != nil {
		e.deny(w, pol, r.Method, dest, d)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport:     e.transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var d *Denial
			if errors.As(err, &d) {
				e.deny(w, pol, r.Method, dest, d)
				return
			}
			e.failed(w, pol, r.Method, dest, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// listenUnix listens on the unix socket path, going through a descriptor of
// its directory when path is too long for a socket address.
func listenUnix(path string) (*net.UnixListener, error) {
	name := path
	if len(path) >= 100 {
		d, err := os.OpenFile(filepath.Dir(path), os.O_RDONLY|syscallODirectory, 0)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		name = "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + filepath.Base(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// splitHostPort splits "host:port" (or "host" with def as the port; def 0:
// the port is required), lowercasing a name and dropping IPv6 brackets and
// a final dot. Errors: a malformed authority.
func splitHostPort(hp string, def uint16) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		if def == 0 || strings.Count(hp, ":") > 0 && !strings.HasPrefix(hp, "[") {
			return "", 0, fmt.Errorf("bad host:port %q", clipText(hp))
		}
		host, ps = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), strconv.Itoa(int(def))
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("bad port in %q", clipText(hp))
	}
	if _, err := netip.ParseAddr(host); err != nil {
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if host == "" || strings.ContainsAny(host, "/\\@ %") {
			return "", 0, fmt.Errorf("bad host %q", clipText(hp))
		}
	}
	return host, uint16(n), nil
}

func lookupErr(err error) error {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return errors.New("no such host")
		}
		if de.IsTimeout {
			return errors.New("lookup timed out")
		}
		return errors.New(de.Err)
	}
	return err
}

func dialErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

func clipText(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
