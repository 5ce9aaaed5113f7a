package hostworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/internal/codecserver"
	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/devserver"
	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/metrics"
	"github.com/sandboxcore/sandboxcore/internal/repocache"
	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/store/postgres"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/internal/workspace"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// Options adjust Start beyond the environment (tests, embedding).
type Options struct {
	// Logger receives the worker's own log; nil means slog.Default().
	Logger *slog.Logger
	// Credentials replaces the default chain (credentials directory, credentials
	// file, GitHub App, then GITHUB_TOKEN/GH_TOKEN; auth.go) when set.
	Credentials sandbox.CredentialProvider
	// Client, when set, is used instead of dialing (or embedding) Temporal.
	// Its metrics handler is the caller's: the host's /metrics then has
	// sandboxcore's metrics but not the Temporal SDK's.
	// With SANDBOX_PAYLOAD_KEYS its data and failure converters must be the
	// worker codec's (Config.Security.WorkerCodec().DataConverter(),
	// FailureConverter(): with SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION the codec
	// refuses plaintext): the workers use the client's converters.
	Client client.Client
	// EgressLookup, when set, resolves the names the egress proxy is asked
	// for instead of the system resolver (tests: names of their own).
	EgressLookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// MetricsCacheFor is how long workspace and session counts are reused
	// between scrapes (0: 15 s); tests shorten it.
	MetricsCacheFor time.Duration
	// Interceptors are added to both workers (the shared and the host task
	// queue's), after the metrics one; the benchmarks time the hops of an
	// operation with one.
	Interceptors []interceptor.WorkerInterceptor
}

// Host is a running worker host.
type Host struct {
	Config Config
	// Client is connected to Temporal (owned by Host unless passed in Options).
	Client client.Client
	// Dev is the embedded Temporal server, nil when TEMPORAL_ADDRESS is set.
	Dev *devserver.Server
	// Codec is the codec server the embedded Web UI decodes payloads with
	// (nil unless payloads are encrypted, the UI is on and SANDBOX_CODEC_PORT
	// is not 0); CodecTokenSource names where its token is (a variable or
	// the file <data dir>/codec-token), never the token.
	Codec            *codecserver.Server
	CodecTokenSource string
	// Store is the host's metadata store and host registry: SQLite or
	// PostgreSQL (openStore) behind store.Remembering.
	Store      store.Store
	Activities *activities.Activities
	// Metrics is the host's Prometheus registry, nil unless
	// SANDBOX_METRICS_ADDR is set; MetricsAddr is the address it serves
	// /metrics on (the configured one, with a chosen port for port 0).
	Metrics     *metrics.Metrics
	MetricsAddr string

	// Egress is the egress proxy of the limited network: it serves the
	// endpoints of bubblewrap and Docker runtimes (the remote runtimes use
	// their backend's own lists).
	Egress *egress.Proxy
	// Volumes are the host's disk volumes (SANDBOX_DISK_VOLUMES); nil
	// when off.
	Volumes *volume.Manager

	ownsClient    bool
	stopHeartbeat func()
	stopMetrics   func()
	workers       []worker.Worker
	log           *slog.Logger
	dataDirLock   *DataDirLock
}

// Start brings a host up: data dir, store, ports, Temporal (embedded or
// remote), search attributes, and the workers (shared queue: workflows and
// activities; host queue: activities). It returns once the workers poll.
func Start(ctx context.Context, cfg Config, opts Options) (*Host, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Host{Config: cfg, log: log}
	// The SDK's sticky cache is the process's, made by its first worker:
	// the embedded server's own system workers when it is embedded, so the
	// size is set before anything starts (Config.WorkflowCacheSize).
	if cfg.WorkflowCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	}
	ok := false
	defer func() {
		if !ok {
			h.Stop()
		}
	}()
	if err := h.prepareStore(ctx); err != nil {
		return nil, err
	}
	wss, err := h.buildActivities(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.Client != nil {
		h.Client = opts.Client
	} else if err := h.dial(ctx, cfg, log); err != nil {
		return nil, err
	}
	if err := RegisterSearchAttributes(ctx, h.Client, cfg.Namespace); err != nil {
		return nil, err
	}
	if err := h.startWorkers(ctx, opts, wss); err != nil {
		return nil, err
	}
	h.stopHeartbeat = h.startHeartbeat(0)
	if h.Metrics != nil {
		if h.MetricsAddr, h.stopMetrics, err = h.Metrics.Serve(cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("SANDBOX_METRICS_ADDR=%s: %w", cfg.MetricsAddr, err)
		}
		log.Info("serving Prometheus metrics", "url", "http://"+h.MetricsAddr+"/metrics")
	}
	ok = true
	return h, nil
}

