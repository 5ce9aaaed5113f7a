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
//   - a disk quota (RuntimeSpec.Resources.DiskGB, else DefaultDiskGB) on
//     what the workdir, the other writable mounts and /tmp hold together:
//     no file larger than it (RLIMIT_FSIZE), and while commands run the
//     worker measures them and kills the runtime's commands when their use
//     is over the quota and grew (quota.go, package diskquota).
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
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/volume"
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
	// DiskReserve is the free space (bytes) the file systems of the
	// worktrees and scratch directories keep: below it, every runtime's
	// disk quota counts as exceeded (docs/SECURITY.md "Resource limits
	// (bubblewrap)"). 0: diskquota.DefaultReserve (1 GiB); negative: none.
	DiskReserve int64
	// SharedDiskGB is the disk quota (GiB) of each shared directory a
	// runtime mounts (sandbox.Mount.Shared: a dependency cache), counted
	// by allocated blocks; 0: DefaultSharedDiskGB.
	SharedDiskGB int64
	// Volumes, when set, gives each runtime's /tmp a file system of its
	// own of the disk quota's size (package volume; docs/SECURITY.md
	// "Disk volumes"): the kernel then bounds what /tmp holds, deleted
	// files still open included. nil: /tmp is a directory of ScratchDir.
	Volumes *volume.Manager
}

// DefaultSharedDiskGB is a shared dependency cache's disk quota in GiB when
// Options.SharedDiskGB is zero: four runtimes' worth (a Go build cache
// alone can pass 10 GiB).
const DefaultSharedDiskGB = 4 * DefaultDiskGB

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
		diskReserve: opts.DiskReserve, sharedDiskGB: cmp.Or(opts.SharedDiskGB, DefaultSharedDiskGB),
		volumes: opts.Volumes,
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

// errText is runspec.ErrText: an error's cause without its host path.
func errText(err error) string { return runspec.ErrText(err) }

func clip(s string) string { return clipN(s, 64) }

func clipN(s string, n int) string { return sandboxapi.Clip(s, n) }
