// Package bwrap is the bubblewrap runtime (kind "bwrap"): the isolated local
// runtime and `make run`'s default where bwrap is installed. It
// is the read-only isolation of analysis workspaces
// and gives write-capable isolation without Docker.
//
// Each runtime has long-lived bubblewrap sandboxes, one per network mode
// its commands use (docs/SECURITY.md "Network modes"): the one of its own
// network (RuntimeSpec.Network) is built on Create or Start (and again by
// the first command after Stop), one of a narrower mode when a command
// first asks for it (ExecRequest.Network, ProcessSpec.Network), and all end
// with Stop and Destroy. Each one's pid namespace's init is its supervisor
// (internal/runtime/supervisor): every command is spawned by it inside the
// namespaces and mounts already built, so a command costs a request and a
// fork/exec, not a new sandbox (docs/BENCHMARKS.md). A sandbox has:
//
//   - new user, pid, ipc, uts, network (loopback only; never the host's)
//     and (when possible) cgroup namespaces. The "limited" and "default"
//     ones also mount their egress directory read-only at egressMount,
//     where the worker's egress proxy (Options.Egress) serves the
//     runtime's endpoint of that mode (limited: the allow-list; default:
//     every public destination besides): its supervisor relays
//     127.0.0.1:3128 there, and its commands get HTTP(S)_PROXY pointing at
//     it; nothing else leaves the namespace. The sandboxes of
//     one runtime share the mounts, /tmp and the cgroup, not their
//     processes (each mode its own pid namespace: a command cannot trace
//     or take sockets from a process of a wider mode).
//   - a root of its own, read-only (--remount-ro /), holding only: the host's
//     system directories, read-only (Options.ReadOnlyPaths, by default
//     DefaultReadOnlyPaths: /usr, /etc, /opt and the /bin, /sbin, /lib*
//     links or directories), with the secrets of DefaultHiddenPaths and
//     Options.HiddenPaths masked; a fresh /proc and a minimal /dev; the
//     runtime's private scratch directory as /tmp (HOME=/tmp: it survives
//     between commands and Stop, and Destroy deletes it); and the spec's
//     mounts: the worktree at RuntimeSpec.Workdir (/workspace), read-write or
//     read-only as the mount says (read-only for analysis workspaces), and the
//     repository cache's bare repository read-only at its own path, so git
//     works inside while the cache cannot be changed. Nothing else of the host
//     is visible: not /home, /root, /run (no Docker socket), /var, the data
//     directory, other workspaces, the worker's credentials, the supervisor's
//     binary or its control socket.
//   - every command's environment exactly PATH=BasePath, HOME=Home,
//     LANG=C.UTF-8, TERM=dumb, in the limited network the proxy variables
//     (procexec.ProxyEnv), Options.BaseEnv, RuntimeSpec.Env and
//     ExecRequest.Env (later wins); the sandbox itself starts with a cleared
//     environment (--clearenv);
//   - --new-session for the sandbox and a session of its own for every
//     command (no terminal to inject into; a PTY process gets its own
//     pseudo-terminal);
//   - when the worker runs as root, no capability at all (--cap-drop ALL)
//     and, when the worktree belongs to another user, that user's uid:gid
//     (files the command writes stay the owner's).
//   - a cgroup with RuntimeSpec.Resources' limits (pids: DefaultPidsLimit
//     unless set, on a child cgroup in which every command is born, so that a
//     fork bomb cannot starve the supervisor; memory without swap and a CPU
//     quota for the whole sandbox) when the worker can write
//     a cgroup v2 or v1 hierarchy with the pids, memory and cpu controllers
//     (Provider.ResourceLimits says; without one the provider logs a warning
//     and sandboxes run without limits). A command the memory limit killed
//     exits 137 with a notice on stderr.
//
// Process model: the supervisor is pid 1 of the sandbox and cannot be
// signalled from inside; it is non-dumpable and runs from an execute-only
// copy of its binary, so no command can trace it or reach its descriptors;
// its control socket is a listening socket on a host path in the provider's
// control directory (ScratchDir/.ctl, 0700, never mounted) that it inherits.
// A command's whole tree dies when the command exits, times out, is
// cancelled, or the runtime stops, however it daemonized; only background
// processes (Runtime implements sandbox.ProcessRuntime) outlive their
// start. The sandbox runs in a session of its own without a parent-death
// signal: it, its background processes and their buffered output survive a
// worker killed with SIGKILL, and a restarted worker's Create with the same
// spec reattaches to it (Provider.Create). Ending the supervisor ends the
// pid namespace and everything in it.
//
// Runtimes live in an in-memory map, as in the local runtime; after a worker
// restart Create with the same spec recreates the entry, finds the scratch
// directory and the running sandbox again.
package bwrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kind is the RuntimeProvider kind string of this backend.
const Kind = "bwrap"

