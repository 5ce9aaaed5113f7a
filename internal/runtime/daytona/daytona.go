// Package daytona is the Daytona runtime (kind "daytona"): each runtime is a
// Daytona sandbox holding a replica of the workspace (internal/runtime/replica;
// docs/DESIGN.md "The three things", docs/SECURITY.md "Remote runtimes"),
// driven with Daytona's generated Go clients of the API and of the in-sandbox
// toolbox (github.com/daytonaio/daytona/libs/api-client-go and
// libs/toolbox-api-client-go, v0.190.0).
//
// # Sandboxes
//
// A runtime's sandbox is named SandboxName(Options.Deployment, runtime id) —
// the runtime id and a digest of the deployment, so deployments sharing one
// Daytona organization never claim each other's sandboxes, even for the same
// workspace id — and labeled LabelManagedBy=ManagedByValue, LabelWorkspace,
// LabelRuntime and LabelDeployment (plus RuntimeSpec.Labels); it is created from
// Options.Snapshot, or from Options.Image (a build "FROM <image>"), or from
// Daytona's default snapshot, in Options.Target, with Options.AutoStopMinutes
// and AutoArchiveMinutes. The spec's resources (CPU rounded up to whole
// cores, memory and disk to whole GiB) are sent only with Options.Image:
// Daytona refuses any cpu, memory or disk with a snapshot, its default one
// included (400 "Cannot specify Sandbox resources when using a snapshot"),
// so with a snapshot they are dropped with a logged warning and the
// snapshot's own sizes apply. Create is idempotent (a name conflict
// adopts the existing sandbox when it carries this deployment's labels, and
// is sandboxapi.ErrConflict otherwise). Start starts a stopped or archived
// sandbox, and recovers one in a recoverable error (Daytona refuses start
// there); Stop (hibernate) first brings back what the sandbox changed
// since the last command, then stops it; Destroy deletes it, after the same
// sync when the sandbox may hold unsynced changes.
//
// States (SandboxState → sandbox.RuntimeState): started → running;
// creating, starting, restoring, pulling_snapshot, pending_build,
// building_snapshot, resizing, snapshotting, forking, resuming → starting;
// stopped, stopping, archived, archiving, paused, pausing → stopped; error,
// build_failed, unknown → error; destroyed, destroying or no sandbox →
// missing.
//
// A sandbox that vanished (deleted, expired, in a destroyed or unrecoverable
// error state) is created again on the next use of its runtime and the replica
// re-synced from the host (every file, a full bundle): nothing is lost
// (Runtime.Replica reports how often that happened).
//
// The replica's bookkeeping lives in the sandbox user's home directory as
// the toolbox reports it (user-home-dir; Daytona's /home/<user> when the
// daemon lacks that endpoint), below .sandboxcore/<runtime id>. A create
// refused for the organization's disk quota deletes up to three of this
// deployment's least recently used stopped sandboxes that hold nothing the
// host lacks (hibernated by Stop after a sync), waits until they are gone
// and is tried once more; otherwise, and at once when the CPU or memory
// quota refused it (stopped sandboxes hold neither), it fails with
// sandboxapi.ErrResourceLimit.
// Orphans and DeleteOrphan find and delete this deployment's sandboxes whose
// workspace no longer exists (the eviction run, docs/API.md "Eviction").
//
// # Network (RuntimeSpec.Network)
//
// One network for the whole sandbox, set when it is created (a command
// cannot choose another: Capabilities().PerCommandNetwork is false;
// docs/SECURITY.md "Network modes"). "none" → networkBlockAll; "limited" →
// the spec's allow-list as Daytona takes it (egress.ForRemote): its name
// entries become domainAllowList ("example.com", "*.example.com"; Daytona
// matches them itself), its IPv4 addresses and CIDRs, with
// Options.NetworkAllowList, networkAllowList (an address as a /32); ports
// are dropped, so an entry opens every port of its destination, and an
// address entry covering a metadata address is left out; with nothing to
// allow, networkBlockAll; "default" → Daytona's default network. Daytona
// takes IPv4 networks only: an IPv6 entry is left out with a logged
// warning, and as Daytona's lists are the sandbox's only egress filter (no
// proxy of ours runs there) its destination stays closed. Daytona takes at
// most MaxAllowNetworks networks and MaxAllowDomains domains: of a longer
// list the first are sent and the rest left out with a logged warning
// (their destinations stay closed, as Daytona would refuse the create).
//
// # Credentials
//
// The API key goes in the Authorization header of each request and nowhere
// else: never a log line, an error, a sandbox's environment, a command's
// argv or Temporal's history (Options documents where it comes from).
package daytona

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kind is the RuntimeProvider kind string of this backend.
const Kind = "daytona"

