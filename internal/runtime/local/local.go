// Package local is the plain-subprocess runtime (kind "local"): commands run
// as child processes of the worker, in the workspace directory on the host,
// with a small fixed environment (never the worker's own) and bounded output.
//
// It is NOT an isolation boundary (Capabilities().Isolated is false): a command
// can read and write anything the worker's user can, reach the network
// whatever RuntimeSpec.Network says, and ignore read-only mounts. Use it only
// when asked for explicitly (DESIGN.md "Embedded default and production");
// bubblewrap and Docker are the isolating runtimes.
//
// Process model (DESIGN.md "Non-negotiables: Exec"): every command is the
// leader of its own process group. The whole group is sent SIGKILL on
// timeout, on cancellation of the caller's context, on Stop/Destroy, and also
// as soon as the leader exits: a command cannot leave background processes
// behind (`sh -c 'server &'` starts a server that dies with the call). A
// process that leaves the group (setsid, setpgid) escapes that kill; its
// hold on the output pipes is cut after a short grace period so the call
// still returns.
//
// Background processes (Runtime implements sandbox.ProcessRuntime) are kept
// by a supervisor process on the host (internal/runtime/supervisor), started
// on the first one, in a session of its own without a parent-death signal:
// outside the worker's process tree, so they and their buffered output
// survive a worker restart, and a new worker's Create with the same spec
// reattaches (its control socket and archived processes are in
// Options.StateDir). Stop and Destroy end them.
//
// Runtimes live in an in-memory map: after a worker restart Create with the
// same spec recreates the entry. Nothing in this package deletes a file but
// its own state files.
package local

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kind is the RuntimeProvider kind string of this backend.
const Kind = "local"

// Options configure a Provider. The zero value is ready to use.
type Options struct {
	// Logger receives debug records of runtime lifecycle and exec calls
	// (command name, exit code, duration; never argv beyond Cmd[0], env or output).
	// nil discards them.
	Logger *slog.Logger
	// BaseEnv holds extra fixed variables added to every command's environment
	// after the built-in base set and before RuntimeSpec.Env and ExecRequest.Env
	// (later sources win). It must not carry secrets meant for a single workspace.
	BaseEnv map[string]string
	// Supervisor is the sandbox-supervisor binary that keeps background
	// processes (SANDBOX_SUPERVISOR_BINARY); "" finds it next to the running
	// executable or on PATH when the first one starts.
	Supervisor string
	// StateDir holds each runtime's supervisor control socket, log and
	// archived processes (mode 0700); "" means
	// os.TempDir()/sandboxcore-local-<uid>.
	StateDir string
}

// Provider is the local subprocess sandbox.RuntimeProvider (docs/DESIGN.md
// "Ports", "Rules" 7). It is safe for
// concurrent use.
type Provider struct {
	log        *slog.Logger
	baseEnv    map[string]string
	supervisor string
	stateDir   string
	runtimes   procexec.Registry[struct{}]
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// New returns a Provider with no runtimes.
func New(opts Options) *Provider {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		log:        log.With("runtime", Kind),
		baseEnv:    maps.Clone(opts.BaseEnv),
		supervisor: opts.Supervisor,
		stateDir:   stateDirFor(opts.StateDir),
	}
}

// Kind returns "local".
func (p *Provider) Kind() string { return Kind }

// Capabilities reports the truth (docs/DESIGN.md "Ports", "Rules" 7): no
// preview URLs and no isolation (Isolated false). Background processes,
// PTYs included, are Runtime's sandbox.ProcessRuntime.
func (p *Provider) Capabilities() sandbox.RuntimeCapabilities {
	// A command may ask for any network up to the runtime's: none is
	// enforced here, so PerCommandNetwork is as true as Network itself.
	return sandbox.RuntimeCapabilities{PerCommandNetwork: true, HostMounts: true, Processes: true}
}

// Create returns the runtime with spec.ID, creating it in state running when
// missing (idempotent; after a worker restart it simply recreates the entry).
// Source: docs/DESIGN.md "Ports" (RuntimeProvider.create, RuntimeSpec).
//
// The workdir is the host directory given as Source of the one Mount whose
// Target equals spec.Workdir; it must be an absolute path to an existing
// directory. Other mounts are ignored (a subprocess cannot bind paths) and
// Mount.Writable, Network and Resources are not enforced (the runtime is not
// isolated). Errors wrap sandboxapi.ErrInvalidArgument for a malformed spec
// (bad id, env, or workdir mount) and sandboxapi.ErrConflict when a runtime with
// spec.ID already exists on a different workdir. Creating an existing runtime
// updates its Env and Labels and leaves its state alone.
func (p *Provider) Create(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	if err := sandboxapi.ValidateID("runtime id", spec.ID); err != nil {
		return nil, err
	}
	if err := runspec.ValidateEnv(spec.Env); err != nil {
		return nil, err
	}
	root, mount, err := runspec.ResolveWorkdir(spec)
	if err != nil {
		return nil, err
	}
	return p.runtimes.Create(spec, root, struct{}{}, func(life *procexec.Lifecycle[struct{}]) (sandbox.Runtime, error) {
		if !mount.Writable {
			p.log.Warn("local runtime cannot enforce a read-only workdir mount", "id", spec.ID)
		}
		if spec.Network == sandboxapi.NetworkNone || spec.Network == sandboxapi.NetworkLimited {
			p.log.Warn("local runtime cannot restrict the network", "id", spec.ID, "network", spec.Network)
		}
		p.log.Debug("runtime created", "id", spec.ID, "workdir", root)
		r := &Runtime{p: p, life: life}
		r.initProcesses()
		return r, nil
	})
}

// Get returns the runtime with id, or an error wrapping sandboxapi.ErrNotFound.
func (p *Provider) Get(ctx context.Context, id string) (sandbox.Runtime, error) {
	return p.runtimes.Get(id)
}

// List returns the runtimes whose labels contain every given label pair (nil
// or empty labels match all), sorted by id.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]sandbox.RuntimeSummary, error) {
	return p.runtimes.List(labels), nil
}

// Destroy kills the runtime's running commands and background processes
// (waiting for them, bounded by ctx), deletes its supervisor's files and
// archived processes, and forgets it; a missing runtime is success. It never touches the
// workspace files. A Runtime value kept by a caller reports RuntimeMissing
// afterwards and its calls fail with sandboxapi.ErrNotFound.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	rt, _ := p.runtimes.Get(id)
	life, ok := p.runtimes.Remove(id)
	if !ok {
		if sandboxapi.ValidateID("runtime id", id) == nil {
			// A supervisor an earlier worker left running.
			sock := p.statePath(id, ".sock")
			if _, err := os.Lstat(sock); err == nil {
				sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, _ = supervisor.NewClient(sock).Shutdown(sctx, 5*time.Second)
				cancel()
			}
			for _, s := range []string{".sock", ".log", ".archive"} {
				_ = os.Remove(p.statePath(id, s))
			}
		}
		return nil
	}
	p.log.Debug("runtime destroyed", "id", id)
	err := life.Destroy(ctx)
	if r, ok := rt.(*Runtime); ok {
		r.stopProcesses(ctx, true)
	}
	return err
}
