package fake

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// envdPort is envd's port in every sandbox.
const envdPort = 49983

// serveSandbox is the sandbox proxy: a request for port of sandbox id. Its
// own answers are E2B's proxy's (writeProxyError): a sandbox that does not
// run — missing, or paused, since this fake's sandboxes never auto-resume —
// is 502 "The sandbox was not found" (the client proxy answers a catalog
// miss whose auto-resume is refused so: packages/client-proxy/internal/
// proxy/proxy.go:76-95 and 116-117, packages/shared/pkg/proxy/template/
// sandbox_not_found.go:24-35 of e2b-dev/infra); a private sandbox's port
// without the traffic token is 403 (traffic_access_token_error.go:30-53); a
// port nothing listens on is 502 (port_closed.go:25-35).
func (s *Server) serveSandbox(w http.ResponseWriter, r *http.Request, id string, port int) {
	// A proxy interleaves reading the request with writing the response:
	// without full duplex, Go's HTTP/1 server drops the rest of a request
	// body once the answer starts (an envd stream that answers before the
	// client's last body bytes were read), the upstream request fails and
	// the stream is cut.
	_ = http.NewResponseController(w).EnableFullDuplex()
	s.mu.Lock()
	b := s.sandboxes[id]
	var st, sock, cid, traffic string
	public := false
	if b != nil {
		st, sock, cid, traffic, public = b.state, filepath.Join(b.sockDir, "envd.sock"), b.container, b.trafficToken, b.public
	}
	s.mu.Unlock()
	if b == nil || st == stPaused {
		writeProxyError(w, id, http.StatusBadGateway, "The sandbox was not found")
		return
	}
	if port != envdPort {
		const header = "e2b-traffic-access-token"
		if !public {
			switch got := r.Header.Get(header); {
			case got == "":
				writeProxyError(w, id, http.StatusForbidden, "Sandbox is secured with traffic access token. Token header '"+header+"' is missing")
				return
			case got != traffic:
				writeProxyError(w, id, http.StatusForbidden, "Sandbox is secured with traffic access token. Provided token in header '"+header+"' is invalid")
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		ip := s.eng.ip(ctx, cid)
		cancel()
		if ip == "" {
			writeProxyError(w, id, http.StatusBadGateway, "The sandbox is running but port is not open")
			return
		}
		target := &url.URL{Scheme: "http", Host: ip + ":" + strconv.Itoa(port)}
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			writeProxyError(w, id, http.StatusBadGateway, "The sandbox is running but port is not open")
		}
		rp.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/files" || strings.HasPrefix(r.URL.Path, "/files/") {
		s.serveFiles(w, r, sock)
		return
	}
	op := "envd " + r.URL.Path
	f := s.TakeFault(op)
	if s.Apply(w, r, f) {
		return
	}
	if r.URL.Path != "/health" && !strings.HasPrefix(r.URL.Path, "/process.Process/") && !strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/") {
		s.Violation("envd: a request to %s %s, which envd does not serve", r.Method, r.URL.Path)
		writeError(w, r, http.StatusNotFound, "not found")
		return
	}
	s.log.Debug("e2bfake envd request", "sandbox", id, "path", r.URL.Path)
	out := r.Clone(r.Context())
	if s.opts.StreamLimit > 0 && strings.HasSuffix(r.URL.Path, "/Start") || s.opts.StreamLimit > 0 && strings.HasSuffix(r.URL.Path, "/Connect") {
		// E2B's proxies cut long streams: the response ends mid-stream.
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.StreamLimit)
		defer cancel()
		out = out.WithContext(ctx)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "envd" },
		Transport:     unixClient(sock).Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeProxyError(w, id, http.StatusBadGateway, "envd: "+err.Error())
		},
	}
	rp.ServeHTTP(w, out)
}

// serveFiles forwards /files to envd, validating the request and the
// response against envd.yaml.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, sock string) {
	route, _, in, ok := s.CheckRequest(w, r, s.envdV)
	if !ok {
		return
	}
	op := "envd " + r.Method + " " + route.Path
	f := s.TakeFault(op)
	rec := httptest.NewRecorder()
	if s.Apply(rec, r, f) {
		if r.Context().Err() == nil {
			s.Reply(w, s.envdV, in, rec, f) // validated like envd's own answers
		}
		return
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.RequestURI = "http", "envd", ""
	resp, err := unixClient(sock).Transport.RoundTrip(out)
	if err != nil {
		writeError(w, r, http.StatusBadGateway, "envd: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		rec.Header()[k] = v
	}
	rec.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(rec, resp.Body); err != nil {
		writeError(w, r, http.StatusBadGateway, "envd: "+err.Error())
		return
	}
	s.Reply(w, s.envdV, in, rec, f)
}

// writeProxyError answers as E2B's sandbox proxy does when it answers
// itself: JSON {"sandboxId","message","code"} to a client that is not a
// browser (packages/shared/pkg/proxy/template/template.go:35-77 of
// e2b-dev/infra).
func writeProxyError(w http.ResponseWriter, id string, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"sandboxId": id, "message": msg, "code": status})
}