// Fixed environment and defaults.
const (
	// BasePath is the PATH every command starts with (RuntimeSpec.Env or
	// ExecRequest.Env may replace it); the same as the local runtime's.
	BasePath = procexec.BasePath
	// Home is HOME inside the sandbox: the runtime's private /tmp, so tool
	// caches never land in the worktree and its diff.
	Home = "/tmp"
	// probeTimeout bounds the usability probe in New.
	probeTimeout = 10 * time.Second
)

// DefaultReadOnlyPaths are the host paths a sandbox sees, read-only, when
// Options.ReadOnlyPaths is nil: the system directories (missing ones are
// skipped; symbolic links, such as /bin → usr/bin, are recreated as links).
var DefaultReadOnlyPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// procCovered are the parts of /proc every sandbox sees read-only (where
// the host has them): the sysctls, the SysRq trigger, interrupt and bus
// settings, file-system tunables; /sys is never mounted.
var procCovered = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}

// DefaultHiddenPaths are always masked inside the sandbox (an empty
// directory or file instead): password hashes and private keys under /etc.
var DefaultHiddenPaths = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d"}

// Options configure a Provider. The zero value finds bwrap on PATH and keeps
// scratch directories under os.TempDir().
type Options struct {
	// Binary is the bwrap executable; "" looks "bwrap" up on the worker's PATH.
	Binary string
	// ScratchDir holds each runtime's private /tmp (ScratchDir/<runtime id>,
	// mode 0700, owned by the sandbox's user); "" means
	// os.TempDir()/sandboxcore-bwrap. Created (0711: traversable, not
	// listable) when missing.
	ScratchDir string
	// ReadOnlyPaths replaces DefaultReadOnlyPaths (absolute host paths).
	ReadOnlyPaths []string
	// HiddenPaths are masked in addition to DefaultHiddenPaths when they lie
	// under a read-only path (e.g. a credentials file under /etc, the data
	// directory under /opt). Absolute host paths.
	HiddenPaths []string
	// BaseEnv holds extra fixed variables added to every command's environment
	// after the built-in base set and before RuntimeSpec.Env and
	// ExecRequest.Env. It must not carry secrets meant for a single workspace.
	BaseEnv map[string]string
	// Logger receives lifecycle and exec records (never argv beyond Cmd[0],
	// env or output); nil discards them.
	Logger *slog.Logger
	// Supervisor is the sandbox-supervisor binary (SANDBOX_SUPERVISOR_BINARY);
	// "" finds it next to the running executable or on PATH
	// (supervisor.Find).
	Supervisor string
	// NoCgroups disables resource limits even where a cgroup hierarchy is
	// writable.
	NoCgroups bool
	// Egress is the worker's egress proxy, the only way out of the limited
	// network (docs/SECURITY.md "Network modes"): each runtime gets an
	// endpoint of its own. nil: commands with the limited network reach
	// nothing beyond their loopback (as with none).
	Egress *egress.Proxy
	// SandboxUID and SandboxGID are the host user and group a root worker's
	// sandboxes run as when the worktree belongs to root
	// (SANDBOX_RUNTIME_UID, SANDBOX_RUNTIME_GID); 0 means DefaultSandboxUID
	// and DefaultSandboxGID (root is never a sandbox's user). Ignored by a
	// non-root worker, whose sandboxes run as the worker's own user.
	SandboxUID, SandboxGID uint32
}

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
}

var _ sandbox.RuntimeProvider = (*Provider)(nil)

