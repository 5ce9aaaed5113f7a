// Package e2b is the E2B runtime (kind "e2b"): each runtime is an E2B
// sandbox (a Firecracker microVM) holding a replica of the workspace
// (internal/runtime/replica; docs/DESIGN.md "The three things",
// docs/SECURITY.md "Remote runtimes"), driven with clients generated from
// E2B's own specifications (spec/README.md): the control-plane REST API
// (package api, oapi-codegen), envd's HTTP /files (package envdapi) and
// envd's Connect services process.Process and filesystem.Filesystem
// (packages envd/..., buf).
//
// # Sandboxes
//
// E2B names sandboxes itself, so a runtime's sandbox is found by its id
// recorded on the host (Options.StateDir/<runtime id>/sandbox.json, 0600: it
// holds the envd access token) and, when that record is missing or stale,
// by its metadata: MetaManagedBy=ManagedByValue, MetaWorkspace, MetaRuntime
// and MetaDeployment (plus RuntimeSpec.Labels). It is created from
// Options.Template with Options.Timeout, autoPause (a sandbox whose timeout
// passes is paused, not killed: memory, processes and files are kept),
// secure (envd requires the access token), private traffic (previews need the
// traffic token), the network of the spec, and no environment variables from
// the worker (docs/SECURITY.md). Create is idempotent (a create whose answer
// was lost is adopted through the metadata).
//
// Lifecycle: connect resumes a paused sandbox (and extends its timeout);
// Stop (hibernate) = pause, which keeps the filesystem and memory, after the
// commands in flight were killed and what the sandbox changed was brought
// back; Destroy = DELETE (kill). The timeout is refreshed while the runtime
// is used and extended for a command that needs longer, never past the end
// of the sandbox's instance: E2B runs a sandbox at most its team's max
// instance length (Options.MaxInstanceLength) from its start or resume, so a
// command runs only in an instance with room for its whole timeout — the
// sandbox is paused and resumed first when the current one has not — and
// one whose timeout no instance can hold is refused (instance.go). States: running →
// running, paused → stopped, no sandbox (killed, expired without autoPause,
// deleted) → missing.
//
// A sandbox that vanished (killed when its timeout passed, deleted out of
// band) is created again on the next use of its runtime and the replica
// re-synced from the host (every file, a full bundle): nothing is lost
// (Runtime.Replica reports how often that happened).
//
// # Background processes
//
// Processes a command leaves running (its own session, e.g. `setsid srv &`)
// live on in the sandbox across commands and across hibernation: pause
// freezes them with the microVM's memory and they continue on resume. A
// background-process capability maps one to one onto envd's process API:
// start = process.Process/Start with a tag and no deadline (the process
// outlives its stream), list = List (tags and pids), logs = Connect by tag
// (output from then on; a file the process writes for what came before),
// stop = SendSignal SIGTERM then SIGKILL. Exec uses exactly these calls.
//
// # Network (RuntimeSpec.Network, docs/SECURITY.md "Network modes")
//
// One network for the whole sandbox, set when it is created (a command
// cannot choose another: Capabilities().PerCommandNetwork is false). "none"
// → allow_internet_access false and denyOut 0.0.0.0/0; "limited" → egress
// denied (denyOut 0.0.0.0/0) except allowOut: the spec's allow-list as E2B
// takes it (egress.ForRemote: a name entry becomes the domain "example.com"
// or "*.example.com", which E2B itself matches; an IP or CIDR stays one;
// ports are dropped, so an entry opens every port of its destination; an
// address entry covering a metadata address is left out), then
// Options.AllowOut; with nothing to allow, allow_internet_access false too;
// "default" → E2B's default network. E2B does the resolving and the
// checking: the egress proxy's rules (public addresses only for names, the
// host's own addresses) are E2B's business there.
//
// # Credentials
//
// The API key goes in the X-API-Key header of each control-plane request
// and nowhere else: never a log line, an error, a sandbox's environment, a
// command's argv or Temporal's history. The envd access token and the
// traffic token (per sandbox, from E2B) stay in the host record and in the
// headers of requests to that sandbox.
package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/api"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kind is the RuntimeProvider kind string of this backend.
const Kind = "e2b"

