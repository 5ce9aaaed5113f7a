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
// POST /api/sandbox/{idOrName}/start|stop|archive|recover,
// GET /api/sandbox/{idOrName}/ports/{port}/preview-url|signed-preview-url;
// under the toolbox base /toolbox/{sandboxId}: POST /process/execute,
// POST /files/upload, GET /files/download, POST /files/bulk-upload, POST
// /files/bulk-download, GET /files/info, GET /user-home-dir. Anything else is
// answered 404 and recorded as a violation (the adapter used an endpoint the
// fake does not implement).
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
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
	// MaxDiskGiB, MaxCPU and MaxMemoryGiB are the organization's quotas
	// (0: none): a sandbox's disk counts in every state that consumes disk
	// (started and stopped alike, not archived), its CPU and memory only in
	// those that consume compute (not stopped); a create or a start beyond
	// one is refused with Daytona's 400 "Total … limit exceeded" (quota.go).
	MaxDiskGiB, MaxCPU, MaxMemoryGiB int
	// Logger receives one line per request at debug level and every
	// violation at error level; nil: slog.Default().
	Logger *slog.Logger
}

// Server is one fake Daytona. It is safe for concurrent use.
type Server struct {
	opts    Options
	eng     *engine
	api     *remotefake.Validator
	toolbox *remotefake.Validator
	log     *slog.Logger
	baseURL string
	ln      net.Listener
	life    *remotefake.Lifecycle

	// Ledger holds the spec violations, the requests by operation id and
	// the injected faults (Violations, Requests, Inject, ClearFaults).
	*remotefake.Ledger

	mu        sync.Mutex
	sandboxes map[string]*sbox // by id
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
	api, err := loadValidator("api", apiSpec, apiErrorBody)
	if err != nil {
		return nil, err
	}
	tb, err := loadValidator("toolbox", tbSpec, toolboxErrorBody)
	if err != nil {
		return nil, err
	}
	// DownloadFiles answers multipart/form-data documented as gin.H (an
	// object of additionalProperties), which kin-openapi cannot decode a
	// multipart body into: its parts are checked by the fake's tests.
	tb.SkipResponseBody("DownloadFiles")
	id := randHex(6)
	eng, err := newEngine(opts.Image, id)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, eng: eng, api: api, toolbox: tb, log: log, sandboxes: map[string]*sbox{},
		Ledger: remotefake.NewLedger("daytonafake", log, writeError), life: remotefake.NewLifecycle()}
	s.life.Go(s.lifecycleLoop)
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
	s.life.Serve(ln, s.Handler())
	return s.APIURL(), nil
}

// APIURL is the Daytona API URL of a started fake (…/api).
func (s *Server) APIURL() string { return s.baseURL + "/api" }

// APIKey is the accepted API key.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Close stops serving and removes every container the fake made.
func (s *Server) Close() {
	if !s.life.Close() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.eng.RemoveAll(ctx)
}

// Fault is an injected failure for the requests it matches (Inject); its
// Operation is an operationId (e.g. "createSandbox", "ExecuteCommand",
// "UploadFile").
type Fault = remotefake.Fault

// Handler serves the API under /api and the toolbox under /toolbox/{sandboxId}.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	v, sandboxID, specPath, ok := s.route(w, r)
	if !ok {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		writeError(w, r, http.StatusUnauthorized, "Unauthorized")
		return
	}
	sreq := r.Clone(context.WithValue(r.Context(), originKey{}, origin{toolbox: v == s.toolbox, path: r.URL.RequestURI(), daemonPath: specPath}))
	sreq.URL.Path, sreq.URL.RawPath = specPath, ""
	route, params, in, ok := s.CheckRequest(w, sreq, v)
	if !ok {
		return
	}
	op := route.Operation.OperationID
	s.log.Debug("daytonafake request", "op", op, "method", r.Method, "path", r.URL.Path)
	f := s.TakeFault(op)
	rec := httptest.NewRecorder()
	call := &call{s: s, w: rec, r: sreq, params: params, op: op, sandboxID: sandboxID}
	switch {
	case s.Apply(rec, sreq, f):
		// An injected answer, validated below like the fake's own.
	case v == s.toolbox:
		if !s.toolboxInTime(w, call) {
			return
		}
	default:
		s.handleAPI(call)
	}
	if r.Context().Err() != nil {
		return // the client went away: nothing is answered
	}
	s.Reply(w, v, in, rec, f)
}