// New finds bwrap and checks once that it can build the sandbox this package
// uses (user, pid, ipc, uts and net namespaces, a read-only root) by running
// /bin/true in it. Errors wrap sandboxapi.ErrRuntimeUnavailable with the reason:
// bwrap not installed, or the probe's own message (e.g. unprivileged user
// namespaces disabled: kernel.unprivileged_userns_clone=0 or
// user.max_user_namespaces=0, or an AppArmor policy that denies them), or,
// with a root worker, more than maxMasked root-only paths to mask.
func New(ctx context.Context, opts Options) (*Provider, error) {
	bin := opts.Binary
	if bin == "" {
		bin = "bwrap"
	}
	full, err := exec.LookPath(bin)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: %s is not installed (apt-get install bubblewrap): %v", bin, err)
	}
	scratch := opts.ScratchDir
	if scratch == "" {
		scratch = filepath.Join(os.TempDir(), "sandboxcore-bwrap")
	}
	if !filepath.IsAbs(scratch) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "bubblewrap: scratch directory %q is not absolute", scratch)
	}
	if err := os.MkdirAll(scratch, 0o711); err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
	}
	if os.Geteuid() == 0 {
		// Sandboxes of other users (see resolve) must traverse it to bind
		// their own 0700 directory; none can list it.
		_ = os.Chmod(scratch, 0o711)
	}
	ro := opts.ReadOnlyPaths
	if ro == nil {
		ro = DefaultReadOnlyPaths
	}
	for _, p := range append(slices.Clone(ro), opts.HiddenPaths...) {
		if !runspec.BelowRoot.Allowed(p) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "bubblewrap: path %q is not an absolute clean path below /", p)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{
		bin: full, scratch: scratch, roPaths: slices.Clone(ro),
		hidden:  append(slices.Clone(DefaultHiddenPaths), opts.HiddenPaths...),
		baseEnv: maps.Clone(opts.BaseEnv), log: log.With("runtime", Kind),
		asRoot: os.Geteuid() == 0, egress: opts.Egress, egressRoot: filepath.Join(scratch, ".egress"),
	}
	if p.egress != nil {
		if err := os.MkdirAll(p.egressRoot, 0o711); err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: egress directory: %v", err)
		}
		_ = os.Chmod(p.egressRoot, 0o711)
	}
	if p.asRoot {
		// A root worker's sandbox never runs as the host's root: the kernel
		// checks the uid, not a capability, for much of what it exposes
		// (sysctls under /proc/sys, root-owned files of /proc), so uid 0 in
		// a sandbox would be host root whatever capabilities it dropped.
		uid, gid := opts.SandboxUID, opts.SandboxGID
		if uid == 0 {
			uid = DefaultSandboxUID
		}
		if gid == 0 {
			gid = DefaultSandboxGID
		}
		p.user = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
		if p.idmap, err = newIDMapper(scratch, uid, gid); err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable,
				"bubblewrap with a root worker: %v (sandboxes run as uid %d through idmapped mounts, Linux 5.12 or later on ext4, xfs, btrfs or tmpfs; or run the worker as a non-root user)", err, uid)
		}
		// And it sees what any local user could: everything not
		// world-readable in the read-only system paths is masked too.
		extra, truncated := notWorldReadable(ro)
		if truncated { // fail closed: the rest would be readable
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable,
				"bubblewrap with a root worker: more than %d root-only paths under %v to mask; run the worker as a non-root user", maxMasked, ro)
		}
		p.hidden = append(p.hidden, extra...)
	}
	if err := p.probe(ctx); err != nil {
		return nil, err
	}
	if err := p.installSupervisor(opts.Supervisor); err != nil {
		return nil, err
	}
	if opts.NoCgroups {
		p.cgroupsWhy = "disabled (Options.NoCgroups)"
	} else if p.cgroups, p.cgroupsWhy = newCgroups(scratch); p.cgroups != nil {
		p.log.Info("bubblewrap runtimes get resource limits", "cgroups", p.cgroups.scheme)
	} else {
		p.log.Warn("bubblewrap runtimes run WITHOUT resource limits (no pids, memory or CPU limit): no writable cgroup hierarchy with the pids, memory and cpu controllers", "reason", p.cgroupsWhy)
	}
	return p, nil
}

// ResourceLimits reports whether sandboxes get cgroup resource limits
// (pids, memory, CPU), and if not, why.
func (p *Provider) ResourceLimits() (enforced bool, detail string) {
	if p.cgroups != nil {
		return true, p.cgroups.scheme
	}
	return false, p.cgroupsWhy
}