// Labels on every sandbox this package creates.
const (
	LabelManagedBy  = "managed-by"
	ManagedByValue  = "sandboxcore"
	LabelWorkspace  = "sandboxcore.workspace"
	LabelRuntime    = "sandboxcore.runtime"
	LabelDeployment = "sandboxcore.deployment"
)

// Defaults.
const (
	DefaultAutoStopMinutes    = 15
	DefaultAutoArchiveMinutes = 60
	// DefaultWaitSlice bounds one toolbox request that waits for a command:
	// well below the 60 s at which Daytona's proxy and SDK cut requests
	// (https://github.com/daytonaio/daytona/issues/4750), so a command of
	// any length is followed through successive requests while its own
	// timeout is enforced in the sandbox.
	DefaultWaitSlice = 25 * time.Second
	// apiTimeout bounds one API or toolbox call that does not wait for a command.
	apiTimeout = 60 * time.Second
	// readyTimeout bounds the wait for a sandbox to reach a stable state.
	readyTimeout = 5 * time.Minute
)

// Options configure a Provider.
type Options struct {
	// APIURL is Daytona's API URL (DAYTONA_API_URL), e.g. https://app.daytona.io/api.
	APIURL string
	// APIKey authenticates every call (DAYTONA_API_KEY or DAYTONA_API_KEY_FILE).
	APIKey string
	// Snapshot or Image (at most one) is what sandboxes are made from;
	// neither: Daytona's default snapshot.
	Snapshot, Image string
	// Target is the Daytona region ("" = the organization's default).
	Target string
	// AutoStopMinutes and AutoArchiveMinutes are given to every sandbox
	// (0: the defaults above).
	AutoStopMinutes, AutoArchiveMinutes int
	// NetworkAllowList is the CIDR list of the "limited" network mode ("" = none
	// allowed), added to each runtime's own; IPv4 only (IPv6 entries are left
	// out, as Daytona refuses them), counted against MaxAllowNetworks.
	NetworkAllowList string
	// Deployment identifies this worker host among the users of the same
	// Daytona organization (SANDBOX_HOST_ID): every sandbox carries it, and
	// only this deployment's sandboxes are listed, reclaimed or deleted.
	Deployment string
	// StateDir is a host directory for the replicas' sync states.
	StateDir string
	// Git is the host's git runner (bundles of the workspaces' repositories).
	Git *gitx.Runner
	// WaitSlice bounds a toolbox request that waits for a command (0: DefaultWaitSlice).
	WaitSlice time.Duration
	// HTTPClient, when set, carries every request (tests); the API key is
	// still added per request.
	HTTPClient *http.Client
	// Logger receives the provider's log (never the key); nil: slog.Default().
	Logger *slog.Logger
}