// prepareStore creates the data dir (0700), takes its lock (LockDataDir,
// held until Stop) and opens the metadata store (openStore) with its outage
// handling behind store.Remembering (h.Store).
func (h *Host) prepareStore(ctx context.Context) error {
	cfg, log := h.Config, h.log
	// 0700: other local users must not reach workspaces, where a sandboxed
	// command running with the worker's uid could leave a setuid file
	// (docs/SECURITY.md "Known gaps").
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	// One worker per data dir, for the worker's whole life: a second one
	// would share its caches, worktrees, store and Temporal database unseen.
	lock, err := LockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	h.dataDirLock = lock
	opened, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	// Outages: bounded retries, SandboxUnavailable naming no connection
	// detail, and the rows this host last saw serving the operations that
	// need nothing else (docs/PRODUCTION.md "Store outages").
	if r, ok := opened.(interface{ SetResilience(store.Resilience) }); ok {
		r.SetResilience(store.Resilience{Logger: log})
	}
	st := store.NewRemembering(opened)
	h.Store = st

	return nil
}

// buildActivities builds the host's ports (git, the egress proxy, the
// runtime provider, metrics, the repo cache, the workspace provider, the
// credentials) and h.Activities over them; it returns the workspace
// provider (eviction needs it).
func (h *Host) buildActivities(ctx context.Context, opts Options) (*workspace.Manager, error) {
	cfg, log, st := h.Config, h.log, h.Store
	git, err := gitx.New(gitx.Options{AllowFile: cfg.AllowFileURLs, AllowHTTP: cfg.AllowHTTPURLs, HomeDir: filepath.Join(cfg.DataDir, "git-home"), Logger: log})
	if err != nil {
		return nil, err
	}
	// The limited network's only way out (docs/SECURITY.md "Network modes"):
	// denied requests are logged with the workspace and the destination.
	h.Egress = egress.New(egress.Options{Logger: log, Lookup: opts.EgressLookup, ControlPlane: controlPlane(cfg)})
	vols, err := diskVolumes(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	h.Volumes = vols
	runtimes, err := runtimeProvider(ctx, cfg, git, hostParts{egress: h.Egress, volumes: vols}, log)
	if err != nil {
		return nil, err
	}
	var onTransfer func(string, time.Duration, int64, error)
	if cfg.MetricsAddr != "" {
		h.Metrics = newMetrics(h, runtimes.Kind(), opts.MetricsCacheFor, log)
		onTransfer = h.Metrics.ObserveTransfer
	}
	repos, err := repocache.New(repocache.Options{Root: cfg.DataDir, Git: git, FreshFor: cfg.FetchFreshness, HostID: cfg.HostID, Logger: log, OnTransfer: onTransfer})
	if err != nil {
		return nil, err
	}
	log.Info("network policy", "default", cfg.RuntimeNetwork, "max", cfg.NetworkMax, "allow_entries", len(cfg.NetworkAllow))
	wss, err := workspace.New(workspace.Options{Git: git, Locker: repos, HostID: cfg.HostID, Logger: log, Isolated: runtimes.Capabilities().Isolated,
		LFS: cfg.Content.LFS, Volumes: vols, VolumeBytes: cfg.DiskQuotaGB() << 30})
	if err != nil {
		return nil, err
	}
	auth, err := buildAuth(cfg, git, opts.Credentials)
	if err != nil {
		return nil, err
	}
	if h.Metrics != nil {
		auth.creds, auth.access = h.Metrics.Credentials(auth.creds), h.Metrics.Access(auth.access)
	}
	h.Activities = &activities.Activities{
		Store: st, Repos: repos, Workspaces: wss, Runtimes: runtimes, Credentials: auth.creds,
		Remote: auth.remote, Access: auth.access, CodeHost: auth.codeHost,
		Outputs: execoutput.New(filepath.Join(cfg.DataDir, "outputs")),
		HostID:  cfg.HostID, URLs: sandboxapi.URLPolicy{AllowFile: cfg.AllowFileURLs, AllowHTTP: cfg.AllowHTTPURLs},
		Settings: wire.SessionSettings{IdleStop: cfg.IdleStop, IdleClose: cfg.IdleClose, RuntimeKind: runtimes.Kind(),
			StayOnSharedQueue: !cfg.SessionOnHostQueue, HostWait: cfg.HostWait, ProcessMaxIdle: cfg.ProcessMaxIdle, LockWait: cfg.LockWait},
		RuntimeImage: cfg.RuntimeImage, RuntimeNetwork: cfg.RuntimeNetwork, NetworkMax: cfg.NetworkMax, NetworkAllow: cfg.NetworkAllow,
		RuntimeResources: cfg.RuntimeResources, Logger: log,
		DepCaches:      depCaches(cfg, vols),
		NoSetup:        cfg.Environment.NoSetup,
		RepoImages:     cfg.Environment.RepoImages,
		SkipSubmodules: cfg.Content.Submodules == "off",
	}

	return wss, nil
}

// startWorkers creates the shared-queue and host-queue workers (options,
// interceptors, every workflow and activity registered, eviction wired)
// and starts them (h.workers).
func (h *Host) startWorkers(ctx context.Context, opts Options, wss *workspace.Manager) error {
	cfg, log := h.Config, h.log
	// Running execs publish output progress as heartbeat details every second
	// (activities.execStreaming): let the SDK send heartbeats that often.
	wopts := worker.Options{MaxHeartbeatThrottleInterval: time.Second}
	// One git inspection per repository and operation (docs/SECURITY.md
	// "Git hardening"), before the metrics and the caller's interceptors.
	wopts.Interceptors = []interceptor.WorkerInterceptor{activities.GitInspections()}
	if h.Metrics != nil {
		// Every activity of both workers, whoever registered it.
		wopts.Interceptors = append(wopts.Interceptors, h.Metrics.Interceptor())
	}
	// A late heartbeat call must not cancel an activity (activities.HeartbeatShield).
	wopts.Interceptors = append(wopts.Interceptors, activities.HeartbeatShield())
	// Errors leave every activity typed, translated in one place; a caller's
	// mistake is one INFO line, not the SDK's ERROR (activities.ErrorTranslation).
	wopts.Interceptors = append(wopts.Interceptors, activities.ErrorTranslation(h.log))
	if cfg.Security.RequirePayloadEncryption {
		// Updates without any argument never meet the codec (argumentsRequired).
		wopts.Interceptors = append(wopts.Interceptors, argumentsRequired())
	}
	wopts.Interceptors = append(wopts.Interceptors, opts.Interceptors...)
	shared := worker.New(h.Client, cfg.TaskQueue, wopts)
	shared.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	activities.Register(shared, h.Activities)
	shared.RegisterWorkflowWithOptions(workflows.TaskFanoutWorkflow, workflow.RegisterOptions{Name: sandboxapi.TaskFanoutWorkflowType})
	shared.RegisterWorkflowWithOptions(workflows.ProcessStreamWorkflow, workflow.RegisterOptions{Name: sandboxapi.ProcessStreamWorkflowType})
	(&activities.Fanout{Client: h.Client, TaskQueue: cfg.TaskQueue, Logger: log}).Register(shared)
	hostQ := worker.New(h.Client, wire.HostTaskQueue(cfg.HostID), wopts)
	hostQ.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	activities.Register(hostQ, h.Activities)
	if err := h.wireEviction(ctx, wss, shared, hostQ); err != nil {
		return err
	}
	// The lifecycle (docs/API.md "Fork", "Cleanup"): a fork's acquire runs
	// on the source's host queue, the cleanup's steps on the shared one.
	lc := &activities.LifecycleActivities{Activities: h.Activities, Client: h.Client, TaskQueue: cfg.TaskQueue}
	lc.Register(shared)
	lc.Register(hostQ)
	shared.RegisterWorkflowWithOptions(workflows.CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
	for _, w := range []worker.Worker{shared, hostQ} {
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		h.workers = append(h.workers, w)
	}
	return nil
}

// newMetrics builds the host's metrics (internal/metrics): its workspace
// rows and its sessions by state are counted when scraped.
func newMetrics(h *Host, runtimeKind string, cacheFor time.Duration, log *slog.Logger) *metrics.Metrics {
	cfg := h.Config
	return metrics.New(metrics.Options{
		RuntimeKind: runtimeKind,
		CacheFor:    cacheFor,
		Logger:      log,
		Workspaces: func(ctx context.Context) ([]sandboxapi.Workspace, error) {
			return h.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{HostID: cfg.HostID})
		},
		CountSessions: func(ctx context.Context, query string) (int64, error) {
			if h.Client == nil {
				return 0, errors.New("no Temporal client yet")
			}
			resp, err := h.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: cfg.Namespace, Query: query})
			return resp.GetCount(), err
		},
		SessionsQuery: func(state string) string {
			return fmt.Sprintf("%s AND %s = '%s' AND %s = '%s'", sandboxapi.ListWorkspacesQuery,
				sandboxapi.SearchAttrHost, cfg.HostID, sandboxapi.SearchAttrState, state)
		},
		SessionStates: []string{sandboxapi.StateActive, sandboxapi.StateIdle, sandboxapi.StateReleased, sandboxapi.StateClosed, sandboxapi.StateEvicted},
	})
}

