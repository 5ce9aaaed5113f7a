package fake

import (
	"context"
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

// serveSandbox is the sandbox proxy: a request for port of sandbox id.
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
	switch {
	case b == nil:
		writeError(w, http.StatusBadGateway, "The sandbox "+id+" was not found")
		return
	case st == stPaused:
		writeError(w, http.StatusBadGateway, "The sandbox "+id+" is paused")
		return
	}
	if port != envdPort {
		if !public && r.Header.Get("E2b-Traffic-Access-Token") != traffic {
			writeError(w, http.StatusForbidden, "The sandbox is private: a traffic access token is required")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		ip := s.eng.ip(ctx, cid)
		cancel()
		if ip == "" {
			writeError(w, http.StatusBadGateway, "The sandbox's port "+strconv.Itoa(port)+" cannot be reached")
			return
		}
		target := &url.URL{Scheme: "http", Host: ip + ":" + strconv.Itoa(port)}
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "The sandbox's port "+strconv.Itoa(port)+" is not open: "+err.Error())
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
		writeError(w, http.StatusNotFound, "not found")
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
			writeError(w, http.StatusBadGateway, "envd: "+err.Error())
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
	if s.Apply(w, r, f) {
		return
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.RequestURI = "http", "envd", ""
	resp, err := unixClient(sock).Transport.RoundTrip(out)
	if err != nil {
		writeError(w, http.StatusBadGateway, "envd: "+err.Error())
		return
	}
	defer resp.Body.Close()
	rec := httptest.NewRecorder()
	for k, v := range resp.Header {
		rec.Header()[k] = v
	}
	rec.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(rec, resp.Body); err != nil {
		writeError(w, http.StatusBadGateway, "envd: "+err.Error())
		return
	}
	s.Reply(w, s.envdV, in, rec, f)
}