// installSupervisor finds the supervisor binary and installs an
// execute-only copy (mode 0111) in the control directory: a process
// executing a file it may not read starts non-dumpable, so no command in a
// sandbox can ptrace a supervisor or shim or open their descriptors through
// /proc, even in the instant before they make themselves non-dumpable.
func (p *Provider) installSupervisor(explicit string) error {
	src, err := supervisor.Find(explicit)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: the runtime supervisor: %v", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: the runtime supervisor: %v", err)
	}
	sum := sha256.Sum256(data)
	p.supHash = hex.EncodeToString(sum[:8])
	p.ctl = filepath.Join(p.scratch, ".ctl")
	if err := os.MkdirAll(p.ctl, 0o700); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: control directory: %v", err)
	}
	_ = os.Chmod(p.ctl, 0o700)
	dst := filepath.Join(p.ctl, supervisor.BinaryName+"-"+p.supHash)
	if fi, err := os.Stat(dst); err == nil && fi.Mode().Perm() == 0o111 && fi.Size() == int64(len(data)) {
		p.sup = dst
		return nil
	}
	tmp := dst + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o700); err == nil && os.Chmod(tmp, 0o111) == nil && os.Rename(tmp, dst) == nil {
		p.sup = dst
		return nil
	}
	_ = os.Remove(tmp)
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: cannot install the runtime supervisor in %s", p.ctl)
}

// probe runs /bin/true in the sandbox this package builds (network none).
func (p *Provider) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(p.scratch, ".probe-")
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: %v", err)
	}
	defer os.RemoveAll(dir)
	cfg := sandboxConfig{scratch: dir, workdir: "/workspace", cwd: "/workspace",
		mounts: []bindMount{{src: dir, target: "/workspace", rw: true}}, cred: p.user, idmap: p.idmap != nil}
	// Built as the sandboxes are: as their user, through idmapped
	// mounts, under the seccomp filter; the command writes its workdir.
	st, staged, err := p.stage("probe", cfg)
	defer st.release()
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: %v", err)
	}
	filter, err := seccompFile()
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: %v", err)
	}
	defer filter.Close()
	args := p.args(staged, nil, false, sandboxapi.NetworkNone)
	args = append(args[:len(args)-1:len(args)-1], "--seccomp", "3", "--", "/bin/sh", "-c", ": > /workspace/.probe")
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{filter}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cfg.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap cannot build a sandbox here (are unprivileged user namespaces disabled?): %v: %s",
			err, strings.TrimSpace(string(out)))
	}
	return nil
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
		if err := p.makeScratch(cfg); err != nil {
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
			return removeScratch(filepath.Join(p.scratch, id))
		}
		return nil
	}
	err := life.Destroy(ctx)
	if r, ok := rt.(*Runtime); ok {
		r.destroySandbox(ctx)
	}
	p.detachEgress(id, "")
	p.removeControl(id)
	if rerr := removeScratch(life.Conf().scratch); err == nil {
		err = rerr
	}
	p.log.Debug("runtime destroyed", "id", id)
	return err
}

// defaultSuffix ends the egress directory and endpoint name of a runtime's
// default network (runtime ids hold no '.').
const defaultSuffix = ".default"

// egressDirOf is the egress directory the sandbox of network mode mounts:
// limited's or default's; "" for none, or without an egress proxy.
func (cfg sandboxConfig) egressDirOf(mode sandboxapi.Network) string {
	switch mode {
	case sandboxapi.NetworkLimited:
		return cfg.egressDir
	case sandboxapi.NetworkDefault:
		return cfg.egressDefault
	}
	return ""
}

// bindMount is one resolved mount.
type bindMount struct {
	src, target string
	rw          bool
}

