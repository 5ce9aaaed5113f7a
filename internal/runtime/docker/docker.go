// Package docker is the Docker runtime (kind "docker"), the first
// write-capable isolated backend (docs/DESIGN.md "Ports", "Adapter
// Responsibilities", "Security Rules"). It talks to the Docker Engine API
// with the official client (github.com/docker/docker/client), negotiating
// the API version with the daemon, and never pulls images: an image must be
// present on the daemon (there is no registry here; .ci/test-image.sh builds
// the test image with debootstrap and `docker import`).
//
// # Containers
//
// One long-lived container per runtime, named ContainerPrefix+RuntimeSpec.ID
// and labeled LabelManagedBy=ManagedByValue, LabelRuntime and LabelWorkspace
// (plus RuntimeSpec.Labels). Create is idempotent: an existing container built
// from the same spec (LabelSpecHash) is reused as it is, one built from a
// different spec is replaced, a concurrent create conflict reuses the winner's
// container, and a container of that name that sandboxcore does not manage is
// never touched (sandboxapi.ErrConflict). The container's main process, under
// Docker's init (HostConfig.Init), is the runtime's supervisor
// (internal/runtime/supervisor: the static sandbox-supervisor binary,
// bind-mounted read-only at SupervisorPath from Options.StateDir), which
// keeps the background processes; commands run as `docker exec` processes.
//
// Mounts: the RuntimeSpec's mounts only, as bind mounts: the workspace's
// worktree at RuntimeSpec.Workdir (/workspace; read-only for analysis
// workspaces) and, so that git works inside, the repository cache's bare
// repository read-only at its own absolute host path (the worktree's ".git"
// file names it; see the activities' runtime spec). The container cannot change
// the cache: `git status`, `git log` and `git diff` work, while `git add`,
// `git commit` or `git worktree prune` fail or do nothing with git's own
// "Read-only file system" message (the agent commits through the workflow's
// commit update instead).
//
// Identity and hardening: the container runs as the uid:gid that owns the
// worktree directory on the host, so files it writes stay editable and
// removable by the worker and git sees one owner on both sides; every
// capability is dropped and no-new-privileges is set.
//
// Network (docs/SECURITY.md "Network modes"): RuntimeSpec.Network is the
// widest network a command may use, and each command (ExecRequest.Network,
// ProcessSpec.Network) runs in the container of the mode it asks for: the
// runtime's container ContainerName(id) for the runtime's own mode, and
// ContainerName(id)+"."+mode, created from the same spec when a command
// first asks for a narrower one (so a change of network never disturbs a
// command running elsewhere). They share the worktree, the repo cache and
// /tmp (the volume TmpVolume(id), which is HOME); each has its own network
// namespace, processes and root file system (what a command installs
// outside /tmp and the worktree stays in its own mode's container). "none"
// is Docker's none network (loopback only). "limited" is Docker's none
// network too, plus the runtime's egress directory (Options.Egress) mounted
// read-only, through which the supervisor's forwarder on 127.0.0.1:3128
// reaches the worker's egress proxy: the host, its own addresses, the
// metadata address and every other container stay unreachable, and
// HTTP(S)_PROXY point there. "default" is the same with the runtime's
// default egress endpoint, which reaches every public destination on any
// port and nothing else (never a bridge: from one, the host's and other
// containers' ports — Temporal's, the Web UI's — were reachable).
//
// Resources (RuntimeSpec.Resources): CPU → NanoCPUs, MemoryMB → Memory (and
// MemorySwap, so no swap), Pids → PidsLimit (DefaultPidsLimit when zero).
// DiskGB is not enforced (it needs storage-driver quotas).
//
// Environment: the container's environment is exactly the fixed base set
// (PATH=BasePath, HOME=Home, LANG=C.UTF-8, TERM=dumb), Options.BaseEnv and
// RuntimeSpec.Env (later wins); ExecRequest.Env is added per command. The
// worker's own environment is never passed. Variables the image itself
// declares (its ENV) stay visible unless overridden: they come from the
// image's author, not from the worker.
//
// # Commands
//
// See Runtime.ExecStream: exec create + attach with stdout and stderr
// demultiplexed (stdcopy), the exit code read from exec inspect and polled so
// that a stream held open by a background process cannot hang the call, and a
// timeout or cancellation that kills the command's whole process tree inside
// the container with a second exec. The image must provide /bin/sh.
//
// # Background processes
//
// Runtime implements sandbox.ProcessRuntime through the supervisor, reached
// on an abstract unix socket by `sandbox-supervisor relay` processes the
// worker runs with exec (a control connection each, pooled). The processes
// and their buffered output live in the container: a restarted worker (a
// new Provider) reads on from a client's offset and learns the exit code of
// a process that ended meanwhile. The socket is reachable by the
// container's own commands too; it gives them nothing they could not do
// themselves (the supervisor has the container's uid and no capability).
//
// Hibernation: Stop ends the background processes (exit reason
// runtime_stopped, archived under Options.StateDir and readable afterwards),
// then stops the runtime's containers (their processes die, the worktree is
// untouched); the next command starts the one it needs again. Destroy
// removes the containers, the /tmp volume and the egress endpoint, and never
// touches a mount's source.
//
// # Preview URLs
//
// PreviewURL (the preview_url update, docs/API.md "Preview URLs") forwards a
// loopback port of the worker's machine to a port of the running container
// (preview.go): Docker publishes ports only at container creation.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kind is the RuntimeProvider kind string of this backend.
const Kind = "docker"

