// Package fake is a faithful stand-in for E2B (no E2B can be reached from
// the development and CI machines), serving on one listener both planes a
// client of E2B uses:
//
//   - the control plane, E2B's REST API (/sandboxes, /v2/sandboxes,
//     /sandboxes/{id}, …/connect, …/pause, …/resume, …/timeout,
//     …/refreshes), authenticated by X-API-Key. Every request and every
//     response is validated with kin-openapi against the unmodified
//     openapi.yml the runtime's client is generated from (package spec); a
//     mismatch fails loudly: the request is answered 400 (a response is
//     replaced by a 500) and the violation recorded (Violations) for the
//     tests to fail on.
//   - the sandbox plane, routed the way E2B's sandbox proxy routes it: by a
//     Host {port}-{sandbox id}.{domain} (the domain is localhost:PORT, which
//     resolves to the loopback, RFC 6761) or by the E2b-Sandbox-Id and
//     E2b-Sandbox-Port headers. Port 49983 is envd: /files requests and
//     responses are validated against envd.yaml like the control plane, and
//     the Connect services are served by a real envd stand-in (the command
//     ../envd, built from the same protos) running inside the sandbox. Other
//     ports reach the sandbox's own servers (previews), with the traffic
//     token for private sandboxes.
//
// Each sandbox is a container of Options.Image (container.go) whose main
// process is that envd, as every E2B microVM runs envd: commands really run,
// isolated from the host and from each other. Pause is docker pause (the
// cgroup freezer: memory, processes and files stay, as with E2B's memory
// snapshots), connect and resume unpause, a sandbox whose timeout passes is
// paused (autoPause) or killed, DELETE kills. Tests reach behind the API's
// back with Kill and Expire (out-of-band deletion and timeout), Inject
// (faults: a status, a delay, a dropped answer after the call took effect,
// on any control-plane operation or envd path) and Options.StreamLimit (the
// proxy cuts envd streams older than that, as E2B's do).
package fake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
)

// Options configure a fake.
type Options struct {
	// APIKey is the only accepted X-API-Key; "" generates one (APIKey()).
	APIKey string
	// Image is the sandboxes' image (default sandboxcore-test:latest; never pulled).
	Image string
	// Templates are the template ids or aliases a create may name (default:
	// "base"); a reference's tag is not checked.
	Templates []string
	// StreamLimit cuts envd streams (Connect server streams) older than it,
	// like E2B's proxies; 0: never.
	StreamLimit time.Duration
	// KillOnTimeout kills a sandbox whose timeout passes even when it was
	// created with autoPause (E2B accounts without persistence do).
	KillOnTimeout bool
	// RateLimits are the API rate limiter's limits by gin route pattern
	// (e.g. "/sandboxes", "/sandboxes/:sandboxID/timeout"; the key E2B's
	// own configuration uses, shared by the route's methods); a route
	// without one is not limited (E2B's default).
	RateLimits map[string]RateLimit
	// MaxInstanceLength is the team's max instance length (E2B's
	// MaxLengthHours; 0: DefaultMaxInstanceLength): a sandbox's timeout
	// never reaches past it from its start (a create or a resume), a create
	// or connect asking for more is refused, a timeout extension beyond it
	// silently shortened and 400 once it has passed (sandbox.go,
	// keepAliveLocked). E2B counts it in whole hours; a shorter one (tests)
	// is taken as it is, its messages still saying hours.
	MaxInstanceLength time.Duration
	// MaxSandboxes is the team's concurrent sandboxes (E2B's
	// SandboxConcurrency): a create or a resume beyond it is refused 429
	// with E2B's message; 0: no limit.
	MaxSandboxes int
	// Logger receives one line per request at debug level and every
	// violation at error level; nil: slog.Default().
	Logger *slog.Logger
}

// Server is one fake E2B. It is safe for concurrent use.
type Server struct {
	opts    Options
	limits  *limiter
	eng     *engine
	api     *remotefake.Validator
	envdV   *remotefake.Validator
	log     *slog.Logger
	baseURL string
	domain  string
	ln      net.Listener
	life    *remotefake.Lifecycle
	tmp     string

	// Ledger holds the spec violations, the requests by operation ("POST
	// /sandboxes", "envd POST /files", "envd /process.Process/Start", …) and
	// the injected faults (Violations, Requests, Inject, ClearFaults).
	*remotefake.Ledger

	mu         sync.Mutex
	sandboxes  map[string]*sbox
	starting   int // creates under way (startAllowedLocked)
	shortened  int // timeouts cut to the max instance length (Shortened)
	autoPauses int // pauses because a timeout passed (AutoPauses)
}

// DefaultMaxInstanceLength is the max instance length of E2B's default
// tier, 1 hour (packages/db/migrations/20240219190940_add_max_length_hours.sql:8
// of e2b-dev/infra; E2B's SDKs: "1 hour … for Hobby users", 24 for Pro).
const DefaultMaxInstanceLength = time.Hour

// DefaultImage is the sandboxes' image when Options.Image is empty.
const DefaultImage = "sandboxcore-test:latest"