// clientOptions are a worker's Temporal client options for addr: the
// connection settings of cfg.Security.Temporal (TLS required when
// requireTLS), the SDK's log through log, and the worker codec's data and
// failure converters (typed failures alone when payloads are plaintext).
// dial and CheckReplay connect with them. Errors: the settings' (a TLS file
// that does not load).
func clientOptions(cfg Config, addr string, requireTLS bool, log *slog.Logger) (*temporalconn.Settings, client.Options, error) {
	conn := cfg.Security.Temporal
	if conn == nil {
		conn = temporalconn.Default()
	}
	conn = conn.With(addr, cfg.Namespace, requireTLS)
	copts, err := conn.ClientOptions(log.With("component", "temporal-connection"))
	if err != nil {
		return nil, client.Options{}, err
	}
	copts.Logger = sdklog.NewStructuredLogger(log.With("component", "temporal-sdk"))
	if p := cfg.Security.WorkerCodec(); p != nil {
		copts.DataConverter, copts.FailureConverter = p.DataConverter(), p.FailureConverter()
	} else {
		copts.FailureConverter = payloadcodec.TypedFailureConverter(temporal.GetDefaultFailureConverter())
	}
	return conn, copts, nil
}

// dial connects to Temporal — embedding a dev server (with its codec server
// for the Web UI) when no address is configured — with the connection
// settings of cfg.Security.Temporal and, when payloads are encrypted, the
// codec's data and failure converters.
func (h *Host) dial(ctx context.Context, cfg Config, log *slog.Logger) error {
	addr := cfg.TemporalAddress
	embedded := addr == ""
	if embedded {
		if err := h.startUICodec(cfg, log); err != nil {
			return err
		}
		saTypes := maps.Clone(sandboxapi.SearchAttributeTypes)
		dopts := devserver.Options{
			Port: cfg.TemporalPort, UIPort: cfg.UIPort, Namespace: cfg.Namespace,
			DatabaseFile: filepath.Join(cfg.DataDir, "temporal.db"), SearchAttributes: saTypes,
			LogFile: filepath.Join(cfg.DataDir, "temporal.log"), TLS: cfg.Security.DevTLS,
			HistoryCacheSize: cfg.WorkflowCacheSize,
		}
		if h.Codec != nil {
			dopts.UICodecEndpoint = h.Codec.URL
		}
		var err error
		if h.Dev, err = devserver.Start(dopts); err != nil {
			return err
		}
		addr = h.Dev.Address
	}
	conn, copts, err := clientOptions(cfg, addr, embedded && cfg.Security.DevTLS != nil, log)
	if err != nil {
		return err
	}
	if h.Metrics != nil {
		copts.MetricsHandler = h.Metrics.TemporalHandler()
	}
	if p := cfg.Security.WorkerCodec(); p != nil {
		log.Info("payload encryption: AES-256-GCM (SANDBOX_PAYLOAD_KEYS)", "encrypting_key", p.EncryptionKeyID(), "keys", p.KeyIDs(),
			"plaintext_payloads", map[bool]string{true: "refused (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION=1)", false: "read as they are"}[p.Options().RequireEncryption])
	} else {
		log.Info("payloads are stored in plaintext in Temporal's history: set SANDBOX_PAYLOAD_KEYS to encrypt them (docs/SECURITY.md)")
	}
	if h.Client, err = temporalconn.Dial(ctx, conn, copts); err != nil {
		var de *temporalconn.DialError
		if !embedded && errors.As(err, &de) && de.Hint == "" {
			// The address came from TEMPORAL_ADDRESS (or a profile): say
			// that it replaces the embedded server (README "Configuration").
			de.Hint = "TEMPORAL_ADDRESS or the Temporal profile sets this address, which turns off the embedded server: start that server, or unset TEMPORAL_ADDRESS to embed one"
		}
		return err
	}
	h.ownsClient = true
	return nil
}

