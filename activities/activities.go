// Package activities holds the thin activity shims of sandboxcore: each
// validates its input, loads the workspace row, calls the ports, returns
// their typed errors (translated into Temporal application errors with the
// stable sandbox error types once, by ErrorTranslation), and heartbeats
// while it waits. Every activity is idempotent: names derive
// from ids, create-conflict means reuse, delete-not-found means success.
//
// Where each concern lives: activities.go (the Activities, registered by
// method set: each exported method is an activity), errors.go (error
// translation), acquire.go (locate, acquire, branch checks), workspace.go
// (the workspace row: load, repair, last use), files.go (read, write, edit,
// list, search), git.go (status, diff, log, commit), push.go, merge.go,
// exec.go (exec and its output) with execlock.go and process.go (commands as
// runtime processes), runtime.go (runtime specs, hibernate), environment.go,
// prepared.go, network.go, preview.go, content.go, lifecycle.go
// (checkpoints, fork, cleanup), destroy.go (destroy, restore), eviction.go,
// eviction_plan.go, eviction_remove.go, eviction_signal.go, fanout.go,
// overlaps.go, stream.go, and the worker interceptors (interceptors.go,
// heartbeat.go, inspections.go).
package activities

import (
	"context"
	"log/slog"
	"net/netip"
	"reflect"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/execoutput"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Store is the metadata store the activities need (docs/DESIGN.md "Ports",
// "Storage model"): the rows of sandbox.Store, and the host registry's
// listing, from which EvictionHosts plans for every registered host.
// *sqlite.Store, *postgres.Store and *store.Remembering implement it.
type Store interface {
	sandbox.Store
	// ListHosts returns every registered worker host ordered by host id, as
	// a non-nil slice (store.HostRegistry). Errors: the store's.
	ListHosts(ctx context.Context) ([]store.Host, error)
}

var _ Store = (*store.Remembering)(nil)

// Activities are registered once per worker; every field is required but
// Logger and Now.
type Activities struct {
	Store       Store
	Repos       sandbox.RepoCacheProvider
	Workspaces  sandbox.WorkspaceProvider
	Runtimes    sandbox.RuntimeProvider
	Credentials sandbox.CredentialProvider
	// Remote pushes and reads remote tips (push, create_pull_request); nil
	// rejects those updates.
	Remote sandbox.RemoteGit
	// Access checks a user's read access before cached content is served on
	// acquire; nil skips the check.
	Access sandbox.AccessVerifier
	// CodeHost opens pull requests; nil rejects create_pull_request.
	CodeHost sandbox.CodeHost
	// Backups saves an evicted workspace's work and restores it when the
	// workspace is acquired again (eviction.go); nil: workspaces with
	// unsaved work are never evicted.
	Backups sandbox.WorkspaceBackupProvider
	// Outputs keeps the whole output of cut exec results (keep_output,
	// docs/API.md "Kept output"); nil: nothing is kept and read_output is
	// SandboxCommandRejected.
	Outputs *execoutput.Store
	// HostID is this worker host's id (SANDBOX_HOST_ID).
	HostID string
	// URLs is the repository URL policy (SANDBOX_ALLOW_FILE_URLS, SANDBOX_ALLOW_HTTP_URLS).
	URLs sandboxapi.URLPolicy
	// Settings are handed to every session this host serves.
	Settings wire.SessionSettings
	// RuntimeImage fills every RuntimeSpec.
	RuntimeImage string
	// RuntimeNetwork is the network policy of a workspace whose request
	// names none (SANDBOX_RUNTIME_NETWORK; "" = limited), NetworkMax the
	// widest a request may ask for (SANDBOX_NETWORK_MAX; "" = the wider of
	// limited and RuntimeNetwork), NetworkAllow the worker's allow-list of
	// the limited network (SANDBOX_NETWORK_ALLOW, canonical entries),
	// which each workspace's own entries extend (docs/SECURITY.md "Network
	// modes").
	RuntimeNetwork sandboxapi.Network
	NetworkMax     sandboxapi.Network
	NetworkAllow   []string
	// HostAddrs lists the worker host's addresses, which a workspace's own
	// allow-list entries may not cover (checkWorkspaceAllow); nil = the
	// host's interface addresses (egress.HostAddrs).
	HostAddrs func() []netip.Addr
	// RuntimeResources, when not nil, are the resource hints of every
	// RuntimeSpec (a copy each).
	RuntimeResources *sandbox.ResourceHints
	// DepCaches, when not nil, are this host's dependency caches
	// (SANDBOX_CACHE_SCOPE, docs/RUNTIMES.md "Dependency caches"),
	// mounted into every runtime whose provider reports HostMounts.
	DepCaches *depcache.Caches
	// NoSetup: repositories' setup commands are never run (SANDBOX_SETUP=off;
	// docs/RUNTIMES.md "Setup"): the environment lists them with a problem.
	NoSetup bool
	// RepoImages are the patterns (path.Match) of the repository-named
	// images a runtime with images runs instead of RuntimeImage
	// (SANDBOX_REPO_IMAGES; environment.go runtimeImage).
	RepoImages []string
	Logger     *slog.Logger
	Now        func() time.Time

	// SkipSubmodules leaves submodules uninitialised, reported in the
	// handle and status (SANDBOX_SUBMODULES=off; content.go).
	SkipSubmodules bool

	touchMu sync.Mutex
	touched map[string]time.Time

	// changes keeps the change summaries of overlaps (overlaps.go).
	changes changeCache
	// repoEnvs keeps the workspaces' repository environments (environment.go).
	repoEnvs repoEnvCache

	// execMu guards execs: each workspace's host-side exec lock (execlock.go).
	execMu sync.Mutex
	execs  map[string]*execState
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// Registerer is what Register needs of a worker.
type Registerer interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}

// Register registers a's session activities on w by method set: every
// exported method of *Activities is an activity, named
// wire.SessionActivityPrefix and the method's name ("sandbox.ReadFile";
// the operation table's default, wire.OpActivity). A method that is not an
// activity does not belong on *Activities: registration refuses it.
func Register(w Registerer, a *Activities) {
	w.RegisterActivityWithOptions(a, activity.RegisterOptions{Name: wire.SessionActivityPrefix})
}

// Names returns the names Register registers, sorted (for the checks of
// the operation table against the activities).
func Names() []string {
	t := reflect.TypeFor[*Activities]()
	names := make([]string, 0, t.NumMethod())
	for m := range t.Methods() {
		names = append(names, wire.SessionActivityPrefix+m.Name)
	}
	return names
}