// Container naming and labels ("labeled (managed-by=sandboxcore,
// workspace id, runtime id)").
const (
	// ContainerPrefix prefixes RuntimeSpec.ID to name a runtime's container.
	ContainerPrefix = "sandboxcore-"
	// LabelManagedBy marks every container and network this package creates;
	// its value is ManagedByValue.
	LabelManagedBy = "managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "sandboxcore"
	// LabelRuntime holds the runtime id (RuntimeSpec.ID).
	LabelRuntime = "sandboxcore.runtime"
	// LabelWorkspace holds the workspace id (RuntimeSpec.WorkspaceID).
	LabelWorkspace = "sandboxcore.workspace"
	// LabelSpecHash holds a hash of the spec the container was built from;
	// Create replaces a container whose hash differs.
	LabelSpecHash = "sandboxcore.spec-hash"
	// LabelNetwork holds the network mode of a runtime's container.
	LabelNetwork = "sandboxcore.network"
	// LabelSpec holds the runtime's spec (JSON, without labels and
	// allow-list), from which its containers of other modes are built.
	LabelSpec = "sandboxcore.spec"
)

// Defaults and limits.
const (
	// BasePath is the PATH every container starts with (RuntimeSpec.Env or
	// ExecRequest.Env may replace it); the same as the local runtime's.
	BasePath = procexec.BasePath
	// Home is HOME inside the container: the container's own /tmp, so tool
	// caches (pip, npm, go) never land in the worktree and its diff. It
	// survives Stop and is lost on Destroy.
	Home = "/tmp"
	// DefaultPidsLimit is the container's PidsLimit when ResourceHints.Pids is
	// zero (a fork bomb must not take the host down).
	DefaultPidsLimit = 4096
	// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	DefaultStopTimeout = 2 * time.Second
	// pingTimeout bounds the daemon probe in New.
	pingTimeout = 10 * time.Second
)

// Options configure a Provider. The zero value uses the daemon named by the
// environment (DOCKER_HOST, or the default socket) and requires every
// RuntimeSpec to name its image.
type Options struct {
	// Host is the daemon address, e.g. "unix:///var/run/docker.sock"; ""
	// means DOCKER_HOST or the client's default.
	Host string
	// Image is used when RuntimeSpec.Image is empty (SANDBOX_RUNTIME_IMAGE).
	// When set, New checks that the daemon has it.
	Image string
	// BaseEnv holds extra fixed variables added to every container's
	// environment after the built-in base set and before RuntimeSpec.Env. It
	// must not carry secrets meant for a single workspace.
	BaseEnv map[string]string
	// StopTimeout is Stop's grace period between SIGTERM and SIGKILL; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Logger receives lifecycle and exec records (never argv beyond Cmd[0],
	// env or output); nil discards them.
	Logger *slog.Logger
	// Supervisor is the static sandbox-supervisor binary, the containers'
	// main process (SANDBOX_SUPERVISOR_BINARY); "" finds it next to the
	// running executable or on PATH.
	Supervisor string
	// StateDir holds the copy of the supervisor the containers mount (the
	// daemon must see it at this same path), the runtimes' egress sockets
	// (egress/<runtime id>/) and the archived processes of stopped runtimes;
	// "" means os.TempDir()/sandboxcore-docker.
	StateDir string
	// Egress is the worker's egress proxy, the only way out of the limited
	// network: each runtime gets an endpoint of its own. nil: limited
	// containers reach nothing beyond their loopback (as with none).
	Egress *egress.Proxy
}

