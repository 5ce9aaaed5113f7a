// Package fake is a faithful stand-in for Daytona (no Daytona can be reached
// from the development and CI machines): an HTTP server implementing the
// REST endpoints of the Daytona API and of the in-sandbox toolbox that the
// sandboxcore adapter (internal/runtime/daytona) uses, validating every
// request and every response with kin-openapi against the api/openapi.yaml
// documents shipped inside the generated client modules of the same
// version (SpecPath), and failing loudly on a mismatch: the request is
// answered 400 (or the response replaced by a 500) and the violation is
// recorded (Violations) for the tests to fail on.
//
// Each sandbox is a real Docker container of Options.Image (container.go),
// so commands really execute, and follows Daytona's state machine: creating
// → started ⇄ stopped → archived (start restores it), with the transitional
// states stopping, starting, archiving, restoring and destroying, error on a
// failed transition; auto-stop after AutoStopInterval minutes without
// activity and auto-archive after AutoArchiveInterval minutes stopped
// (Options.Minute scales a minute for tests); deletion out of band
// (DeleteOutOfBand, ExpireOutOfBand); and injected faults (Inject: a status
// such as 500 or 429, a delay, a dropped response after the call took
// effect). Requests a real toolbox proxy would cut (longer than
// Options.RequestTimeout) get 504.
//
// Endpoints: POST/GET /api/sandbox, GET/DELETE /api/sandbox/{idOrName},
// POST /api/sandbox/{idOrName}/start|stop|archive,
// GET /api/sandbox/{idOrName}/ports/{port}/preview-url|signed-preview-url;
// under the toolbox base /toolbox/{sandboxId}: POST /process/execute,
// POST /files/upload, GET /files/download, GET /files/info, GET
// /user-home-dir. Anything else is
// answered 404 and recorded as a violation (the adapter used an endpoint the
// fake does not implement).
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options configure a fake.
type Options struct {
	// APIKey is the only accepted bearer token; "" generates one (APIKey()).
	APIKey string
	// Image is the sandboxes' image (default sandboxcore-test:latest).
	Image string
	// Minute is how long one Daytona minute lasts here (auto-stop, auto-archive);
	// 0 means time.Minute.
	Minute time.Duration
	// TransitionDelay is how long creating, starting, stopping and
	// archiving take (0: 100 ms); restoring from archived takes four times it.
	TransitionDelay time.Duration
	// RequestTimeout cuts longer toolbox requests with 504 (Daytona's proxy
	// and SDK cut at 60 s); 0 means 60 s.
	RequestTimeout time.Duration
	// MaxDiskGiB is the organization's disk quota: the disk of every sandbox
	// not archived counts (started and stopped alike); a create beyond it is
	// refused with Daytona's 400 "Total disk limit exceeded". 0: no quota.
	MaxDiskGiB int
	// Logger receives one line per request at debug level and every
	// violation at error level; nil: slog.Default().
	Logger *slog.Logger
}

// Server is one fake Daytona. It is safe for concurrent use.
type Server struct {
	opts    Options
	eng     *engine
	api     *validator
	toolbox *validator
	log     *slog.Logger
	baseURL string
	ln      net.Listener
	srv     *http.Server

	mu         sync.Mutex
	sandboxes  map[string]*sbox // by id
	violations []string
	faults     []*Fault
	requests   map[string]int // by operation id
	stop       chan struct{}
	wg         sync.WaitGroup
}

// Default values.
const (
	DefaultImage = "sandboxcore-test:latest"
	// DefaultDiskGiB is a sandbox's disk when the create request names none.
	DefaultDiskGiB = 10
)