// Metadata keys on every sandbox this package creates.
const (
	MetaManagedBy  = "managed-by"
	ManagedByValue = "sandboxcore"
	MetaWorkspace  = "sandboxcore.workspace"
	MetaRuntime    = "sandboxcore.runtime"
	MetaDeployment = "sandboxcore.deployment"
)

// Defaults.
const (
	// DefaultAPIURL is E2B's public control-plane API (E2B_API_URL).
	DefaultAPIURL = "https://api.e2b.app"
	// DefaultTemplate is E2B's base template (E2B_TEMPLATE).
	DefaultTemplate = "base"
	// DefaultTimeout is a sandbox's time to live after its last use
	// (E2B_SANDBOX_TIMEOUT); when it passes, E2B pauses the sandbox.
	DefaultTimeout = 15 * time.Minute
	// MaxTimeout is the longest timeout E2B accepts (24 h, Pro tier).
	MaxTimeout = 24 * time.Hour
	// DefaultMaxInstanceLength is how long a sandbox may run from its start
	// (a create or a resume) before E2B pauses it whatever its timeout
	// (E2B_MAX_INSTANCE_LENGTH): 1 h, the length of E2B's default tier
	// (Hobby; packages/db/migrations/20240219190940_add_max_length_hours.sql:8
	// of e2b-dev/infra). Pro teams have 24 h.
	DefaultMaxInstanceLength = time.Hour
	// DefaultUser is the sandbox user envd runs commands as (E2B's templates: "user").
	DefaultUser = "user"
	// DefaultKeepalive is the Keepalive-Ping-Interval asked of envd's streams
	// (E2B's SDKs: 50 s); a stream silent for three intervals is taken as dead
	// and the process is reconnected to.
	DefaultKeepalive = 50 * time.Second
	// EnvdPort is envd's port in every sandbox.
	EnvdPort = 49983
	// apiTimeout bounds one control-plane or envd call that does not follow a command.
	apiTimeout = 60 * time.Second
)

// Options configure a Provider.
type Options struct {
	// APIURL is E2B's API (E2B_API_URL; "" = DefaultAPIURL). Sandboxes are
	// reached at {scheme}://{port}-{sandbox id}.{sandbox domain}, the scheme
	// being the API URL's (https for E2B; http only for a local stand-in).
	APIURL string
	// APIKey authenticates every control-plane call (E2B_API_KEY or E2B_API_KEY_FILE).
	APIKey string
	// Template is the template sandboxes are created from (E2B_TEMPLATE; "" = DefaultTemplate).
	Template string
	// Timeout is the sandboxes' time to live after their last use
	// (E2B_SANDBOX_TIMEOUT; 0 = DefaultTimeout; at most MaxInstanceLength),
	// in whole seconds.
	Timeout time.Duration
	// MaxInstanceLength is the team's max instance length
	// (E2B_MAX_INSTANCE_LENGTH, whole hours there; 0 =
	// DefaultMaxInstanceLength; from 10 s, for tests, to MaxTimeout): E2B never lets a sandbox run longer than this from its
	// start (a create or a resume) and silently shortens any timeout that
	// would reach past it. The runtime never asks for more, and runs a
	// command only in an instance that has room for the command's whole
	// timeout: see "Max instance length" in the package documentation.
	MaxInstanceLength time.Duration
	// AllowOut are the egress destinations of the "limited" network mode.
	AllowOut []string
	// User is the sandbox user commands run as ("" = DefaultUser).
	User string
	// Deployment identifies this worker host among the users of the same
	// E2B team (SANDBOX_HOST_ID): every sandbox carries it, and only this
	// deployment's sandboxes are listed or deleted.
	Deployment string
	// StateDir is a host directory for the sandbox records and the replicas' sync states.
	StateDir string
	// Git is the host's git runner (bundles of the workspaces' repositories).
	Git *gitx.Runner
	// Keepalive is the envd stream keepalive interval (0 = DefaultKeepalive).
	Keepalive time.Duration
	// HTTPClient, when set, carries every request (tests); the keys and
	// tokens are still added per request.
	HTTPClient *http.Client
	// Logger receives the provider's log (never a key or token); nil: slog.Default().
	Logger *slog.Logger
}