// Provider is the Docker sandbox.RuntimeProvider. It is safe for concurrent
// use; it keeps no runtime state of its own (the daemon is the source of
// truth), so a new Provider after a worker restart sees every container.
type Provider struct {
	cli         *client.Client
	host        string
	image       string
	baseEnv     map[string]string
	stopTimeout time.Duration
	log         *slog.Logger

	egress    *egress.Proxy
	modeMu    sync.Mutex // creating containers of other network modes
	stateDir  string
	sup       string // the supervisor binary the containers mount
	procs     procClients
	previewMu sync.Mutex
	previews  map[previewKey]*forwarder // preview.go
	// notes: each exec process's start (runtime id/process id → the time),
	// for its notice (Runtime.ExecNotice).
	notes procexec.Notes[time.Time]
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// New connects to the Docker daemon (API version negotiated with it) and
// checks that it answers and, when Options.Image is set, that the image is
// present. Errors wrap sandboxapi.ErrRuntimeUnavailable when the daemon cannot
// be reached (or Options.Host is malformed), and sandboxapi.ErrNotFound, naming
// the image, when the image is missing.
func New(ctx context.Context, opts Options) (*Provider, error) {
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: client for %q: %v", opts.Host, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{
		cli: cli, host: cli.DaemonHost(), image: opts.Image, baseEnv: maps.Clone(opts.BaseEnv),
		stopTimeout: opts.StopTimeout, log: log.With("runtime", Kind), egress: opts.Egress,
	}
	if p.stopTimeout <= 0 {
		p.stopTimeout = DefaultStopTimeout
	}
	p.stateDir = opts.StateDir
	if p.stateDir == "" {
		p.stateDir = filepath.Join(os.TempDir(), "sandboxcore-docker")
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		_ = cli.Close()
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: the daemon at %s does not answer: %v", p.host, err)
	}
	if opts.Image != "" {
		if err := p.checkImage(pctx, opts.Image); err != nil {
			_ = cli.Close()
			return nil, err
		}
	}
	if err := p.installSupervisor(opts.Supervisor); err != nil {
		_ = cli.Close()
		return nil, err
	}
	p.log.Debug("connected", "host", p.host, "api_version", cli.ClientVersion())
	return p, nil
}

// Close closes the preview forwarders and releases the client's
// connections. Runtimes keep running.
func (p *Provider) Close() error {
	p.closePreviews("")
	return p.cli.Close()
}

// Kind returns "docker".
func (p *Provider) Kind() string { return Kind }

// Capabilities reports the truth (docs/DESIGN.md "Ports"): isolated; a
// network per command (a container per network mode); preview URLs on a
// loopback port of the worker's machine (Provider.PreviewURL). Background
// processes, PTYs included, are Runtime's sandbox.ProcessRuntime.
func (p *Provider) Capabilities() sandbox.RuntimeCapabilities {
	return sandbox.RuntimeCapabilities{Isolated: true, PerCommandNetwork: true, PreviewURL: true, HostMounts: true, Processes: true}
}

// ContainerName returns the container name of runtime id: ContainerPrefix+id.
func ContainerName(id string) string { return ContainerPrefix + id }

// Create returns the runtime with spec.ID, creating and starting its
// container when missing (docs/DESIGN.md "Ports": RuntimeProvider.create,
// idempotent). An existing container built from an equal
// spec is returned in whatever state it is (a stopped one starts on the next
// command); one built from a different spec is removed and recreated (its
// running commands die).
//
// The spec must name an image (or Options.Image is used), have exactly one
// mount whose Target is spec.Workdir with an absolute Source that is an
// existing directory, and only absolute mount sources and targets; a mount
// whose Target equals its Source is bound at the symlink-free path (git
// records resolved paths in a worktree's ".git" file). Errors wrap
// sandboxapi.ErrInvalidArgument for a malformed spec, sandboxapi.ErrNotFound naming
// the image when the daemon does not have it, sandboxapi.ErrConflict when a
// container of that name is not managed by sandboxcore, and
// sandboxapi.ErrRuntimeUnavailable when the daemon fails or cannot be reached.
func (p *Provider) Create(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	b, err := p.build(spec, "")
	if err != nil {
		return nil, err
	}
	if err := p.attachEgress(spec, b); err != nil {
		return nil, err
	}
	r, created, err := p.createMain(ctx, spec, b)
	if err != nil {
		return nil, err
	}
	if created {
		// A new own container (a new spec, perhaps a narrower policy):
		// those of modes it no longer allows, or now runs itself, go.
		r.trim(ctx)
	}
	return r, nil
}