// route tells the document of a request and its path in it: /api/… (the
// API) or /toolbox/{sandboxId}/… (the toolbox, sandboxID set). Anything else
// is answered with 404 (ok false; outside both, a violation).
func (s *Server) route(w http.ResponseWriter, r *http.Request) (v *remotefake.Validator, sandboxID, specPath string, ok bool) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		return s.api, "", strings.TrimPrefix(r.URL.Path, "/api"), true
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		rest := strings.TrimPrefix(r.URL.Path, "/toolbox/")
		i := strings.IndexByte(rest, '/')
		if i <= 0 {
			writeError(w, r, http.StatusNotFound, "not found")
			return nil, "", "", false
		}
		return s.toolbox, rest[:i], rest[i:], true
	default:
		s.Violation("request outside the API and the toolbox: %s %s", r.Method, r.URL.Path)
		writeError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
		return nil, "", "", false
	}
}

// toolboxInTime handles a toolbox call, cutting it with 504 after
// Options.RequestTimeout as Daytona's proxy does (false: cut; the work goes
// on in the sandbox).
func (s *Server) toolboxInTime(w http.ResponseWriter, c *call) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.handleToolbox(c)
	}()
	select {
	case <-done:
		return true
	case <-time.After(s.opts.RequestTimeout):
		writeError(w, c.r, http.StatusGatewayTimeout, "upstream request timeout")
		return false
	}
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

func (c *call) error(status int, msg string) { writeError(c.w, c.r, status, msg) }

// origin is where a request came in: the plane (the API, or the toolbox
// through the proxy) and the path as the answering server sees it.
type origin struct {
	toolbox bool
	// path is the request's URL (path and query) as the API sees it.
	path string
	// daemonPath is the toolbox path the daemon sees (the proxy strips
	// /toolbox/{sandboxId}).
	daemonPath string
}

type originKey struct{}

// originOf returns the origin serve recorded on r, else the one its URL
// says.
func originOf(r *http.Request) origin {
	if o, ok := r.Context().Value(originKey{}).(origin); ok {
		return o
	}
	o := origin{path: r.URL.RequestURI(), daemonPath: r.URL.Path}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/toolbox/"); ok {
		o.toolbox = true
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			o.daemonPath = rest[i:]
		}
	}
	return o
}

// writeError answers r with Daytona's error body of its plane: the API's
// AllExceptionsFilter {path, timestamp, statusCode, error, message}
// (apiErrorBody), the toolbox's common-go error middleware {statusCode,
// message, code, timestamp, path, method} (toolboxErrorBody).
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	o := originOf(r)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var body map[string]any
	if o.toolbox {
		body = map[string]any{"statusCode": status, "message": msg, "timestamp": now, "path": o.daemonPath, "method": r.Method}
		if code := toolboxCodes[status]; code != "" {
			body["code"] = code
		}
		w.Header().Set("Content-Type", "application/json")
	} else {
		body = map[string]any{"path": o.path, "timestamp": now, "statusCode": status, "error": http.StatusText(status), "message": msg}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// toolboxCodes are the codes common-go's error middleware gives its error
// types (libs/common-go/pkg/errors/middleware.go:32-131, v0.190.0).
var toolboxCodes = map[int]string{
	http.StatusBadRequest: "BAD_REQUEST", http.StatusUnauthorized: "UNAUTHORIZED", http.StatusForbidden: "FORBIDDEN",
	http.StatusNotFound: "NOT_FOUND", http.StatusRequestTimeout: "REQUEST_TIMEOUT", http.StatusConflict: "CONFLICT",
	http.StatusGone: "GONE", http.StatusUnprocessableEntity: "UNPROCESSABLE_ENTITY", http.StatusInternalServerError: "INTERNAL_SERVER_ERROR",
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