// Provider creates and finds E2B runtimes. It is safe for concurrent use.
type Provider struct {
	opts   Options
	api    *api.ClientWithResponses
	scheme string
	base   http.RoundTripper // no credentials: envd requests add their own
	log    *slog.Logger

	runtimes replica.Handles[*Runtime]
	// guard is kept off the end of an instance (the clocks of E2B and
	// this host, the latency of its calls); collect is what a command
	// needs in the instance beyond its timeout (its result collected).
	guard, collect time.Duration
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// New returns a provider. Errors: sandboxapi.ErrInvalidArgument naming the
// missing or malformed option (hostworker names the variable).
func New(opts Options) (*Provider, error) {
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	u, err := url.Parse(opts.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: the API URL must be an http(s) URL without credentials, query or fragment")
	}
	if opts.APIKey == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: no API key")
	}
	if strings.ContainsAny(opts.APIKey, "\r\n\x00") {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: the API key holds a control character")
	}
	if opts.Template == "" {
		opts.Template = DefaultTemplate
	}
	if !templateRE.MatchString(opts.Template) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: template %q is not a template id or alias", sandboxapi.Clip(opts.Template, 80))
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Timeout < time.Second || opts.Timeout > MaxTimeout {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: the sandbox timeout must be from 1s to %v", MaxTimeout)
	}
	if opts.MaxInstanceLength == 0 {
		opts.MaxInstanceLength = DefaultMaxInstanceLength
	}
	if opts.MaxInstanceLength < 10*time.Second || opts.MaxInstanceLength > MaxTimeout {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: the max instance length must be from 10s to %v", MaxTimeout)
	}
	if opts.Timeout > opts.MaxInstanceLength {
		// E2B refuses it: 400 "Timeout cannot be greater than N hours"
		// (packages/api/internal/handlers/timeout_helper.go:30-35).
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: the sandbox timeout %v exceeds the max instance length %v (E2B refuses a longer one)",
			opts.Timeout, opts.MaxInstanceLength)
	}
	opts.Timeout = opts.Timeout.Truncate(time.Second)
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if !userRE.MatchString(opts.User) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: user %q is not a user name", sandboxapi.Clip(opts.User, 40))
	}
	if opts.Deployment == "" || opts.StateDir == "" || opts.Git == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: Deployment, StateDir and Git are required")
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = DefaultKeepalive
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var base http.RoundTripper
	if opts.HTTPClient != nil && opts.HTTPClient.Transport != nil {
		base = opts.HTTPClient.Transport
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = localhostDialer(t.DialContext)
		base = t
	}
	// The API key goes to control-plane requests only, and no redirect is
	// followed: no key or token may follow one elsewhere.
	apiKey := replica.NewHeaderTransport("e2b-api-key", "X-API-Key", opts.APIKey, base)
	hc := &http.Client{Transport: apiKey, CheckRedirect: replica.NoRedirect}
	c, err := api.NewClientWithResponses(strings.TrimSuffix(opts.APIURL, "/"), api.WithHTTPClient(hc),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("User-Agent", "sandboxcore")
			return nil
		}))
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrInvalidArgument, err, "e2b: API client")
	}
	return &Provider{opts: opts, api: c, scheme: u.Scheme, base: base, log: log,
		guard: min(time.Minute, opts.MaxInstanceLength/20), collect: min(2*time.Minute, opts.MaxInstanceLength/10)}, nil
}

