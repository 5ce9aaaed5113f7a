package bwrap

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Provider is the bubblewrap sandbox.RuntimeProvider. It is safe for
// concurrent use.
type Provider struct {
	bin      string
	scratch  string
	roPaths  []string
	hidden   []string
	baseEnv  map[string]string
	log      *slog.Logger
	asRoot   bool
	runtimes procexec.Registry[sandboxConfig]
	// sup is the supervisor binary as sandboxes execute it (an execute-only
	// copy in ctl, so that no process of a sandbox can read or trace it),
	// supHash a hash of its content; ctl is the control directory
	// (ScratchDir/.ctl, 0700): control sockets, logs, pid files, archives.
	sup, supHash, ctl string
	// cgroups applies RuntimeSpec.Resources; nil where no cgroup hierarchy
	// is writable (cgroupsWhy says why).
	cgroups    *cgroups
	cgroupsWhy string
	// egress serves the limited sandboxes (nil: none); its endpoints'
	// sockets live in egressRoot/<runtime id>/ (0711, each 0700, owned by
	// the sandbox's user).
	egress     *egress.Proxy
	egressRoot string
	// user is the credential a root worker's sandboxes of root-owned
	// worktrees run as, idmap the idmapped mounts that show them those
	// files as their own; both nil for a non-root worker.
	user  *syscall.Credential
	idmap *idmapper
	// diskReserve is Options.DiskReserve; sharedDiskGB Options.SharedDiskGB
	// (or its default).
	diskReserve, sharedDiskGB int64
	// volumes is Options.Volumes (nil: none).
	volumes *volume.Manager
	// shared are the disk quotas of the shared directories (dependency
	// caches) the runtimes mount.
	shared sharedQuotas
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// ResourceLimits reports whether sandboxes get cgroup resource limits
// (pids, memory, CPU), and if not, why.
func (p *Provider) ResourceLimits() (enforced bool, detail string) {
	if p.cgroups != nil {
		return true, p.cgroups.scheme
	}
	return false, p.cgroupsWhy
}

// Kind returns "bwrap".
func (p *Provider) Kind() string { return Kind }

// Capabilities reports the truth (docs/DESIGN.md "Ports"): isolated, a
// network per command (one sandbox per network mode); no preview URLs.
// Background processes, PTYs included, are Runtime's sandbox.ProcessRuntime.
func (p *Provider) Capabilities() sandbox.RuntimeCapabilities {
	return sandbox.RuntimeCapabilities{Isolated: true, PerCommandNetwork: true, HostMounts: true, Processes: true}
}

// Create returns the runtime with spec.ID, creating it in state running when
// missing (idempotent) and building its sandbox; after a worker restart it
// recreates the entry, reuses the scratch directory and reattaches to the
// sandbox the earlier worker left running when it was built from the same
// layout (its background processes and their output are there as they
// were). A sandbox that cannot be built now is not an error here: the next
// Exec or Start builds it or reports why. Creating an existing runtime on
// the same workdir replaces its spec and leaves its state alone; a changed
// layout (mounts, network, resources) rebuilds the sandbox on the next
// command, killing what ran in the old one (docs/DESIGN.md "The three things").
//
// The spec needs exactly one mount whose Target is spec.Workdir (an absolute
// clean path other than /, /tmp, /proc, /dev) with an absolute Source that is
// an existing directory; other mounts need absolute existing sources and
// absolute clean targets; a mount whose Target equals its Source is bound at
// the symlink-free path. Errors wrap sandboxapi.ErrInvalidArgument for a
// malformed spec and sandboxapi.ErrConflict when a runtime with spec.ID exists
// on a different workdir.
func (p *Provider) Create(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	cfg, err := p.resolve(spec)
	if err != nil {
		return nil, err
	}
	rt, err := p.runtimes.Create(spec, cfg.root, cfg, func(life *procexec.Lifecycle[sandboxConfig]) (sandbox.Runtime, error) {
		if err := p.makeScratch(ctx, cfg); err != nil {
			return nil, err
		}
		r := newRuntime(p, life)
		// Sandboxes left running by an earlier worker (their background
		// processes with their output) are taken over as they are.
		p.retireLegacy(ctx, spec.ID, r.archive)
		for _, m := range sandboxapi.NetworkModes {
			if sb := p.attachSandbox(ctx, spec.ID, m, p.layoutOf(cfg, m), cfg.base, r.archive); sb != nil {
				r.sbs[m] = sb
			}
		}
		p.log.Debug("runtime created", "id", spec.ID, "workdir", cfg.root, "network", cfg.network, "reattached", len(r.sbs))
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	r := rt.(*Runtime)
	r.warm(ctx)
	return r, nil
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
// and ends its sandbox (waiting for them, bounded by ctx), deletes its
// scratch directory (the sandbox's /tmp), its control files, its cgroup and
// its archived processes, and forgets it; a
// missing runtime is success. It never touches the workspace or any other
// mount source. A Runtime value kept by a caller reports RuntimeMissing
// afterwards and its calls fail with sandboxapi.ErrNotFound.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	rt, _ := p.runtimes.Get(id)
	life, ok := p.runtimes.Remove(id)
	if !ok {
		if sandboxapi.ValidateID("runtime id", id) == nil {
			// A runtime of an earlier process may have left its sandboxes
			// running, its control files and its scratch directory.
			p.retireLegacy(ctx, id, nil)
			for _, m := range sandboxapi.NetworkModes {
				if _, err := os.Lstat(p.modePath(id, m, ".sock")); err == nil {
					p.shutdown(ctx, id, m, &sandboxProc{client: supervisor.NewClient(p.modePath(id, m, ".sock"))}, nil)
				}
			}
			p.detachEgress(id, "")
			if cg := p.cgroups.existing(id); cg != nil {
				_ = cg.remove()
			}
			p.removeControl(id)
			return p.removeScratch(filepath.Join(p.scratch, id))
		}
		return nil
	}
	err := life.Destroy(ctx)
	if r, ok := rt.(*Runtime); ok {
		r.destroySandbox(ctx)
	}
	p.detachEgress(id, "")
	p.removeControl(id)
	if rerr := p.removeScratch(life.Conf().scratch); err == nil {
		err = rerr
	}
	p.log.Debug("runtime destroyed", "id", id)
	return err
}
