package replica

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The skeleton every remote provider (Daytona, E2B) shares around its own
// API calls: the table of its runtime handles, the transport that carries
// its API key, its capabilities and its Create. What a backend names,
// calls and maps stays in its package.

// Handles is a remote provider's table of runtime handles: one R per
// runtime id, made on first use, so that every call about a runtime meets
// the same handle (its locks, its spec and replica). The zero value is an
// empty table; it is safe for concurrent use.
type Handles[R any] struct {
	mu sync.Mutex
	m  map[string]R
}

// For returns the handle of runtime id, made by create (called under the
// table's lock, at most once per id until Drop) when the table has none.
func (h *Handles[R]) For(id string, create func(id string) R) R {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rt, ok := h.m[id]; ok {
		return rt
	}
	if h.m == nil {
		h.m = map[string]R{}
	}
	rt := create(id)
	h.m[id] = rt
	return rt
}

// Drop forgets the handle of runtime id (its sandbox and host state were
// deleted); the next For makes a new one. An unknown id is ignored.
func (h *Handles[R]) Drop(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, id)
}

// HeaderTransport is the http.RoundTripper of a remote backend's API: it
// sets one header (the API key) on a clone of each request, adds nothing
// else and passes it on. String and GoString name the transport and never
// print the header's value.
type HeaderTransport struct {
	name, header, value string
	next                http.RoundTripper
}

// NewHeaderTransport returns the transport that sets header to value on
// every request sent through next (e.g. "Authorization", "Bearer <key>");
// name is what String prints before "(<redacted>)" (e.g. "daytona-auth").
func NewHeaderTransport(name, header, value string, next http.RoundTripper) *HeaderTransport {
	return &HeaderTransport{name: name, header: header, value: value, next: next}
}

// RoundTrip sends a clone of r carrying the header through the next
// transport; its answer and error are the next transport's.
func (t *HeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.header, t.value)
	return t.next.RoundTrip(r)
}

// String is the transport's name and "(<redacted>)", never the value.
func (t *HeaderTransport) String() string { return t.name + "(<redacted>)" }

// GoString is String: %#v never prints the value either.
func (t *HeaderTransport) GoString() string { return t.String() }

// NoRedirect is the CheckRedirect of every client carrying a key or a
// token: it refuses to follow a redirect (the response is returned as it
// is), so that no credential follows one elsewhere.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Capabilities are those of a runtime holding a replica in a remote
// sandbox: isolated (the sandbox is another machine), preview URLs (the
// backend serves the sandbox's ports); one network for the whole sandbox
// (PerCommandNetwork false), no host mounts (a replica of the workdir
// only) and no snapshots (a replica holds nothing the workspace lacks).
func Capabilities() sandbox.RuntimeCapabilities {
	return sandbox.RuntimeCapabilities{Isolated: true, PreviewURL: true}
}

// CreateFlow is the Create of a remote provider, R being its runtime
// handle; the funcs are the backend's parts.
type CreateFlow[R sandbox.Runtime] struct {
	// Kind prefixes the errors ("daytona", "e2b").
	Kind string
	// ValidID checks a runtime id (sandboxapi.ErrInvalidArgument).
	ValidID func(id string) error
	// Handle returns the one handle of a runtime id and its spec and
	// replica (the provider's Handles).
	Handle func(id string) (R, *SpecReplica)
	// Ensure makes the handle's sandbox exist and run (created, started,
	// resumed, waited for).
	Ensure func(ctx context.Context, rt R) error
	// Transport is the replica's Transport over the handle's sandbox.
	Transport func(rt R) Transport
}

// Create returns the runtime of spec: it checks the id (ValidID) and the
// workdir (absolute), records spec on the runtime's handle (also on disk:
// SpecReplica.Set), makes its sandbox exist and run (Ensure) and, when the
// replica was never synced, makes it now, so that the first command pays
// nothing extra. Errors: ValidID's; sandboxapi.ErrInvalidArgument
// ("<kind>: the workdir must be absolute"; a spec without a workspace
// mount at its workdir, from Set); Ensure's; Sync's.
func (f CreateFlow[R]) Create(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	if err := f.ValidID(spec.ID); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(spec.Workdir, "/") {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: the workdir must be absolute", f.Kind)
	}
	rt, held := f.Handle(spec.ID)
	if err := held.Set(spec); err != nil {
		return nil, err
	}
	if err := f.Ensure(ctx, rt); err != nil {
		return nil, err
	}
	if rep := held.Replica(); rep != nil && !rep.Status().Synced {
		// The replica is made now, so that the first command pays nothing extra.
		if _, err := rep.Sync(ctx, f.Transport(rt)); err != nil {
			return nil, err
		}
	}
	return rt, nil
}
