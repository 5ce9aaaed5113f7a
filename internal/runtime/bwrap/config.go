package bwrap

import (
	"path/filepath"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
	shared      bool // sandbox.Mount.Shared: measured apart (sharedQuota)
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
		cfg.mounts = append(cfg.mounts, bindMount{src: b.Source, target: b.Target, rw: b.Writable, shared: b.Shared})
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
