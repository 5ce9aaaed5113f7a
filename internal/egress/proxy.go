package egress

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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

	refMu    sync.Mutex
	refusals map[string][]Refusal // by workspace id (refusals.go)
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