var (
	templateRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./:-]{0,127}$`)
	userRE     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
)

// localhostDialer resolves "localhost" and every name under ".localhost" to
// the loopback address (RFC 6761 section 6.3), which Go's resolver does not
// do: a local E2B stand-in whose sandbox domain is localhost:PORT (the fake)
// is then reached at {port}-{id}.localhost:PORT exactly like E2B's own
// {port}-{id}.e2b.app.
func localhostDialer(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			h := strings.ToLower(strings.TrimSuffix(host, "."))
			if h == "localhost" || strings.HasSuffix(h, ".localhost") {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
		}
		return next(ctx, network, addr)
	}
}

// Kind returns "e2b".
func (p *Provider) Kind() string { return Kind }

// Capabilities: isolated (a remote microVM), preview URLs; snapshots are
// not offered (a replica holds nothing the workspace lacks):
// replica.Capabilities.
func (p *Provider) Capabilities() sandbox.RuntimeCapabilities { return replica.Capabilities() }

// runtimeFor returns the one handle of a runtime id.
func (p *Provider) runtimeFor(id string) *Runtime {
	return p.runtimes.For(id, func(id string) *Runtime {
		rt := &Runtime{p: p, id: id}
		rt.held = replica.SpecReplica{Kind: Kind, ID: id, StateDir: p.stateDir(id), RemoteState: rt.remoteState(), Git: p.opts.Git, Log: p.log}
		return rt
	})
}

// Create returns the runtime of spec, creating its sandbox when missing
// (resuming it when paused) and making the replica. Errors:
// sandboxapi.ErrInvalidArgument (a spec without a workspace mount at its
// workdir), the kinds of mapHTTP and mapConnect. The steps are
// replica.CreateFlow's.
func (p *Provider) Create(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	return replica.CreateFlow[*Runtime]{
		Kind:    Kind,
		ValidID: validID,
		Handle: func(id string) (*Runtime, *replica.SpecReplica) {
			rt := p.runtimeFor(id)
			return rt, &rt.held
		},
		Ensure: func(ctx context.Context, rt *Runtime) error {
			_, err := rt.ensure(ctx)
			return err
		},
		Transport: (*Runtime).transport,
	}.Create(ctx, spec)
}

// Get returns an existing runtime (running or paused) or sandboxapi.ErrNotFound.
func (p *Provider) Get(ctx context.Context, id string) (sandbox.Runtime, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	rt := p.runtimeFor(id)
	_ = rt.held.Load()
	st, err := rt.State(ctx)
	if err != nil {
		return nil, err
	}
	if st == sandbox.RuntimeMissing {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: runtime %s does not exist", id)
	}
	return rt, nil
}

// RuntimeReplica returns the replica state of runtime id as this host
// records it (no call to E2B; sandboxapi.RuntimeReplica, with the sync
// conflicts), false when this host has no state of that runtime (never
// created here, or destroyed).
func (p *Provider) RuntimeReplica(id string) (sandboxapi.RuntimeReplica, bool) {
	if validID(id) != nil {
		return sandboxapi.RuntimeReplica{}, false
	}
	return p.runtimeFor(id).held.Recorded()
}

// List returns this deployment's runtimes (running and paused) whose
// metadata include labels. Errors: mapHTTP's.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]sandbox.RuntimeSummary, error) {
	items, err := p.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.RuntimeSummary, 0, len(items))
	for _, it := range items {
		md := metadataOf(it.Metadata)
		out = append(out, sandbox.RuntimeSummary{ID: md[MetaRuntime], State: stateOf(it.State), Labels: md})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func metadataOf(m *api.SandboxMetadata) map[string]string {
	out := map[string]string{}
	if m != nil {
		for k, v := range *m {
			out[k] = v
		}
	}
	return out
}

// list returns this deployment's sandboxes whose metadata include labels
// (GET /v2/sandboxes, every page, running and paused).
func (p *Provider) list(ctx context.Context, labels map[string]string) ([]api.ListedSandbox, error) {
	want := map[string]string{MetaManagedBy: ManagedByValue, MetaDeployment: p.opts.Deployment}
	for k, v := range labels {
		want[k] = v
	}
	q := url.Values{}
	for k, v := range want {
		q.Set(k, v)
	}
	md := q.Encode() // "k=v&k2=v2", each key and value URL-encoded (the spec's form)
	states := []api.SandboxState{api.Running, api.Paused}
	var out []api.ListedSandbox
	next := ""
	for page := 0; page < 1000; page++ {
		var res *api.GetV2SandboxesResponse
		err := p.retry(ctx, "list sandboxes", func(ctx context.Context) error {
			params := &api.GetV2SandboxesParams{Metadata: &md, State: &states, Limit: ptr(int32(100))}
			if next != "" {
				params.NextToken = &next
			}
			var err error
			res, err = p.api.GetV2SandboxesWithResponse(ctx, params)
			return p.mapResp(ctx, res, err, "list sandboxes")
		})
		if err != nil {
			return nil, err
		}
		if res.JSON200 == nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: list sandboxes: no body")
		}
		for _, it := range *res.JSON200 {
			md := metadataOf(it.Metadata)
			if md[MetaManagedBy] != ManagedByValue || md[MetaDeployment] != p.opts.Deployment || validID(md[MetaRuntime]) != nil {
				continue // E2B filters already; a sandbox that is not ours is never touched
			}
			out = append(out, it)
		}
		next = res.HTTPResponse.Header.Get("X-Next-Token")
		if next == "" {
			break
		}
	}
	return out, nil
}

// findByRuntime returns the sandbox of runtime id found through its metadata, nil when none.
func (p *Provider) findByRuntime(ctx context.Context, id string) (*api.ListedSandbox, error) {
	items, err := p.list(ctx, map[string]string{MetaRuntime: id})
	if err != nil {
		return nil, err
	}
	for i := range items {
		if metadataOf(items[i].Metadata)[MetaRuntime] == id {
			return &items[i], nil
		}
	}
	return nil, nil
}

// Destroy kills the runtime's sandbox (a missing one is success) and
// forgets the replica's host state; never the workspace. A sandbox that may
// hold changes not yet brought back (it was not hibernated by Stop) is
// synced first (resumed when paused); if that fails, it is kept and the
// error returned, so nothing is lost.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	rt := p.runtimeFor(id)
	_ = rt.held.Load()
	return rt.destroy(ctx)
}

// getSandbox returns the sandbox sbID (GET /sandboxes/{id}), nil when E2B
// does not know it (killed, deleted). A sandbox without this deployment's
// metadata is sandboxapi.ErrConflict.
func (p *Provider) getSandbox(ctx context.Context, sbID string) (*api.SandboxDetail, error) {
	var res *api.GetSandboxesSandboxIDResponse
	err := p.retry(ctx, "get sandbox "+sbID, func(ctx context.Context) error {
		var err error
		res, err = p.api.GetSandboxesSandboxIDWithResponse(ctx, sbID)
		return p.mapResp(ctx, res, err, "get sandbox %s", sbID)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if res.JSON200 == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: get sandbox %s: no body", sbID)
	}
	md := metadataOf(res.JSON200.Metadata)
	if md[MetaManagedBy] != ManagedByValue || md[MetaDeployment] != p.opts.Deployment {
		return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "e2b: sandbox %s is not this deployment's", sbID)
	}
	return res.JSON200, nil
}

// killSandbox deletes a sandbox; one E2B does not know is success.
func (p *Provider) killSandbox(ctx context.Context, sbID string) error {
	err := p.retry(ctx, "kill sandbox "+sbID, func(ctx context.Context) error {
		res, err := p.api.DeleteSandboxesSandboxIDWithResponse(ctx, sbID)
		return p.mapResp(ctx, res, err, "kill sandbox %s", sbID)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil
	}
	return err
}

// retry runs fn with its own call timeout (apiTimeout), again (up to three
// tries) while it fails transiently or is rate limited (replica.Retrier).
func (p *Provider) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	return replica.Retrier{Kind: Kind, Log: p.log, CallTimeout: apiTimeout}.Do(ctx, what, fn)
}

// stateOf maps E2B's state onto a runtime state (package documentation).
func stateOf(s api.SandboxState) sandbox.RuntimeState {
	switch s {
	case api.Running:
		return sandbox.RuntimeRunning
	case api.Paused:
		return sandbox.RuntimeStopped
	}
	return sandbox.RuntimeError
}

// ErrTemplateNotFound is wrapped by the error of a create E2B refused
// because the team has no template Options.Template (E2B_TEMPLATE) names,
// or may not use it: a configuration error of this worker's, of kind
// sandboxapi.ErrInvalidArgument, never sandboxapi.ErrNotFound (which says
// that a runtime's sandbox is gone and makes callers create it again).
var ErrTemplateNotFound = errors.New("e2b: no such template")

// templateError turns a refused create into ErrTemplateNotFound when E2B
// refused the template: 404 "template 'x' not found" or "tag 't' does not
// exist for template 'x'", 403 "you don't have access to template 'x'"
// (packages/api/internal/cache/templates/errors.go:50-111 of e2b-dev/infra,
// sent by PostSandboxes, packages/api/internal/handlers/
// sandbox_create.go:96-122); other errors are returned as they are.
func (p *Provider) templateError(err error) error {
	k := sandboxapi.KindOf(err)
	if k != sandboxapi.ErrNotFound && !(k == sandboxapi.ErrUnauthorized && strings.Contains(sandboxapi.Message(err), "template")) {
		return err
	}
	return sandboxapi.Wrap(sandboxapi.ErrInvalidArgument, fmt.Errorf("%w: %s", ErrTemplateNotFound, sandboxapi.Message(err)),
		"e2b: E2B refused template %q (E2B_TEMPLATE): check its name and that this team may use it", p.opts.Template)
}

// createBody builds the create request of spec.
func (p *Provider) createBody(spec sandbox.RuntimeSpec) api.NewSandbox {
	md := api.SandboxMetadata{}
	for k, v := range spec.Labels {
		md[k] = v
	}
	md[MetaManagedBy] = ManagedByValue
	md[MetaRuntime] = spec.ID
	md[MetaWorkspace] = spec.WorkspaceID
	md[MetaDeployment] = p.opts.Deployment
	net := api.SandboxNetworkConfig{AllowPublicTraffic: ptr(false)}
	body := api.NewSandbox{
		TemplateID: p.opts.Template,
		Timeout:    ptr(int32(p.opts.Timeout / time.Second)),
		AutoPause:  ptr(true),
		Secure:     ptr(true),
		Metadata:   &md,
		Network:    &net,
		// No EnvVars: nothing from the worker enters the sandbox (docs/SECURITY.md).
	}
	switch procexec.RuntimeNetwork(spec) {
	case sandboxapi.NetworkNone:
		body.AllowInternetAccess = ptr(false)
		net.DenyOut = &[]string{"0.0.0.0/0"}
	case sandboxapi.NetworkLimited:
		net.DenyOut = &[]string{"0.0.0.0/0"}
		ra, err := egress.ForRemote(spec.NetworkAllow)
		if err != nil {
			p.log.Warn("runtime allow-list not applied (no egress)", "id", spec.ID, "error", err)
		}
		if len(ra.Widened) > 0 || len(ra.Dropped) > 0 {
			p.log.Info("allow-list entries as E2B takes them: ports dropped, metadata-covering addresses left out", "id", spec.ID,
				"widened", ra.Widened, "dropped", ra.Dropped)
		}
		allow := append(append(ra.Domains, ra.CIDRs...), p.opts.AllowOut...)
		if len(allow) > 0 {
			net.AllowOut = &allow
		} else {
			body.AllowInternetAccess = ptr(false)
		}
	}
	return body
}

func ptr[T any](v T) *T { return &v }

// stateDir is the host directory of one runtime's state.
func (p *Provider) stateDir(id string) string { return filepath.Join(p.opts.StateDir, id) }

// Orphans returns this deployment's sandboxes whose workspace no longer
// exists (exists says; its errors abort). Errors: mapHTTP's.
func (p *Provider) Orphans(ctx context.Context, exists func(ctx context.Context, workspaceID string) (bool, error)) ([]sandbox.RuntimeSummary, error) {
	items, err := p.list(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []sandbox.RuntimeSummary
	for _, it := range items {
		md := metadataOf(it.Metadata)
		ok, err := exists(ctx, md[MetaWorkspace])
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, sandbox.RuntimeSummary{ID: md[MetaRuntime], State: stateOf(it.State), Labels: md})
		}
	}
	return out, nil
}

// DeleteOrphan kills an orphan's sandboxes and removes its host state (its
// workspace is gone: there is nothing to keep).
func (p *Provider) DeleteOrphan(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	items, err := p.list(ctx, map[string]string{MetaRuntime: id})
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := p.killSandbox(ctx, it.SandboxID); err != nil {
			return err
		}
	}
	p.runtimes.Drop(id)
	return os.RemoveAll(p.stateDir(id))
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// validID checks a runtime id: sandboxapi.ErrInvalidArgument.
func validID(id string) error {
	if !idRE.MatchString(id) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: runtime id %q is not valid", sandboxapi.Clip(id, 80))
	}
	return nil
}

// sandboxIDRE is what a sandbox id from E2B must look like before it goes
// into a URL (responses are hostile).
var sandboxIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// domainRE is a sandbox domain: a host name with an optional port.
var domainRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$`)