// Provider creates and finds Daytona runtimes. It is safe for concurrent use.
type Provider struct {
	opts Options
	api  *apiclient.APIClient
	hc   *http.Client
	log  *slog.Logger

	runtimes replica.Handles[*Runtime]
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// New returns a provider. Errors: sandboxapi.ErrInvalidArgument naming the
// missing or malformed option (hostworker names the variable).
func New(opts Options) (*Provider, error) {
	if opts.APIURL == "" || (!strings.HasPrefix(opts.APIURL, "https://") && !strings.HasPrefix(opts.APIURL, "http://")) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: the API URL must be an http(s) URL")
	}
	if opts.APIKey == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: no API key")
	}
	if opts.Snapshot != "" && opts.Image != "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: set a snapshot or an image, not both")
	}
	if opts.Deployment == "" || opts.StateDir == "" || opts.Git == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: Deployment, StateDir and Git are required")
	}
	if opts.AutoStopMinutes <= 0 {
		opts.AutoStopMinutes = DefaultAutoStopMinutes
	}
	if opts.AutoArchiveMinutes <= 0 {
		opts.AutoArchiveMinutes = DefaultAutoArchiveMinutes
	}
	if opts.WaitSlice <= 0 {
		opts.WaitSlice = DefaultWaitSlice
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// No redirect is followed: the key must never follow one elsewhere.
	auth := replica.NewHeaderTransport("daytona-auth", "Authorization", "Bearer "+opts.APIKey, transportOf(base))
	hc := &http.Client{Transport: auth, CheckRedirect: replica.NoRedirect}
	cfg := apiclient.NewConfiguration()
	cfg.Servers = apiclient.ServerConfigurations{{URL: strings.TrimSuffix(opts.APIURL, "/")}}
	cfg.HTTPClient = hc
	cfg.UserAgent = "sandboxcore"
	return &Provider{opts: opts, api: apiclient.NewAPIClient(cfg), hc: hc, log: log}, nil
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// Kind returns "daytona".
func (p *Provider) Kind() string { return Kind }

// Capabilities: isolated (a remote sandbox), preview URLs; snapshots are
// not offered (a replica holds nothing the workspace lacks):
// replica.Capabilities.
func (p *Provider) Capabilities() sandbox.RuntimeCapabilities { return replica.Capabilities() }

// runtimeFor returns the one handle of a runtime id. Its replica opens with
// a placeholder for the sandbox-side state directory, which lies below the
// sandbox user's home: cacheSandbox sets it once the toolbox reports that.
func (p *Provider) runtimeFor(id string) *Runtime {
	return p.runtimes.For(id, func(id string) *Runtime {
		return &Runtime{p: p, id: id, held: replica.SpecReplica{
			Kind: Kind, ID: id, StateDir: p.stateDir(id), RemoteState: "/tmp/.sandboxcore-unset", Git: p.opts.Git, Log: p.log,
		}}
	})
}

// Create returns the runtime of spec, creating its sandbox when missing and
// waiting until it runs; the replica is synced on first use. Errors:
// sandboxapi.ErrInvalidArgument (a spec without a workspace mount at its
// workdir), sandboxapi.ErrConflict (the name belongs to a sandbox of another
// deployment), the kinds of mapErr. The steps are replica.CreateFlow's.
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

// Get returns an existing runtime or sandboxapi.ErrNotFound.
func (p *Provider) Get(ctx context.Context, id string) (sandbox.Runtime, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	sb, err := p.getSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb == nil || runtimeState(sb.GetState()) == sandbox.RuntimeMissing {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "daytona: runtime %s does not exist", id)
	}
	rt := p.runtimeFor(id)
	_ = rt.held.Load()
	return rt, nil
}

// List returns this deployment's runtimes whose labels include labels.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]sandbox.RuntimeSummary, error) {
	items, err := p.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.RuntimeSummary, 0, len(items))
	for _, it := range items {
		out = append(out, sandbox.RuntimeSummary{ID: runtimeIDOf(it), State: runtimeState(it.GetState()), Labels: it.GetLabels()})
	}
	return out, nil
}

