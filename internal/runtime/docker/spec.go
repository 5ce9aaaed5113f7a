package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// built is a validated spec turned into container configuration.
type built struct {
	config  *container.Config
	host    *container.HostConfig
	hash    string
	root    string // symlink-free host path of the workdir mount's source
	workdir string // spec.Workdir (container path)
}

// build validates spec and derives the container configuration and its hash.
func (p *Provider) build(spec sandbox.RuntimeSpec) (*built, error) {
	bad := func(format string, args ...any) (*built, error) {
		return nil, sandbox.Errorf(sandbox.ErrInvalidArgument, "runtime %s: "+format, append([]any{clip(spec.ID)}, args...)...)
	}
	if err := sandbox.ValidateID("runtime id", spec.ID); err != nil {
		return nil, err
	}
	if err := local.ValidateEnv(spec.Env); err != nil {
		return nil, err
	}
	image := spec.Image
	if image == "" {
		image = p.image
	}
	if image == "" {
		return bad("no image: set RuntimeSpec.Image or the provider's default image (SANDBOX_RUNTIME_IMAGE)")
	}
	if !absClean(spec.Workdir) || spec.Workdir == "/" {
		return bad("workdir %q is not an absolute clean path below /", spec.Workdir)
	}
	netMode := container.NetworkMode("none")
	switch spec.Network {
	case sandbox.NetworkNone:
	case sandbox.NetworkLimited, "":
		netMode = LimitedNetworkName
	case sandbox.NetworkDefault:
		netMode = "bridge"
	default:
		return bad("network %q: want none, limited or default", spec.Network)
	}

	var (
		mounts []mount.Mount
		root   string
		owner  *syscall.Stat_t
	)
	targets := map[string]bool{}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !absClean(m.Target) || m.Target == "/" {
			return bad("mount %q → %q: source and target must be absolute (target clean, not /)", m.Source, m.Target)
		}
		if targets[m.Target] {
			return bad("two mounts on %q", m.Target)
		}
		targets[m.Target] = true
		real, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return bad("mount source %q: %v", m.Source, errText(err))
		}
		fi, err := os.Stat(real)
		if err != nil {
			return bad("mount source %q: %v", m.Source, errText(err))
		}
		target := m.Target
		if m.Target == filepath.Clean(m.Source) {
			target = real
		}
		if m.Target == spec.Workdir {
			if !fi.IsDir() {
				return bad("workdir mount source %q is not a directory", m.Source)
			}
			root = real
			owner, _ = fi.Sys().(*syscall.Stat_t)
		}
		mounts = append(mounts, mount.Mount{
			Type: mount.TypeBind, Source: real, Target: target, ReadOnly: !m.Writable,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	if root == "" {
		return bad("need exactly one mount with target %q (the workdir)", spec.Workdir)
	}
	if owner == nil {
		return bad("cannot read the owner of %q", root)
	}
	res := container.Resources{}
	pids := int64(DefaultPidsLimit)
	if r := spec.Resources; r != nil {
		if r.CPU < 0 || r.MemoryMB < 0 || r.Pids < 0 || r.DiskGB < 0 {
			return bad("negative resource hint")
		}
		res.NanoCPUs = int64(r.CPU * 1e9)
		if r.MemoryMB > 0 {
			res.Memory = r.MemoryMB << 20
			res.MemorySwap = res.Memory
		}
		if r.Pids > 0 {
			pids = r.Pids
		}
	}
	res.PidsLimit = &pids

	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelRuntime] = spec.ID
	if spec.WorkspaceID != "" {
		labels[LabelWorkspace] = spec.WorkspaceID
	}
	delete(labels, LabelSpecHash)

	mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p.sup, Target: SupervisorPath, ReadOnly: true,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	init := true
	cfg := &container.Config{
		Image: image,
		// The runtime's supervisor (background processes) under Docker's init.
		Entrypoint: []string{SupervisorPath, "serve", "--listen-abstract", supervisorSocket, "--runtime", spec.ID, "--layout", "docker",
			"--buffer", strconv.Itoa(sandbox.ProcessBufferBytes), "--max-procs", strconv.Itoa(sandbox.MaxProcesses)},
		Env:        procexec.EnvList(procexec.BaseEnv(Home), p.baseEnv, spec.Env),
		User:       strconv.FormatUint(uint64(owner.Uid), 10) + ":" + strconv.FormatUint(uint64(owner.Gid), 10),
		WorkingDir: spec.Workdir,
		Labels:     labels,
	}
	host := &container.HostConfig{
		NetworkMode:   netMode,
		Mounts:        mounts,
		Init:          &init,
		CapDrop:       []string{"ALL"},
		SecurityOpt:   []string{"no-new-privileges"},
		IpcMode:       "private",
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Resources:     res,
	}
	sum, err := json.Marshal(struct {
		C *container.Config
		H *container.HostConfig
	}{cfg, host})
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalidArgument, "runtime %s: %v", spec.ID, err)
	}
	h := sha256.Sum256(sum)
	cfg.Labels[LabelSpecHash] = hex.EncodeToString(h[:12])
	return &built{config: cfg, host: host, hash: cfg.Labels[LabelSpecHash], root: root, workdir: spec.Workdir}, nil
}

func absClean(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// errText drops the host path from a *PathError.
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
