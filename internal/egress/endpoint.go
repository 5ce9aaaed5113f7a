package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

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