// list returns this deployment's sandboxes matching labels (all pages).
func (p *Provider) list(ctx context.Context, labels map[string]string) ([]apiclient.SandboxListItem, error) {
	want := map[string]string{LabelManagedBy: ManagedByValue, LabelDeployment: p.opts.Deployment}
	for k, v := range labels {
		want[k] = v
	}
	lb, _ := json.Marshal(want)
	var out []apiclient.SandboxListItem
	cursor := ""
	for page := 0; page < 1000; page++ {
		var res *apiclient.ListSandboxesResponse
		err := p.retry(ctx, "list sandboxes", func(ctx context.Context) error {
			req := p.api.SandboxAPI.ListSandboxes(ctx).Labels(string(lb)).Limit(200)
			if cursor != "" {
				req = req.Cursor(cursor)
			}
			var resp *http.Response
			var err error
			res, resp, err = req.Execute()
			return p.mapErr(ctx, resp, err, "list sandboxes")
		})
		if err != nil {
			return nil, err
		}
		for _, it := range res.GetItems() {
			if st := it.GetState(); st == apiclient.SANDBOXSTATE_DESTROYED || st == apiclient.SANDBOXSTATE_DESTROYING {
				continue
			}
			out = append(out, it)
		}
		next, ok := res.GetNextCursorOk()
		if !ok || next == nil || *next == "" {
			break
		}
		cursor = *next
	}
	return out, nil
}

// Destroy deletes the runtime's sandbox (a missing one is success) and the
// replica's host state; never the workspace. A sandbox that may hold
// changes not yet brought back (it was not stopped by Stop) is synced first
// (started when it is stopped); if that fails, it is kept and the error
// returned, so nothing is lost.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	rt := p.runtimeFor(id)
	_ = rt.held.Load()
	return rt.destroy(ctx)
}

// SandboxName is the Daytona sandbox name of a runtime of a deployment:
// the runtime id, "-" and the first 8 hex digits of sha256(deployment)
// (at most 63 characters: validID keeps runtime ids to 54).
func SandboxName(deployment, runtimeID string) string {
	h := sha256.Sum256([]byte(deployment))
	return runtimeID + "-" + hex.EncodeToString(h[:4])
}

// sandboxName is SandboxName of this deployment.
func (p *Provider) sandboxName(id string) string { return SandboxName(p.opts.Deployment, id) }

// runtimeIDOf is the runtime id a listed sandbox belongs to (its
// LabelRuntime, which this deployment wrote).
func runtimeIDOf(it apiclient.SandboxListItem) string {
	if id := it.GetLabels()[LabelRuntime]; id != "" {
		return id
	}
	return it.GetName()
}

// getSandbox returns the sandbox of runtime id, nil when there is none.
func (p *Provider) getSandbox(ctx context.Context, id string) (*apiclient.Sandbox, error) {
	var sb *apiclient.Sandbox
	name := p.sandboxName(id)
	err := p.retry(ctx, "get sandbox "+name, func(ctx context.Context) error {
		var resp *http.Response
		var err error
		sb, resp, err = p.api.SandboxAPI.GetSandbox(ctx, name).Execute()
		return p.mapErr(ctx, resp, err, "get sandbox %s", name)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if l := sb.GetLabels(); l[LabelDeployment] != p.opts.Deployment || l[LabelManagedBy] != ManagedByValue || l[LabelRuntime] != id {
		return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "daytona: a sandbox named %s exists but is not this deployment's runtime %s: it is left alone", name, id)
	}
	return sb, nil
}

// retry runs fn with its own call timeout (apiTimeout), again (up to three
// tries) while it fails transiently or is rate limited (replica.Retrier).
func (p *Provider) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	return replica.Retrier{Kind: Kind, Log: p.log, CallTimeout: apiTimeout}.Do(ctx, what, fn)
}

