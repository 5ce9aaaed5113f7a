package remotefake

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Fault is an injected failure for the requests it matches.
type Fault struct {
	// Operation is what to match, in the fake's naming of operations (its
	// Inject documents it); "" matches every request.
	Operation string
	// Status, when non-zero, answers the request with it (and the backend's
	// error body) without doing anything.
	Status int
	// Message is the error body's message ("" = the status text).
	Message string
	// Header holds headers of that answer (e.g. a Retry-After the backend
	// sends with it).
	Header map[string]string
	// Body, when set, is that answer's body as it is (a backend's exact
	// answer in another shape than the error writer's, e.g. a proxy's),
	// sent as application/json unless Header names a Content-Type.
	Body string
	// Delay is waited before the request is handled.
	Delay time.Duration
	// Drop closes the connection without an answer after the request took
	// effect (a response lost on the way).
	Drop bool
	// Times is how many requests it applies to (0: one).
	Times int
	hits  int
}

// ErrorWriter answers request r with the backend's error body.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, status int, msg string)

// Ledger records what a fake saw (spec violations, requests per operation)
// and holds its injected faults. Its methods are safe for concurrent use.
type Ledger struct {
	name       string
	log        *slog.Logger
	writeError ErrorWriter

	mu         sync.Mutex
	violations []string
	faults     []*Fault
	requests   map[string]int
}

// NewLedger returns an empty ledger; name ("daytonafake", "e2bfake")
// prefixes its log lines and the messages it answers with, log receives
// every violation, writeError writes the backend's error bodies.
func NewLedger(name string, log *slog.Logger, writeError ErrorWriter) *Ledger {
	return &Ledger{name: name, log: log, writeError: writeError, requests: map[string]int{}}
}

// Violations returns every spec violation seen so far (requests and responses).
func (l *Ledger) Violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.violations...)
}

// Requests returns how many requests each operation got (TakeFault counts them).
func (l *Ledger) Requests() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.requests {
		out[k] = v
	}
	return out
}

// Violation records (and logs as an error) a spec violation.
func (l *Ledger) Violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(l.name+": SPEC VIOLATION", "violation", msg)
	l.mu.Lock()
	l.violations = append(l.violations, msg)
	l.mu.Unlock()
}

// Inject adds a fault; faults apply in the order injected.
func (l *Ledger) Inject(f Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	l.faults = append(l.faults, &f)
}

// ClearFaults removes every fault not yet spent.
func (l *Ledger) ClearFaults() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = nil
}

// TakeFault counts one request of op and returns a copy of the first fault
// matching it (spending one of its Times), or nil.
func (l *Ledger) TakeFault(op string) *Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests[op]++
	for i, f := range l.faults {
		if f.Operation == "" || f.Operation == op {
			f.hits++
			if f.hits >= f.Times {
				l.faults = append(l.faults[:i], l.faults[i+1:]...)
			}
			c := *f
			return &c
		}
	}
	return nil
}

// Apply waits f's delay (nil: none) and answers its status (with its
// headers); true when the request is answered (or its client went away
// during the delay: then nothing is written). A fake that validates its
// answers gives Apply a recorder and Reply the answer like any other.
func (l *Ledger) Apply(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	if f == nil {
		return false
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if f.Status != 0 {
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(f.Status)
		}
		for k, v := range f.Header {
			w.Header().Set(k, v)
		}
		if f.Body != "" {
			if w.Header().Get("Content-Type") == "" {
				w.Header().Set("Content-Type", "application/json")
			}
			w.WriteHeader(f.Status)
			_, _ = io.WriteString(w, f.Body)
			return true
		}
		l.writeError(w, r, f.Status, msg)
		return true
	}
	return false
}

// CheckRequest validates r against v; a violation is recorded and answered
// with 400 (ok false).
func (l *Ledger) CheckRequest(w http.ResponseWriter, r *http.Request, v *Validator) (route *routers.Route, params map[string]string, in *openapi3filter.RequestValidationInput, ok bool) {
	route, params, in, err := v.CheckRequest(r.Context(), r)
	if err != nil {
		l.Violation("%v", err)
		l.writeError(w, r, http.StatusBadRequest, err.Error())
		return nil, nil, nil, false
	}
	return route, params, in, true
}

// Reply validates the recorded response rec to the request of in against
// v, then writes it to w, or, when f says Drop, closes the connection
// without an answer. A violation is recorded and answered with 500.
func (l *Ledger) Reply(w http.ResponseWriter, v *Validator, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder, f *Fault) {
	if err := v.CheckResponse(in.Request.Context(), in, rec); err != nil {
		l.Violation("%v", err)
		l.writeError(w, in.Request, http.StatusInternalServerError, l.name+": "+err.Error())
		return
	}
	if f != nil && f.Drop && Drop(w) {
		return
	}
	for k, vals := range rec.Header() {
		w.Header()[k] = vals
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// Drop closes the client's connection without an answer; false when w
// cannot be hijacked.
func Drop(w http.ResponseWriter) bool {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return true
		}
	}
	return false
}