// New loads the specifications, builds the envd stand-in, connects to
// Docker and returns a fake that is not listening yet (Start). Errors: no
// Docker daemon, a missing image, a failing build of envd.
func New(opts Options) (*Server, error) {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.MaxInstanceLength <= 0 {
		opts.MaxInstanceLength = DefaultMaxInstanceLength
	}
	if len(opts.Templates) == 0 {
		opts.Templates = []string{"base"}
	}
	if opts.APIKey == "" {
		opts.APIKey = "e2b_" + randHex(20)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	api, envdV, err := loadValidators()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "e2bfake-")
	if err != nil {
		return nil, err
	}
	bin, err := buildEnvd(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	eng, err := newEngine(opts.Image, randHex(6), bin)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	s := &Server{opts: opts, limits: newLimiter(opts.RateLimits), eng: eng, api: api, envdV: envdV, log: log, tmp: tmp, sandboxes: map[string]*sbox{},
		Ledger: remotefake.NewLedger("e2bfake", log, writeError), life: remotefake.NewLifecycle()}
	s.life.Go(s.lifecycleLoop)
	return s, nil
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves; it returns the API
// URL (E2B_API_URL). Sandboxes' domain is localhost:PORT.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.ln = ln
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s.baseURL = "http://" + ln.Addr().String()
	s.domain = "localhost:" + port
	s.life.Serve(ln, http.HandlerFunc(s.serve))
	return s.APIURL(), nil
}

// APIURL is the API URL of a started fake.
func (s *Server) APIURL() string { return s.baseURL }

// APIKey is the accepted API key.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Domain is the sandboxes' domain (localhost:PORT).
func (s *Server) Domain() string { return s.domain }

// Close stops serving and removes every container the fake made.
func (s *Server) Close() {
	if !s.life.Close() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.eng.RemoveAll(ctx)
	_ = os.RemoveAll(s.tmp)
}

// Fault is an injected failure for the requests it matches (Inject). Its
// Operation is "METHOD /path/{template}" of the control plane (e.g. "POST
// /sandboxes", "GET /sandboxes/{sandboxID}"), "envd METHOD /files", or
// "envd /process.Process/Start" (any envd path); Drop applies to the
// control plane and /files only.
type Fault = remotefake.Fault

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if id, port, ok := s.sandboxRoute(r); ok {
		s.serveSandbox(w, r, id, port)
		return
	}
	if r.Header.Get("X-API-Key") != s.opts.APIKey {
		writeError(w, r, http.StatusUnauthorized, "Invalid API key, it must start with 'e2b_' prefix")
		return
	}
	route, params, in, ok := s.CheckRequest(w, r, s.api)
	if !ok {
		return
	}
	op := r.Method + " " + route.Path
	s.log.Debug("e2bfake request", "op", op, "path", r.URL.Path)
	f := s.TakeFault(op)
	rec := httptest.NewRecorder()
	switch {
	case s.Apply(rec, r, f):
	case !s.limits.allow(rec, route.Path, time.Now()):
		// E2B's rate limiter refused it (limits.go).
	default:
		s.handleAPI(&call{s: s, w: rec, r: r, params: params, op: op})
	}
	if r.Context().Err() != nil {
		return
	}
	s.Reply(w, s.api, in, rec, f) // an injected answer is validated like the fake's own
}

// sandboxRoute tells a request for a sandbox: by the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers, or by a Host {port}-{id}.{domain}.
func (s *Server) sandboxRoute(r *http.Request) (string, int, bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port, err := strconv.Atoi(r.Header.Get("E2b-Sandbox-Port"))
		if err != nil {
			port = 49983
		}
		return id, port, true
	}
	host := strings.ToLower(r.Host)
	sub, ok := strings.CutSuffix(host, "."+s.domain)
	if !ok || s.domain == "" {
		return "", 0, false
	}
	ps, id, ok := strings.Cut(sub, "-")
	port, err := strconv.Atoi(ps)
	if !ok || err != nil || port < 1 || port > 65535 || id == "" {
		return "", 0, false
	}
	return id, port, true
}

// call is one control-plane request being handled.
type call struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	params map[string]string
	op     string
}

func (c *call) json(status int, v any) {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	_ = json.NewEncoder(c.w).Encode(v)
}

func (c *call) error(status int, msg string) { writeError(c.w, c.r, status, msg) }

func (c *call) decode(v any) bool {
	var b bytes.Buffer
	_, _ = b.ReadFrom(c.r.Body)
	if b.Len() == 0 {
		return true
	}
	if err := json.Unmarshal(b.Bytes(), v); err != nil {
		c.error(http.StatusBadRequest, "invalid body: "+err.Error())
		return false
	}
	return true
}

// writeError answers with E2B's error body {"code","message"}
// (packages/shared/pkg/apierrors/apierrors.go:32-44 of e2b-dev/infra).
func writeError(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newSandboxID returns an id like E2B's: "i" and 19 lower-case letters and digits.
func newSandboxID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte{'i'}
	for len(b) < 20 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b = append(b, alphabet[n.Int64()])
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