// runtimeState maps Daytona's state onto a runtime state (package documentation).
func runtimeState(s apiclient.SandboxState) sandbox.RuntimeState {
	switch s {
	case apiclient.SANDBOXSTATE_STARTED:
		return sandbox.RuntimeRunning
	case apiclient.SANDBOXSTATE_CREATING, apiclient.SANDBOXSTATE_STARTING, apiclient.SANDBOXSTATE_RESTORING,
		apiclient.SANDBOXSTATE_PULLING_SNAPSHOT, apiclient.SANDBOXSTATE_PENDING_BUILD, apiclient.SANDBOXSTATE_BUILDING_SNAPSHOT,
		apiclient.SANDBOXSTATE_RESIZING, apiclient.SANDBOXSTATE_SNAPSHOTTING, apiclient.SANDBOXSTATE_FORKING, apiclient.SANDBOXSTATE_RESUMING:
		return sandbox.RuntimeStarting
	case apiclient.SANDBOXSTATE_STOPPED, apiclient.SANDBOXSTATE_STOPPING, apiclient.SANDBOXSTATE_ARCHIVED,
		apiclient.SANDBOXSTATE_ARCHIVING, apiclient.SANDBOXSTATE_PAUSED, apiclient.SANDBOXSTATE_PAUSING:
		return sandbox.RuntimeStopped
	case apiclient.SANDBOXSTATE_DESTROYED, apiclient.SANDBOXSTATE_DESTROYING:
		return sandbox.RuntimeMissing
	}
	return sandbox.RuntimeError
}

// MaxAllowNetworks and MaxAllowDomains are the most entries Daytona takes
// in a sandbox's networkAllowList and domainAllowList
// (apps/api/src/sandbox/utils/network-validation.util.ts:35-37 and 59-61,
// daytonaio/daytona v0.190.0).
const (
	MaxAllowNetworks = 10
	MaxAllowDomains  = 10
)