// sandboxConfig is a runtime's resolved, immutable sandbox layout.
type sandboxConfig struct {
	root    string // symlink-free host path of the workdir mount
	workdir string // its target (RuntimeSpec.Workdir)
	cwd     string // per exec: the sandbox path to start in
	scratch string // host directory mounted at /tmp
	mounts  []bindMount
	cred    *syscall.Credential // nil: run bwrap as the worker
	// idmap: every bind source is staged as an idmapped mount showing
	// root's files as cred's (a root worker, a root-owned worktree).
	idmap  bool
	limits limits
	// network is the widest mode a command may use (RuntimeSpec.Network,
	// "" read as limited); allow the limited network's allow-list.
	network sandboxapi.Network
	allow   egress.Rules
	// egressDir holds the runtime's egress socket of the limited network
	// (mounted into its limited sandbox), egressDefault the one of the
	// default network (every public destination; mounted into its default
	// sandbox); "" without an egress proxy.
	egressDir, egressDefault string
	workspaceID              string // RuntimeSpec.WorkspaceID (the egress proxy's log)
	base                     string // baseLayoutOf(this), set by resolve
}

func (p *Provider) resolve(spec sandbox.RuntimeSpec) (sandboxConfig, error) {
	bad := func(format string, args ...any) (sandboxConfig, error) {
		return sandboxConfig{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "runtime %s: "+format, append([]any{clip(spec.ID)}, args...)...)
	}
	if err := sandboxapi.ValidateID("runtime id", spec.ID); err != nil {
		return sandboxConfig{}, err
	}
	if err := runspec.ValidateEnv(spec.Env); err != nil {
		return sandboxConfig{}, err
	}
	if err := runspec.CheckWorkdir(spec, runspec.OutsideSystem); err != nil {
		return sandboxConfig{}, err
	}
	cfg := sandboxConfig{workdir: spec.Workdir, scratch: filepath.Join(p.scratch, spec.ID), workspaceID: spec.WorkspaceID}
	cfg.network = procexec.RuntimeNetwork(spec)
	if !cfg.network.Valid() {
		return bad("network %q: want none, limited or default", spec.Network)
	}
	allow, err := egress.ParseRules(spec.NetworkAllow)
	if err != nil {
		return bad("%s", sandboxapi.Message(err))
	}
	cfg.allow = allow
	if p.egress != nil {
		cfg.egressDir = filepath.Join(p.egressRoot, spec.ID)
		cfg.egressDefault = filepath.Join(p.egressRoot, spec.ID+defaultSuffix)
	}
	ms, err := runspec.ResolveMounts(spec, runspec.OutsideSystem)
	if err != nil {
		return sandboxConfig{}, err
	}
	cfg.root = ms.Root
	for _, b := range ms.Binds {
		cfg.mounts = append(cfg.mounts, bindMount{src: b.Source, target: b.Target, rw: b.Writable})
	}
	owner := ms.Owner
	switch {
	case !p.asRoot:
	case owner != nil && owner.Uid != 0:
		// A worktree of another user: its commands run as that user.
		cfg.cred = &syscall.Credential{Uid: owner.Uid, Gid: owner.Gid, Groups: []uint32{}}
	default:
		// Root's worktree: the sandbox's unprivileged user, who sees root's
		// files as its own through idmapped mounts.
		cfg.cred, cfg.idmap = p.user, true
	}
	l, err := limitsOf(spec.Resources)
	if err != nil {
		return bad("%v", err)
	}
	cfg.limits = l
	cfg.cwd = cfg.workdir
	cfg.base = p.baseLayoutOf(cfg)
	return cfg, nil
}

// makeScratch creates the runtime's /tmp (0700, owned by the sandbox's user).
func (p *Provider) makeScratch(cfg sandboxConfig) error {
	if err := os.Mkdir(cfg.scratch, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
	}
	if cfg.cred != nil && !cfg.idmap { // idmapped: root's, shown as the sandbox's
		if err := os.Chown(cfg.scratch, int(cfg.cred.Uid), int(cfg.cred.Gid)); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: scratch directory: %v", err)
		}
	}
	return nil
}

// removeScratch deletes a scratch directory, making read-only directories
// the sandbox left writable first.
func removeScratch(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: remove scratch directory: %v", err)
	}
	return nil
}