// New loads the two OpenAPI documents, connects to Docker and returns a
// fake that is not listening yet (Start, or Handler for a server of your
// own). Errors: a missing document or image, no Docker daemon.
func New(opts Options) (*Server, error) {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Minute <= 0 {
		opts.Minute = time.Minute
	}
	if opts.TransitionDelay <= 0 {
		opts.TransitionDelay = 100 * time.Millisecond
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.APIKey == "" {
		opts.APIKey = "dtn_fake_" + randHex(16)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	apiSpec, err := SpecPath(APIModule)
	if err != nil {
		return nil, err
	}
	tbSpec, err := SpecPath(ToolboxModule)
	if err != nil {
		return nil, err
	}
	api, err := loadValidator("api", apiSpec)
	if err != nil {
		return nil, err
	}
	tb, err := loadValidator("toolbox", tbSpec)
	if err != nil {
		return nil, err
	}
	id := randHex(6)
	eng, err := newEngine(opts.Image, id)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, eng: eng, api: api, toolbox: tb, log: log, sandboxes: map[string]*sbox{},
		requests: map[string]int{}, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.lifecycleLoop()
	return s, nil
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves; it returns the API
// URL (DAYTONA_API_URL).
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.ln = ln
	s.baseURL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s.APIURL(), nil
}

// APIURL is the Daytona API URL of a started fake (…/api).
func (s *Server) APIURL() string { return s.baseURL + "/api" }

// APIKey is the accepted API key.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Close stops serving and removes every container the fake made.
func (s *Server) Close() {
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		_ = s.srv.Close()
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.eng.removeAll(ctx)
}

// Violations returns every spec violation seen so far (requests and responses).
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Requests returns how many requests each operation (by operationId) got.
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

func (s *Server) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Error("daytonafake: SPEC VIOLATION", "violation", msg)
	s.mu.Lock()
	s.violations = append(s.violations, msg)
	s.mu.Unlock()
}

// Fault is an injected failure for the requests it matches.
type Fault struct {
	// Operation is the operationId to match (e.g. "createSandbox",
	// "ExecuteCommand", "UploadFile"); "" matches every request.
	Operation string
	// Status, when non-zero, answers the request with it (and a Daytona
	// error body) without doing anything.
	Status int
	// Message is the error body's message ("" = the status text).
	Message string
	// Delay is waited before the request is handled.
	Delay time.Duration
	// Drop closes the connection without an answer after the request took
	// effect (a response lost on the way).
	Drop bool
	// Times is how many requests it applies to (0: one).
	Times int
	hits  int
}

// Inject adds a fault; faults apply in the order injected.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault not yet spent.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) takeFault(op string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Operation == "" || f.Operation == op {
			f.hits++
			if f.hits >= f.Times {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			c := *f
			return &c
		}
	}
	return nil
}

// Handler serves the API under /api and the toolbox under /toolbox/{sandboxId}.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var v *validator
	var specPath, sandboxID string
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		v, specPath = s.api, strings.TrimPrefix(r.URL.Path, "/api")
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		rest := strings.TrimPrefix(r.URL.Path, "/toolbox/")
		i := strings.IndexByte(rest, '/')
		if i <= 0 {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		v, sandboxID, specPath = s.toolbox, rest[:i], rest[i:]
	default:
		s.violation("request outside the API and the toolbox: %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		writeError(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	sreq := r.Clone(r.Context())
	sreq.URL.Path, sreq.URL.RawPath = specPath, ""
	route, params, in, err := v.checkRequest(r.Context(), sreq)
	if err != nil {
		s.violation("%v", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	op := route.Operation.OperationID
	s.mu.Lock()
	s.requests[op]++
	s.mu.Unlock()
	s.log.Debug("daytonafake request", "op", op, "method", r.Method, "path", r.URL.Path)

	f := s.takeFault(op)
	if f != nil && f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f != nil && f.Status != 0 {
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(f.Status)
		}
		writeError(w, f.Status, msg)
		return
	}
	rec := httptest.NewRecorder()
	call := &call{s: s, w: rec, r: sreq, params: params, op: op, sandboxID: sandboxID}
	if v == s.toolbox {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.handleToolbox(call)
		}()
		select {
		case <-done:
		case <-time.After(s.opts.RequestTimeout):
			// The proxy cuts the request; the work goes on in the sandbox.
			writeError(w, http.StatusGatewayTimeout, "upstream request timeout")
			return
		}
	} else {
		s.handleAPI(call)
	}
	if r.Context().Err() != nil {
		return // the client went away: nothing is answered
	}
	if err := v.checkResponse(r.Context(), in, rec); err != nil {
		s.violation("%v", err)
		writeError(w, http.StatusInternalServerError, "daytonafake: "+err.Error())
		return
	}
	if f != nil && f.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	for k, vals := range rec.Header() {
		w.Header()[k] = vals
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// call is one request being handled.
type call struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	params    map[string]string
	op        string
	sandboxID string
}

func (c *call) json(status int, v any) {
	c.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	c.w.WriteHeader(status)
	_ = json.NewEncoder(c.w).Encode(v)
}

func (c *call) error(status int, msg string) { writeError(c.w, status, msg) }

// writeError answers with Daytona's error body (apps/api AllExceptionsFilter).
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"statusCode": status, "error": http.StatusText(status), "message": msg,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