// createBody builds the create request of spec. Errors:
// sandboxapi.ErrInvalidArgument for a "limited" allow-list longer than Daytona
// takes (MaxAllowNetworks, MaxAllowDomains).
func (p *Provider) createBody(spec sandbox.RuntimeSpec) (apiclient.CreateSandbox, error) {
	body := apiclient.NewCreateSandbox()
	body.SetName(p.sandboxName(spec.ID))
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelRuntime] = spec.ID
	labels[LabelWorkspace] = spec.WorkspaceID
	labels[LabelDeployment] = p.opts.Deployment
	body.SetLabels(labels)
	body.SetEnv(map[string]string{}) // nothing from the worker (docs/SECURITY.md)
	switch {
	case p.opts.Snapshot != "":
		body.SetSnapshot(p.opts.Snapshot)
	case p.opts.Image != "":
		body.SetBuildInfo(*apiclient.NewCreateBuildInfo("FROM " + p.opts.Image + "\n"))
	}
	if p.opts.Target != "" {
		body.SetTarget(p.opts.Target)
	}
	body.SetAutoStopInterval(int32(p.opts.AutoStopMinutes))
	body.SetAutoArchiveInterval(int32(p.opts.AutoArchiveMinutes))
	body.SetAutoDeleteInterval(-1)
	body.SetPublic(false)
	switch procexec.RuntimeNetwork(spec) {
	case sandboxapi.NetworkNone:
		body.SetNetworkBlockAll(true)
	case sandboxapi.NetworkLimited:
		ra, err := egress.ForRemote(spec.NetworkAllow)
		if err != nil {
			p.log.Warn("runtime allow-list not applied (no egress)", "id", spec.ID, "error", err)
		}
		if len(ra.Widened) > 0 || len(ra.Dropped) > 0 {
			p.log.Info("allow-list entries as Daytona takes them: ports dropped, metadata-covering addresses left out", "id", spec.ID,
				"widened", ra.Widened, "dropped", ra.Dropped)
		}
		cidrs := ra.CIDRs
		for _, c := range sandboxapi.SplitNetworkAllow(p.opts.NetworkAllowList) {
			if !slices.Contains(cidrs, c) {
				cidrs = append(cidrs, c)
			}
		}
		// Daytona's list holds IPv4 CIDRs only (a single address as a /32):
		// an IPv6 entry is refused with the whole create, so it is left out
		// (its destination stays closed: Daytona's list is the only filter).
		var v4, v6 []string
		for _, c := range cidrs {
			pfx, err := netip.ParsePrefix(c)
			if err != nil {
				a, aerr := netip.ParseAddr(c)
				if aerr != nil {
					v4 = append(v4, c) // malformed: Daytona says so
					continue
				}
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
			if !pfx.Addr().Unmap().Is4() {
				v6 = append(v6, c)
				continue
			}
			if pfx.Addr().Is4In6() {
				pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
			}
			v4 = append(v4, pfx.String())
		}
		if len(v6) > 0 {
			p.log.Warn("daytona: IPv6 allow-list entries left out (Daytona takes IPv4 networks only; they stay closed)", "id", spec.ID, "dropped", v6)
		}
		cidrs = v4
		// Daytona refuses a longer list with the whole create: the first
		// entries are kept and the rest left out with a warning (their
		// destinations stay closed: stricter, never looser). The worker's
		// default list alone names more domains than Daytona takes.
		if len(cidrs) > MaxAllowNetworks {
			p.log.Warn("daytona: allow-list networks left out (Daytona takes at most 10; they stay closed)", "id", spec.ID, "dropped", cidrs[MaxAllowNetworks:])
			cidrs = cidrs[:MaxAllowNetworks]
		}
		if len(ra.Domains) > MaxAllowDomains {
			p.log.Warn("daytona: allow-list domains left out (Daytona takes at most 10; they stay closed)", "id", spec.ID, "dropped", ra.Domains[MaxAllowDomains:])
			ra.Domains = ra.Domains[:MaxAllowDomains]
		}
		switch {
		case len(cidrs) == 0 && len(ra.Domains) == 0:
			body.SetNetworkBlockAll(true)
		default:
			if len(cidrs) > 0 {
				body.SetNetworkAllowList(strings.Join(cidrs, ","))
			}
			if len(ra.Domains) > 0 {
				body.SetDomainAllowList(strings.Join(ra.Domains, ","))
			}
		}
	}
	if r := spec.Resources; r != nil && p.opts.Image == "" && (r.CPU > 0 || r.MemoryMB > 0 || r.DiskGB > 0) {
		// Daytona refuses every resource with a snapshot (named or its
		// default): 400 "Cannot specify Sandbox resources when using a
		// snapshot" (apps/api/src/sandbox/controllers/sandbox.controller.ts:295-296,
		// v0.190.0); the snapshot's own sizes apply.
		p.log.Warn("daytona: resource hints ignored: a sandbox made from a snapshot takes the snapshot's resources (set an image to size sandboxes)",
			"id", spec.ID, "cpu", r.CPU, "memory_mb", r.MemoryMB, "disk_gb", r.DiskGB)
	} else if r != nil {
		if r.CPU > 0 {
			body.SetCpu(int32(math.Ceil(r.CPU)))
		}
		if r.MemoryMB > 0 {
			body.SetMemory(int32((r.MemoryMB + 1023) / 1024))
		}
		if r.DiskGB > 0 {
			body.SetDisk(int32(r.DiskGB))
		}
	}
	return *body, nil
}

// reclaimAtMost bounds the stopped replicas one refused create deletes.
const reclaimAtMost = 3

// reclaim deletes up to n of this deployment's stopped sandboxes that hold
// nothing the host lacks (stopped by Stop after a sync), least recently used
// first, waits until Daytona no longer counts them (deleting is
// asynchronous), and returns how many it deleted (quota: a create refused for
// the organization's limits; README "Daytona").
func (p *Provider) reclaim(ctx context.Context, except string, n int) int {
	items, err := p.list(ctx, nil)
	if err != nil {
		p.log.Warn("daytona: list sandboxes to reclaim", "error", err)
		return 0
	}
	type cand struct {
		id string
		at time.Time
	}
	var cands []cand
	for _, it := range items {
		id := runtimeIDOf(it)
		if id == except || runtimeState(it.GetState()) != sandbox.RuntimeStopped || validID(id) != nil {
			continue
		}
		if !replica.Hibernated(p.stateDir(id)) {
			continue
		}
		at := lastUse(it)
		cands = append(cands, cand{id, at})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].at.Before(cands[j].at) })
	deleted := 0
	for _, c := range cands {
		if deleted >= n {
			break
		}
		if err := p.deleteSandbox(ctx, c.id); err != nil {
			p.log.Warn("daytona: reclaim stopped sandbox", "runtime", c.id, "error", err)
			continue
		}
		if _, err := p.runtimeFor(c.id).waitGone(ctx); err != nil {
			p.log.Warn("daytona: a reclaimed sandbox is still being deleted", "runtime", c.id, "error", err)
		}
		// The next use of that runtime finds no sandbox and creates one,
		// re-synced from the workspace (it counts as recreated).
		p.log.Info("daytona: deleted a stopped replica to free quota", "runtime", c.id, "last_used", c.at)
		deleted++
	}
	return deleted
}