// createMain creates (or reuses, or replaces) the runtime's own container;
// created says it was made now.
func (p *Provider) createMain(ctx context.Context, spec sandbox.RuntimeSpec, b *built) (*Runtime, bool, error) {
	name := ContainerName(spec.ID)
	for attempt := 0; ; attempt++ {
		info, err := p.cli.ContainerInspect(ctx, name)
		switch {
		case err == nil:
			if err := ours(info.Config, spec.ID); err != nil {
				return nil, false, err
			}
			if info.Config.Labels[LabelSpecHash] == b.hash {
				return p.handle(spec.ID, b.root, b.workdir, &spec), false, nil
			}
			if attempt >= 2 {
				return nil, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "docker: container %s keeps changing under a concurrent create", name)
			}
			p.log.Info("replacing a runtime container built from another spec", "id", spec.ID, "container", name)
			p.dropClient(spec.ID)
			if err := p.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				return nil, false, p.mapErr(err, "replace container %s", name)
			}
			continue
		case !cerrdefs.IsNotFound(err):
			return nil, false, p.mapErr(err, "inspect container %s", name)
		}
		_, err = p.cli.ContainerCreate(ctx, b.config, b.host, nil, nil, name)
		switch {
		case err == nil:
		case cerrdefs.IsConflict(err) && attempt < 2:
			continue // created concurrently: inspect and reuse it
		case cerrdefs.IsNotFound(err):
			return nil, false, p.imageError(b.config.Image, err)
		default:
			return nil, false, p.mapErr(err, "create container %s", name)
		}
		if err := p.cli.ContainerStart(ctx, name, container.StartOptions{}); err != nil {
			return nil, false, p.mapErr(err, "start container %s", name)
		}
		p.log.Debug("runtime created", "id", spec.ID, "container", name, "image", b.config.Image, "user", b.config.User, "network", b.mode)
		return p.handle(spec.ID, b.root, b.workdir, &spec), true, nil
	}
}

// Get returns the runtime with id, or an error wrapping sandboxapi.ErrNotFound
// when no sandboxcore container of that name exists (sandboxapi.ErrConflict for a
// foreign container, sandboxapi.ErrRuntimeUnavailable when the daemon fails).
func (p *Provider) Get(ctx context.Context, id string) (sandbox.Runtime, error) {
	if err := sandboxapi.ValidateID("runtime id", id); err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %q not found", clip(id))
	}
	info, err := p.cli.ContainerInspect(ctx, ContainerName(id))
	if err != nil {
		return nil, p.mapErr(err, "runtime %s", id)
	}
	if err := ours(info.Config, id); err != nil {
		return nil, err
	}
	root, workdir := "", info.Config.WorkingDir
	for _, m := range info.Mounts {
		if m.Destination == workdir {
			root = m.Source
		}
	}
	var spec *sandbox.RuntimeSpec
	var stored sandbox.RuntimeSpec
	if json.Unmarshal([]byte(info.Config.Labels[LabelSpec]), &stored) == nil && stored.ID == id {
		spec = &stored
	}
	return p.handle(id, root, workdir, spec), nil
}

