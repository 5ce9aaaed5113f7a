package gittest

import (
	"crypto/subtle"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a smart-HTTP git server on loopback: `git http-backend` (run per
// request through net/http/cgi) serving every repository under a root
// directory (GIT_PROJECT_ROOT, GIT_HTTP_EXPORT_ALL=1), optionally behind HTTP
// basic auth. Fetch (upload-pack) and push (receive-pack, http.receivepack=true)
// both work. All methods are safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	root     string
	user     string
	pass     string
	handler  *cgi.Handler
	requests atomic.Int64
	upload   atomic.Int64
	receive  atomic.Int64
	denied   atomic.Int64
	// redirected counts requests answered with a redirect (SetRedirect).
	redirected atomic.Int64

	mu        sync.Mutex
	hook      func(*http.Request) error
	delay     time.Duration
	redirects []redirect
	lfs       *lfsServer
}

// redirect answers requests under from with code and a Location under to.
type redirect struct {
	from, to string
	code     int
}

// NewHTTPServer starts a Server for the repositories under root (an absolute
// directory). A repository at <root>/<path> is served at URL(<path>); a
// non-bare repository at <root>/team/project.git (see InitRepo) is found by
// http-backend through its .git directory. When user is not empty every
// request must carry basic auth user:pass, otherwise it gets 401 with a
// WWW-Authenticate challenge. The server is closed by t.Cleanup.
func NewHTTPServer(t testing.TB, root, user, pass string) *Server {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("gittest: git not found: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatalf("gittest: %v", err)
	}
	home := t.TempDir()
	s := &Server{root: abs, user: user, pass: pass}
	s.handler = &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Dir:  abs,
		Env: []string{
			"GIT_PROJECT_ROOT=" + abs,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + home,
			"XDG_CONFIG_HOME=" + home,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowReachableSHA1InWant",
			"GIT_CONFIG_VALUE_1=true",
		},
		Logger: log.New(io.Discard, "", 0),
		Stderr: io.Discard,
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	lfs := s.lfs
	s.mu.Unlock()
	if lfs != nil && lfs.public(r) {
		lfs.serve(w, r) // object downloads carry the batch response's token
		return
	}
	if s.user != "" {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(s.pass)) != 1 {
			s.denied.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/git-upload-pack") || r.URL.Query().Get("service") == "git-upload-pack":
		s.upload.Add(1)
	case strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack":
		s.receive.Add(1)
	}
	s.mu.Lock()
	hook, delay, redirects := s.hook, s.delay, s.redirects
	s.mu.Unlock()
	for _, rd := range redirects {
		if rest, ok := strings.CutPrefix(r.URL.Path, rd.from); ok && (rest == "" || rest[0] == '/') {
			loc := rd.to + rest
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			s.redirected.Add(1)
			http.Redirect(w, r, loc, rd.code)
			return
		}
	}
	if hook != nil {
		if err := hook(r); err != nil {
			code := http.StatusServiceUnavailable
			var st StatusError
			if errors.As(err, &st) {
				code = st.Code
			}
			http.Error(w, err.Error(), code)
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if lfs != nil && lfs.serve(w, r) {
		return
	}
	s.handler.ServeHTTP(w, r)
}

// URL returns the clone URL of the repository at <root>/<repoPath>, e.g.
// URL("team/project.git") = "http://127.0.0.1:<port>/team/project.git".
func (s *Server) URL(repoPath string) string {
	return s.srv.URL + "/" + strings.TrimPrefix(repoPath, "/")
}

// BaseURL returns "http://127.0.0.1:<port>".
func (s *Server) BaseURL() string { return s.srv.URL }

// Root returns the served directory.
func (s *Server) Root() string { return s.root }

// Requests counts every HTTP request received, including refused ones.
func (s *Server) Requests() int64 { return s.requests.Load() }

// UploadPackRequests counts authorized upload-pack requests (GET
// info/refs?service=git-upload-pack and POST .../git-upload-pack): a clone,
// fetch or ls-remote makes at least one; a cache hit makes none.
func (s *Server) UploadPackRequests() int64 { return s.upload.Load() }

// ReceivePackRequests counts authorized receive-pack (push) requests.
func (s *Server) ReceivePackRequests() int64 { return s.receive.Load() }

// Unauthorized counts requests refused with 401.
func (s *Server) Unauthorized() int64 { return s.denied.Load() }

// StatusError, returned by a hook (SetHook), answers the request with
// HTTP status Code and the text Text.
type StatusError struct {
	// Code is the HTTP status, e.g. 400, 429, 500.
	Code int
	// Text is the response body.
	Text string
}

// Error implements error: the response body.
func (e StatusError) Error() string { return e.Text }

// SetHook installs fn, called for every authorized request before it is
// served (nil removes it). fn may block, e.g. to hold a clone mid-way while a
// test kills the client; it runs on the request's goroutine. When fn returns
// an error the request is answered 503 (a StatusError: its Code) with the
// error text instead of being served (the client git fails and exits).
func (s *Server) SetHook(fn func(r *http.Request) error) {
	s.mu.Lock()
	s.hook = fn
	s.mu.Unlock()
}

// SetDelay delays every authorized request by d before it is served (0
// removes the delay); the wait ends early when the client goes away.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// SetRedirect makes every request for the repository at fromRepo (a path
// as URL takes, e.g. "team/old.git", and everything below it) answer code
// (301, 302, 307 or 308) with a Location naming the same request under
// location: a path on this server ("team/new.git") or an absolute URL (to
// test a move to another host). Requests are checked against redirects in the order
// they were added, after authentication (a private repository's new name
// is only told to who may read it).
func (s *Server) SetRedirect(fromRepo, location string, code int) {
	to := location
	if !strings.Contains(location, "://") {
		to = "/" + strings.Trim(location, "/")
	}
	s.mu.Lock()
	s.redirects = append(s.redirects, redirect{from: "/" + strings.Trim(fromRepo, "/"), to: to, code: code})
	s.mu.Unlock()
}

// RemoveRedirects drops every redirect (the old name then answers 404, as
// it does once its redirect is gone upstream).
func (s *Server) RemoveRedirects() {
	s.mu.Lock()
	s.redirects = nil
	s.mu.Unlock()
}

// Redirected counts requests answered with a redirect.
func (s *Server) Redirected() int64 { return s.redirected.Load() }

// RepoDir returns <root>/<repoPath>: where to create a repository that URL(repoPath) serves.
func (s *Server) RepoDir(repoPath string) string {
	return filepath.Join(s.root, filepath.FromSlash(strings.TrimPrefix(repoPath, "/")))
}