// lastUse is when a listed sandbox was last used (lastActivityAt, else
// updatedAt; the zero time when neither parses: it goes first).
func lastUse(it apiclient.SandboxListItem) time.Time {
	for _, v := range []string{it.GetLastActivityAt(), it.GetUpdatedAt()} {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// deleteSandbox deletes runtime id's sandbox; a missing one is success.
func (p *Provider) deleteSandbox(ctx context.Context, id string) error {
	name := p.sandboxName(id)
	err := p.retry(ctx, "delete sandbox "+name, func(ctx context.Context) error {
		_, resp, err := p.api.SandboxAPI.DeleteSandbox(ctx, name).Execute()
		return p.mapErr(ctx, resp, err, "delete sandbox %s", name)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil
	}
	return err
}

// stateDir is the host directory of one runtime's state.
func (p *Provider) stateDir(id string) string { return filepath.Join(p.opts.StateDir, id) }

// RuntimeReplica returns the replica state of runtime id as this host
// records it (Runtime.Replica; no call to Daytona), false when this host has
// no state of that runtime (never created here, or destroyed).
func (p *Provider) RuntimeReplica(id string) (sandboxapi.RuntimeReplica, bool) {
	if validID(id) != nil {
		return sandboxapi.RuntimeReplica{}, false
	}
	return p.runtimeFor(id).held.Recorded()
}

// Orphans returns this deployment's sandboxes whose workspace no longer
// exists (exists decides from the LabelWorkspace label; its errors abort),
// as runtime summaries (ID: the runtime id). Sandboxes whose labels or name
// are not what this deployment writes (an invalid runtime id, a name other
// than SandboxName) are not listed: they are not this deployment's to
// delete. Errors: mapErr's, exists's.
func (p *Provider) Orphans(ctx context.Context, exists func(ctx context.Context, workspaceID string) (bool, error)) ([]sandbox.RuntimeSummary, error) {
	items, err := p.list(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []sandbox.RuntimeSummary
	for _, it := range items {
		id := runtimeIDOf(it)
		if validID(id) != nil || it.GetName() != p.sandboxName(id) {
			continue
		}
		ok, err := exists(ctx, it.GetLabels()[LabelWorkspace])
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, sandbox.RuntimeSummary{ID: id, State: runtimeState(it.GetState()), Labels: it.GetLabels()})
		}
	}
	return out, nil
}

// DeleteOrphan deletes an orphan's sandbox and host state, without syncing
// anything back (its workspace is gone: there is nothing to keep); a
// missing sandbox is success. Errors: sandboxapi.ErrInvalidArgument (id),
// mapErr's.
func (p *Provider) DeleteOrphan(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	if err := p.deleteSandbox(ctx, id); err != nil {
		return err
	}
	p.runtimes.Drop(id)
	if err := os.RemoveAll(p.stateDir(id)); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: remove the state of runtime %s", id)
	}
	return nil
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,53}$`)

// validID checks a runtime id (it names the sandbox and a host directory;
// at most 54 characters so that SandboxName stays within Daytona's 63):
// sandboxapi.ErrInvalidArgument.
func validID(id string) error {
	if !idRE.MatchString(id) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: runtime id %q is not a valid sandbox name", sandboxapi.Clip(id, 80))
	}
	return nil
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
