package egress_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/daemon"
)

// BenchmarkHTTPGet measures what the limited network adds to one HTTP GET
// (docs/BENCHMARKS.md "Egress proxy"): the same GET of a 1 KiB answer from
// a server on the host's loopback, once direct (the raw baseline) and once
// the way a command of a limited runtime makes it — to the supervisor's
// forwarder on loopback TCP, through the unix socket to the worker's egress
// proxy, whose policy check (an allow entry by address and port) and dial
// reach the server. Plain HTTP goes through the proxy's forwarding; HTTPS
// through a CONNECT tunnel (TLS end to end, as a package registry's). A new
// connection per GET (keep-alive off): a tool's first request, the worst case.
func BenchmarkHTTPGet(b *testing.B) {
	body := make([]byte, 1024)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h)
	defer secure.Close()

	p := egress.New(egress.Options{})
	defer p.Close()
	sock := filepath.Join(b.TempDir(), "egress.sock")
	var allow []string
	for _, s := range []*httptest.Server{plain, secure} {
		u, _ := url.Parse(s.URL)
		allow = append(allow, u.Host)
	}
	rules, err := egress.ParseRules(allow)
	require.NoError(b, err)
	require.NoError(b, p.Attach(egress.Policy{WorkspaceID: "ws-bench", RuntimeID: "rt-bench", Allow: rules}, sock))
	fwd, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer fwd.Close()
	go daemon.ForwardEgress(fwd, sock)
	proxyURL := &url.URL{Scheme: "http", Host: fwd.Addr().String()}

	client := func(viaProxy bool) *http.Client {
		tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}
		if viaProxy {
			tr.Proxy = http.ProxyURL(proxyURL)
		}
		return &http.Client{Transport: tr}
	}
	get := func(b *testing.B, c *http.Client, u string) {
		for b.Loop() {
			resp, err := c.Do((&http.Request{Method: http.MethodGet, URL: mustURL(u), Header: http.Header{}}).WithContext(context.Background()))
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n != int64(len(body)) {
				b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
			}
		}
	}
	b.Run("http/direct", func(b *testing.B) { get(b, client(false), plain.URL+"/x") })
	b.Run("http/proxy", func(b *testing.B) { get(b, client(true), plain.URL+"/x") })
	b.Run("https/direct", func(b *testing.B) { get(b, client(false), secure.URL+"/x") })
	b.Run("https/proxy", func(b *testing.B) { get(b, client(true), secure.URL+"/x") })
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
