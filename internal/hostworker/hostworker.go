package hostworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/internal/credentials"
	"github.com/sandboxcore/sandboxcore/internal/devserver"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/repocache"
	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/postgres"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/workspace"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// Options adjust Start beyond the environment (tests, embedding).
type Options struct {
	// Logger receives the worker's own log; nil means slog.Default().
	Logger *slog.Logger
	// Credentials replaces the default chain (credentials file, then
	// GITHUB_TOKEN/GH_TOKEN) when set.
	Credentials sandbox.CredentialProvider
	// Client, when set, is used instead of dialing (or embedding) Temporal.
	Client client.Client
}

// Host is a running worker host.
type Host struct {
	Config Config
	// Client is connected to Temporal (owned by Host unless passed in Options).
	Client client.Client
	// Dev is the embedded Temporal server, nil when TEMPORAL_ADDRESS is set.
	Dev        *devserver.Server
	Store      sandbox.Store
	Activities *activities.Activities

	ownsClient bool
	workers    []worker.Worker
	log        *slog.Logger
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
	ok := false
	defer func() {
		if !ok {
			h.Stop()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	h.Store = st

	git, err := gitx.New(gitx.Options{AllowFile: cfg.AllowFileURLs, AllowHTTP: cfg.AllowHTTPURLs, HomeDir: filepath.Join(cfg.DataDir, "git-home")})
	if err != nil {
		return nil, err
	}
	repos, err := repocache.New(repocache.Options{Root: cfg.DataDir, Git: git, FreshFor: cfg.FetchFreshness, HostID: cfg.HostID, Logger: log})
	if err != nil {
		return nil, err
	}
	var runtimes sandbox.RuntimeProvider
	switch cfg.RuntimeProvider {
	case "local":
		runtimes = local.New(local.Options{Logger: log})
		log.Warn("runtime provider 'local' runs commands as plain host subprocesses with NO isolation (SANDBOX_RUNTIME_PROVIDER=local)")
	default:
		return nil, &ConfigError{"SANDBOX_RUNTIME_PROVIDER", cfg.RuntimeProvider, "unsupported"}
	}
	wss, err := workspace.New(workspace.Options{Git: git, Locker: repos, HostID: cfg.HostID, Logger: log, Isolated: runtimes.Capabilities().Isolated})
	if err != nil {
		return nil, err
	}
	creds := opts.Credentials
	if creds == nil {
		chain := credentials.Chain{}
		if cfg.CredentialsFile != "" {
			chain = append(chain, &credentials.File{Path: cfg.CredentialsFile})
		}
		creds = append(chain, credentials.Env{})
	}
	h.Activities = &activities.Activities{
		Store: st, Repos: repos, Workspaces: wss, Runtimes: runtimes, Credentials: creds,
		HostID: cfg.HostID, URLs: sandbox.URLPolicy{AllowFile: cfg.AllowFileURLs, AllowHTTP: cfg.AllowHTTPURLs},
		Settings: workflows.SessionSettings{IdleStop: cfg.IdleStop, IdleClose: cfg.IdleClose, RuntimeKind: runtimes.Kind(),
			StayOnSharedQueue: !cfg.SessionOnHostQueue, HostWait: cfg.HostWait},
		RuntimeImage: cfg.RuntimeImage, RuntimeNetwork: cfg.RuntimeNetwork, Logger: log,
	}

	if opts.Client != nil {
		h.Client = opts.Client
	} else {
		addr := cfg.TemporalAddress
		if addr == "" {
			saTypes := map[string]enumspb.IndexedValueType{}
			for _, n := range workflows.SearchAttributeNames {
				saTypes[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
			}
			uiPort := cfg.UIPort
			h.Dev, err = devserver.Start(devserver.Options{
				Port: cfg.TemporalPort, UIPort: uiPort, Namespace: cfg.Namespace,
				DatabaseFile: filepath.Join(cfg.DataDir, "temporal.db"), SearchAttributes: saTypes,
				LogFile: filepath.Join(cfg.DataDir, "temporal.log"),
			})
			if err != nil {
				return nil, err
			}
			addr = h.Dev.Address
		}
		h.Client, err = client.DialContext(ctx, client.Options{
			HostPort: addr, Namespace: cfg.Namespace,
			Logger: sdklog.NewStructuredLogger(log.With("component", "temporal-sdk")),
		})
		if err != nil {
			return nil, fmt.Errorf("temporal at %s: %w", addr, err)
		}
		h.ownsClient = true
	}
	if err := RegisterSearchAttributes(ctx, h.Client, cfg.Namespace); err != nil {
		return nil, err
	}

	shared := worker.New(h.Client, cfg.TaskQueue, worker.Options{})
	shared.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowType})
	h.Activities.Register(shared)
	hostQ := worker.New(h.Client, workflows.HostTaskQueue(cfg.HostID), worker.Options{})
	hostQ.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowType})
	h.Activities.Register(hostQ)
	for _, w := range []worker.Worker{shared, hostQ} {
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("start worker: %w", err)
		}
		h.workers = append(h.workers, w)
	}
	ok = true
	return h, nil
}

// openStore selects the metadata store: PostgreSQL when DATABASE_URL is set
// (migrations applied at start under an advisory lock, safe when several
// workers start at once), otherwise the embedded SQLite file
// <data dir>/sandbox.db. Both also implement store.HostRegistry.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (sandbox.Store, error) {
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

// Stop stops the workers, the client (when owned), the embedded server and the store.
func (h *Host) Stop() {
	for _, w := range h.workers {
		w.Stop()
	}
	h.workers = nil
	if h.Client != nil && h.ownsClient {
		h.Client.Close()
	}
	if h.Dev != nil {
		h.Dev.Stop()
	}
	if h.Store != nil {
		_ = h.Store.Close()
	}
}

// RegisterSearchAttributes adds the missing custom search attributes
// (workflows.SearchAttributeNames, all Keyword) to the namespace; safe to call
// on every start and from several workers at once.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, n := range workflows.SearchAttributeNames {
		if _, ok := have.GetCustomAttributes()[n]; !ok {
			missing[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
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