// List returns the sandboxcore runtimes whose labels contain every given
// label pair (nil or empty labels match all), sorted by id. Labels include
// the provider's own (LabelManagedBy, LabelRuntime, LabelWorkspace).
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]sandbox.RuntimeSummary, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManagedBy+"="+ManagedByValue))
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, p.mapErr(err, "list containers")
	}
	out := []sandbox.RuntimeSummary{}
	for _, c := range cs {
		id := c.Labels[LabelRuntime]
		if id == "" || !slices.Contains(c.Names, "/"+ContainerName(id)) {
			continue
		}
		ls := maps.Clone(c.Labels)
		delete(ls, LabelSpecHash)
		out = append(out, sandbox.RuntimeSummary{ID: id, State: stateOf(string(c.State)), Labels: ls})
	}
	slices.SortFunc(out, func(a, b sandbox.RuntimeSummary) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Destroy removes the runtime's container (killing its commands); a missing
// one is success. It never touches the workspace or any other mount source
// (docs/DESIGN.md "Rules").
// Errors wrap sandboxapi.ErrConflict for a container sandboxcore does not manage
// and sandboxapi.ErrRuntimeUnavailable when the daemon fails.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if sandboxapi.ValidateID("runtime id", id) != nil {
		return nil // no such container can exist
	}
	name := ContainerName(id)
	info, err := p.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return p.mapErr(err, "inspect container %s", name)
	}
	if err := ours(info.Config, id); err != nil {
		return err
	}
	p.dropClient(id)
	p.archive(id).Clear()
	// The containers of the runtime's other network modes, its /tmp and its
	// egress endpoint go with it.
	if err := p.removeModes(ctx, id, func(string) bool { return true }); err != nil {
		return err
	}
	defer p.detachEgress(id)
	p.closePreviews(id)
	if err := p.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		if !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "already in progress") {
			return p.mapErr(err, "remove container %s", name)
		}
		// Another Destroy of the same runtime is removing it: success once it is gone.
		if err := p.awaitRemoved(ctx, name); err != nil {
			return err
		}
	}
	if err := p.cli.VolumeRemove(ctx, TmpVolume(id), true); err != nil && !cerrdefs.IsNotFound(err) {
		p.log.Warn("runtime /tmp volume not removed", "id", id, "volume", TmpVolume(id), "error", err)
	}
	p.log.Debug("runtime destroyed", "id", id, "container", name)
	return nil
}

// awaitRemoved waits (at most removeWait) until the container name no longer
// exists. Errors: ErrRuntimeUnavailable when it is still there.
func (p *Provider) awaitRemoved(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, removeWait)
	defer cancel()
	for {
		_, err := p.cli.ContainerInspect(ctx, name)
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: container %s is still being removed after %s", name, removeWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeWait bounds the wait for a removal another call started.
const removeWait = 30 * time.Second

func (p *Provider) handle(id, root, workdir string, spec *sandbox.RuntimeSpec) *Runtime {
	return &Runtime{p: p, id: id, name: ContainerName(id), root: root, workdir: workdir, spec: spec}
}

// ours refuses a container that sandboxcore did not create for runtime id.
func ours(cfg *container.Config, id string) error {
	if cfg == nil || cfg.Labels[LabelManagedBy] != ManagedByValue || cfg.Labels[LabelRuntime] != id {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "docker: container %s exists but is not a sandboxcore runtime (labels %s=%s, %s=%s missing): it is left alone",
			ContainerName(id), LabelManagedBy, ManagedByValue, LabelRuntime, id)
	}
	return nil
}

// modeContainers lists runtime id's containers of other network modes
// (name → mode).
func (p *Provider) modeContainers(ctx context.Context, id string) (map[string]sandboxapi.Network, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManagedBy+"="+ManagedByValue), filters.Arg("label", LabelRuntime+"="+id))
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, p.mapErr(err, "list containers of runtime %s", id)
	}
	out := map[string]sandboxapi.Network{}
	for _, c := range cs {
		for _, n := range c.Names {
			n = strings.TrimPrefix(n, "/")
			if mode, ok := strings.CutPrefix(n, ContainerName(id)+"."); ok && sandboxapi.Network(mode).Valid() && c.Labels[LabelNetwork] == mode {
				out[n] = sandboxapi.Network(mode)
			}
		}
	}
	return out, nil
}

// removeModes removes the containers of runtime id's other network modes
// for which drop is true, ending their supervisors first (their
// background processes are archived).
func (p *Provider) removeModes(ctx context.Context, id string, drop func(name string) bool) error {
	names, err := p.modeContainers(ctx, id)
	if err != nil {
		return err
	}
	for name := range names {
		if !drop(name) {
			continue
		}
		(&Runtime{p: p, id: id, name: ContainerName(id)}).stopProcesses(ctx, name, false)
		if err := p.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			return p.mapErr(err, "remove container %s", name)
		}
	}
	return nil
}

// egressDir is runtime id's egress directory of the limited network (its
// limited container mounts it).
func (p *Provider) egressDir(id string) string { return filepath.Join(p.stateDir, "egress", id) }

// defaultSuffix ends the egress directory and endpoint name of a runtime's
// default network (runtime ids hold no '.').
const defaultSuffix = ".default"