// openStore selects the metadata store: PostgreSQL when DATABASE_URL is set
// (migrations applied at start under an advisory lock, safe when several
// workers start at once), otherwise the embedded SQLite file
// <data dir>/sandbox.db. Both keep the host registry (store.Store).
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("store (DATABASE_URL): %w", err)
		}
		log.Info("metadata store: PostgreSQL (DATABASE_URL)")
		return st, nil
	}
	path := filepath.Join(cfg.DataDir, "sandbox.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	log.Info("metadata store: embedded SQLite", "path", path)
	return st, nil
}

// runtimeProvider builds the runtime provider SANDBOX_RUNTIME_PROVIDER names
// (the runtime catalog, runtimes.go): a named backend fails when unusable
// (bwrap and docker wrap sandboxapi.ErrRuntimeUnavailable with the reason);
// auto takes bwrap when usable, else docker when SANDBOX_RUNTIME_IMAGE is set
// and the daemon answers, else fails naming both reasons; local (no
// isolation) only when asked for explicitly. git is the host's git runner
// (the replicas' bundles); eg is the egress proxy of the limited network
// (bwrap, docker).
func runtimeProvider(ctx context.Context, cfg Config, git *gitx.Runner, hp hostParts, log *slog.Logger) (sandbox.RuntimeProvider, error) {
	if cfg.RuntimeProvider != autoProvider {
		return buildNamed(ctx, cfg, git, hp, log)
	}
	p, berr := buildBwrap(ctx, cfg, git, hp, log)
	if berr == nil {
		log.Info("runtime provider: bwrap (SANDBOX_RUNTIME_PROVIDER=auto)")
		return p, nil
	}
	derr := errors.New("SANDBOX_RUNTIME_IMAGE is not set")
	if cfg.RuntimeImage != "" {
		if p, derr = buildDocker(ctx, cfg, git, hp, log); derr == nil {
			log.Info("runtime provider: docker (SANDBOX_RUNTIME_PROVIDER=auto: bubblewrap is unusable)", "bwrap_error", berr)
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no isolated runtime is usable (SANDBOX_RUNTIME_PROVIDER=auto): bubblewrap: %v; docker: %v. "+
		"Install bubblewrap (apt-get install bubblewrap), or start Docker and set SANDBOX_RUNTIME_IMAGE, "+
		"or set SANDBOX_RUNTIME_PROVIDER=local to run commands on the host WITHOUT isolation",
		sandboxapi.ErrRuntimeUnavailable, sandboxapi.Message(berr), sandboxapi.Message(derr))
}

// depCaches are the host's dependency caches; with volumes, each new one
// is a volume of the shared caches' quota (bwrap.DefaultSharedDiskGB), or
// of a runtime's (SANDBOX_CACHE_SCOPE=workspace: the cache is its own).
func depCaches(cfg Config, vols *volume.Manager) *depcache.Caches {
	c := &depcache.Caches{Root: filepath.Join(cfg.DataDir, "depcache"), Scope: cfg.Environment.CacheScope, Volumes: vols,
		VolumeBytes: bwrap.DefaultSharedDiskGB << 30}
	if c.Scope == depcache.ScopeWorkspace {
		c.VolumeBytes = cfg.DiskQuotaGB() << 30
	}
	return c
}

// diskVolumes makes the host's disk volumes (SANDBOX_DISK_VOLUMES; images
// under <data dir>/volumes) and mounts again those a reboot unmounted,
// before anything uses their directories; nil when off, or auto on a host
// that cannot make them (logged). Errors: *ConfigError (on, and this host
// cannot; off, or auto on a host that cannot, while directories of this
// data directory are on volumes: serving them would serve the empty
// directories beneath; a quota larger than the host's file system takes in
// one image).
func diskVolumes(ctx context.Context, cfg Config, log *slog.Logger) (*volume.Manager, error) {
	dir := filepath.Join(cfg.DataDir, "volumes")
	held, err := volume.Held(dir)
	if err != nil {
		return nil, fmt.Errorf("disk volumes: %w", err)
	}
	if cfg.DiskVolumes == "off" {
		if len(held) > 0 {
			return nil, &ConfigError{"SANDBOX_DISK_VOLUMES", cfg.DiskVolumes, fmt.Sprintf(
				"%d worktrees, runtimes' /tmp or caches of this data directory are on disk volumes (images in %s, e.g. %s): their files are in the images; start with on (or auto)",
				len(held), dir, held[0])}
		}
		return nil, nil
	}
	vols, err := volume.New(ctx, dir, log)
	if err != nil {
		if cfg.DiskVolumes == "on" || len(held) > 0 {
			return nil, &ConfigError{"SANDBOX_DISK_VOLUMES", cfg.DiskVolumes, fmt.Sprintf("%v (%d directories of this data directory are on volumes)", err, len(held))}
		}
		log.Info("disk volumes: off (SANDBOX_DISK_VOLUMES=auto)", "reason", err.Error())
		return nil, nil
	}
	if err := vols.Fits(max(cfg.DiskQuotaGB(), bwrap.DefaultSharedDiskGB) << 30); err != nil {
		return nil, &ConfigError{"SANDBOX_RUNTIME_DISK_GB", strconv.FormatInt(cfg.DiskQuotaGB(), 10), err.Error()}
	}
	if err := vols.Remount(ctx); err != nil {
		// Each failure is logged by name; the others are served, and every
		// operation on one not mounted tries again or fails (workspace
		// onVolume), never the directory beneath.
		log.Error("disk volumes: some could not be mounted again; their workspaces fail until they are", "err", err)
	}
	log.Info("disk volumes: on", "dir", vols.Dir(), "size", fmt.Sprintf("%d GiB", cfg.DiskQuotaGB()))
	return vols, nil
}

// Stop stops the workers, the client (when owned), the embedded server and the store.
func (h *Host) Stop() {
	if h.stopMetrics != nil {
		h.stopMetrics()
		h.stopMetrics = nil
	}
	if h.stopHeartbeat != nil {
		h.stopHeartbeat()
		h.stopHeartbeat = nil
	}
	for _, w := range h.workers {
		w.Stop()
	}
	h.workers = nil
	if h.Egress != nil {
		h.Egress.Close() // limited runtimes reach nothing until a worker serves them again
	}
	if h.Client != nil && h.ownsClient {
		h.Client.Close()
	}
	if h.Dev != nil {
		h.Dev.Stop()
	}
	if h.Codec != nil {
		h.Codec.Close()
	}
	if h.Store != nil {
		_ = h.Store.Close()
	}
	if h.Metrics != nil {
		h.Metrics.Close()
	}
	// Last: everything that writes under the data dir has stopped.
	h.dataDirLock.Unlock()
	h.dataDirLock = nil
}

// RegisterSearchAttributes adds the missing custom search attributes
// (sandboxapi.SearchAttributeNames, typed by sandboxapi.SearchAttributeTypes:
// 9 Keyword, 2 KeywordList, 1 Bool, 1 Int) to the namespace; safe to call on every start and
// from several workers at once. An attribute that exists with another type
// is left alone (its queries then follow that type).
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, n := range sandboxapi.SearchAttributeNames {
		if _, ok := have.GetCustomAttributes()[n]; !ok {
			missing[n] = sandboxapi.SearchAttributeTypes[n]
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

func isAlreadyExists(err error) bool {
	var ae *serviceerror.AlreadyExists
	return errors.As(err, &ae) || strings.Contains(err.Error(), "already exists")
}

// controlPlane lists the endpoints (host:port) of cfg's own service that no
// command may reach through the egress proxy (egress.Options.ControlPlane):
// the Temporal frontend (TEMPORAL_ADDRESS, or the embedded one with its
// Web UI and codec server on the loopback), the metrics endpoint
// (SANDBOX_METRICS_ADDR) and the PostgreSQL store (DATABASE_URL's hosts).
func controlPlane(cfg Config) []string {
	var out []string
	if cfg.TemporalAddress != "" {
		out = append(out, cfg.TemporalAddress)
	} else {
		for _, p := range []int{cfg.TemporalPort, cfg.UIPort, cfg.Security.CodecPort} {
			if p > 0 {
				out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), net.JoinHostPort("::1", strconv.Itoa(p)))
			}
		}
	}
	if cfg.MetricsAddr != "" {
		out = append(out, cfg.MetricsAddr)
	}
	if cfg.DatabaseURL != "" {
		if pc, err := postgres.ParseDSN(cfg.DatabaseURL); err == nil {
			out = append(out, net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port))))
			for _, fb := range pc.ConnConfig.Fallbacks {
				out = append(out, net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port))))
			}
		}
	}
	return out
}