// record is what the host keeps of a runtime's sandbox (sandbox.json, 0600).
type record struct {
	SandboxID    string `json:"sandbox_id"`
	AccessToken  string `json:"envd_access_token,omitempty"`
	TrafficToken string `json:"traffic_access_token,omitempty"`
	Domain       string `json:"domain,omitempty"`
	EnvdVersion  string `json:"envd_version,omitempty"`
}

// String never prints the tokens.
func (r record) String() string { return "sandbox " + r.SandboxID }

// GoString never prints the tokens.
func (r record) GoString() string { return r.String() }

// recordFrom validates a sandbox from E2B (create, connect) into a record;
// domain falls back to the API host's parent domain.
func (p *Provider) recordFrom(sb *api.Sandbox) (record, error) {
	if sb == nil || !sandboxIDRE.MatchString(sb.SandboxID) {
		return record{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: the API answered a sandbox without a valid id")
	}
	rec := record{SandboxID: sb.SandboxID, EnvdVersion: sb.EnvdVersion}
	if sb.EnvdAccessToken != nil {
		rec.AccessToken = *sb.EnvdAccessToken
	}
	if sb.TrafficAccessToken != nil {
		rec.TrafficToken = *sb.TrafficAccessToken
	}
	if sb.Domain != nil && *sb.Domain != "" {
		rec.Domain = *sb.Domain
	} else {
		rec.Domain = p.defaultDomain()
	}
	if !domainRE.MatchString(rec.Domain) {
		return record{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: the API answered an invalid sandbox domain %q", sandboxapi.Clip(rec.Domain, 80))
	}
	if strings.ContainsAny(rec.AccessToken+rec.TrafficToken, "\r\n\x00") {
		return record{}, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: the API answered a malformed token")
	}
	return rec, nil
}

// defaultDomain is the sandbox domain when E2B names none: the API host
// without its "api." label (api.e2b.app → e2b.app).
func (p *Provider) defaultDomain() string {
	u, _ := url.Parse(p.opts.APIURL)
	return strings.TrimPrefix(u.Host, "api.")
}

func loadRecord(file string) (*record, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: read sandbox record")
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || !sandboxIDRE.MatchString(rec.SandboxID) {
		return nil, nil // a damaged record costs a look-up by metadata, never the workspace
	}
	return &rec, nil
}

func saveRecord(file string, rec *record) error {
	if rec == nil {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: remove sandbox record")
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: state dir")
	}
	b, _ := json.Marshal(rec)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: write sandbox record")
	}
	if err := os.Rename(tmp, file); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "e2b: write sandbox record")
	}
	return nil
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