// egressDirOf is the egress directory runtime id's container of network
// mode mounts: limited's or default's; "" for none or without a proxy.
func (p *Provider) egressDirOf(id string, mode sandboxapi.Network) string {
	switch {
	case p.egress == nil:
		return ""
	case mode == sandboxapi.NetworkLimited:
		return p.egressDir(id)
	case mode == sandboxapi.NetworkDefault:
		return p.egressDir(id + defaultSuffix)
	}
	return ""
}

// attachEgress serves the runtime's egress endpoints of the networks its
// policy allows — limited's (its allow-list) and default's (every public
// destination besides: egress.Policy.AnyPublic) — each in its directory
// (0700, owned by the containers' user), and stops serving the others.
func (p *Provider) attachEgress(spec sandbox.RuntimeSpec, b *built) error {
	if p.egress == nil {
		return nil
	}
	rules, _ := egress.ParseRules(spec.NetworkAllow) // checked by build
	for _, mode := range []sandboxapi.Network{sandboxapi.NetworkLimited, sandboxapi.NetworkDefault} {
		name, dir := spec.ID, p.egressDirOf(spec.ID, mode)
		if mode == sandboxapi.NetworkDefault {
			name += defaultSuffix
		}
		if !mode.Within(b.policy) {
			p.egress.Detach(name)
			_ = os.RemoveAll(dir)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: egress directory: %v", err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: egress directory: %v", err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(dir, int(b.uid), int(b.gid)); err != nil {
				return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: egress directory: %v", err)
			}
		}
		pol := egress.Policy{WorkspaceID: spec.WorkspaceID, RuntimeID: name, Allow: rules, AnyPublic: mode == sandboxapi.NetworkDefault}
		if err := p.egress.Attach(pol, filepath.Join(dir, egressSocket)); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: runtime %s: egress proxy: %v", spec.ID, err)
		}
	}
	return nil
}

// detachEgress stops serving runtime id's endpoints and removes their
// directories.
func (p *Provider) detachEgress(id string) {
	if p.egress == nil {
		return
	}
	for _, name := range []string{id, id + defaultSuffix} {
		p.egress.Detach(name)
		_ = os.RemoveAll(p.egressDir(name))
	}
}

// HasImage reports whether the daemon has the image ref, which a runtime
// spec may then name (activities.ImageChecker; images are never pulled).
// Errors: the daemon's, as sandbox kinds.
func (p *Provider) HasImage(ctx context.Context, ref string) (bool, error) {
	switch err := p.checkImage(ctx, ref); {
	case err == nil:
		return true, nil
	case errors.Is(err, sandboxapi.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

func (p *Provider) checkImage(ctx context.Context, image string) error {
	if _, err := p.cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return p.imageError(image, err)
		}
		return p.mapErr(err, "inspect image %s", image)
	}
	return nil
}

func (p *Provider) imageError(image string, err error) error {
	return sandboxapi.Errorf(sandboxapi.ErrNotFound, "docker: image %q is not present on the daemon at %s (images are never pulled: build or load it first, e.g. .ci/test-image.sh): %v", image, p.host, err)
}

// mapErr wraps a daemon error in the sandbox kind that fits it.
func (p *Provider) mapErr(err error, format string, args ...any) error {
	msg := "docker: " + fmt.Sprintf(format, args...)
	switch {
	case client.IsErrConnectionFailed(err):
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s: the daemon at %s cannot be reached", msg, p.host)
	case errors.Is(err, context.DeadlineExceeded):
		return sandboxapi.Wrap(sandboxapi.ErrTimeout, err, "%s", msg)
	case errors.Is(err, context.Canceled):
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s", msg)
	case cerrdefs.IsNotFound(err):
		return sandboxapi.Wrap(sandboxapi.ErrNotFound, err, "%s", msg)
	case cerrdefs.IsConflict(err):
		return sandboxapi.Wrap(sandboxapi.ErrConflict, err, "%s", msg)
	}
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s", msg)
}

func stateOf(s string) sandbox.RuntimeState {
	switch s {
	case "running":
		return sandbox.RuntimeRunning
	case "created", "exited", "paused":
		return sandbox.RuntimeStopped
	case "restarting":
		return sandbox.RuntimeStarting
	}
	return sandbox.RuntimeError // "removing", "dead"
}

func clip(s string) string { return sandboxapi.Clip(s, 64) }