// args returns bwrap's arguments up to and including "--" for cfg's sandbox
// of network mode; the command follows. env is the complete environment. A
// long-lived sandbox (the supervisor's) runs its command as the pid
// namespace's init and does not die with the worker. Modes: none, a new
// network namespace (loopback only); limited, the same with the runtime's
// egress directory mounted read-only at egressMount (the supervisor's
// forwarder reaches the proxy through it); default, the same with its own
// egress directory (every public destination).
func (p *Provider) args(cfg sandboxConfig, env []string, long bool, mode sandboxapi.Network) []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		// No user namespace inside (a kernel attack surface, and a way to
		// regain capabilities over one's own namespaces), no capability.
		"--disable-userns", "--cap-drop", "ALL",
		"--new-session", "--hostname", "sandbox", "--clearenv",
	}
	if long {
		a = append(a, "--as-pid-1")
	} else {
		a = append(a, "--die-with-parent")
	}
	// Every mode has a network namespace of its own: never the host's,
	// where the worker's, Temporal's and the Web UI's ports listen.
	a = append(a, "--unshare-net")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--proc", "/proc")
	// The kernel's settings and triggers under /proc, read-only whoever
	// the sandbox's user is (bwrap covers them only when they are writable
	// to it while it builds the sandbox). The sysctls shown are still the
	// reader's own namespaces'.
	for _, k := range procCovered {
		if _, err := os.Lstat(k); err == nil {
			a = append(a, "--ro-bind", k, k)
		}
	}
	a = append(a, "--dev", "/dev", "--bind", cfg.scratch, "/tmp")
	var visible []string
	for _, ro := range p.roPaths {
		fi, err := os.Lstat(ro)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(ro); err == nil {
				a = append(a, "--symlink", target, ro)
			}
		default:
			a = append(a, "--ro-bind", ro, ro)
			visible = append(visible, ro)
		}
	}
	var remount []string // read-only once the spec's mounts below them exist
	var maskedDirs []string
	for _, h := range p.hidden {
		if !under(h, visible) || under(h, maskedDirs) { // inside a masked directory: gone already
			continue
		}
		fi, err := os.Lstat(h)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", h)
			remount = append(remount, "--remount-ro", h)
			maskedDirs = append(maskedDirs, h)
		default:
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	if !under("/var", visible) {
		a = append(a, "--symlink", "../tmp", "/var/tmp")
	}
	for _, m := range cfg.mounts {
		if m.rw {
			a = append(a, "--bind", m.src, m.target)
		} else {
			a = append(a, "--ro-bind", m.src, m.target)
		}
	}
	if dir := cfg.egressDirOf(mode); dir != "" {
		a = append(a, "--ro-bind", dir, egressMount)
	}
	a = append(a, remount...)
	a = append(a, "--remount-ro", "/", "--chdir", cfg.cwd, "--")
	return a
}

// under reports whether p is one of roots or below one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// errText is runspec.ErrText: an error's cause without its host path.
func errText(err error) string { return runspec.ErrText(err) }

func clip(s string) string { return clipN(s, 64) }

func clipN(s string, n int) string { return sandboxapi.Clip(s, n) }

// maxMasked bounds the paths notWorldReadable returns (each is three bwrap
// arguments on every command); past it a root worker's provider refuses to
// start rather than leave the rest readable.
const maxMasked = 4096

var (
	maskedMu    sync.Mutex
	maskedCache = map[string][]string{}
)

// notWorldReadable walks the read-only paths (symbolic links not followed)
// and returns every directory another user could not enter or list (mode
// without o+rx; not descended) and every regular file another user could not
// read (without o+r), at most maxMasked (truncated reports more). The walk
// runs once per set of paths in a process (the result is cached): a file
// made root-only after the worker started is not masked until it restarts.
func notWorldReadable(roots []string) (paths []string, truncated bool) {
	key := strings.Join(roots, "\x00")
	maskedMu.Lock()
	defer maskedMu.Unlock()
	if v, ok := maskedCache[key]; ok {
		return v, len(v) >= maxMasked
	}
	out := []string{}
	for _, root := range roots {
		fi, err := os.Lstat(root)
		if err != nil || !fi.IsDir() {
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || len(out) >= maxMasked {
				if d != nil && d.IsDir() && path != root {
					return fs.SkipDir
				}
				return nil
			}
			switch {
			case d.IsDir():
				if info, err := d.Info(); err == nil && info.Mode().Perm()&0o005 != 0o005 {
					out = append(out, path)
					return fs.SkipDir
				}
			case d.Type().IsRegular():
				if info, err := d.Info(); err == nil && info.Mode().Perm()&0o004 == 0 {
					out = append(out, path)
				}
			}
			return nil
		})
	}
	maskedCache[key] = out
	return out, len(out) >= maxMasked
}
