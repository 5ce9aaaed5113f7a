package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// built is a validated spec turned into the configuration of the
// container of one network mode.
type built struct {
	config  *container.Config
	host    *container.HostConfig
	hash    string
	root    string // symlink-free host path of the workdir mount's source
	workdir string // spec.Workdir (container path)
	// mode is the container's network mode, policy the runtime's
	// (RuntimeSpec.Network, "" read as limited); name the container's name.
	mode, policy sandboxapi.Network
	name         string
	uid, gid     uint32 // the container's user
}

// Containers of a runtime's network modes (docs/SECURITY.md "Network
// modes"): ContainerName(id) runs the runtime's own network (its policy);
// a command that asks for a narrower one runs in ContainerName(id)+"."+mode,
// created from the same spec when first needed. All of them share the
// worktree, the repo cache and /tmp (the volume TmpVolume(id)); each has
// its own network namespace, processes and root file system.

// TmpVolume returns the name of runtime id's /tmp volume.
func TmpVolume(id string) string { return ContainerPrefix + id + "-tmp" }

// modeContainer returns the name of runtime id's container of network mode
// under policy.
func modeContainer(id string, mode, policy sandboxapi.Network) string {
	if mode == policy {
		return ContainerName(id)
	}
	return ContainerName(id) + "." + string(mode)
}

// egressMount is where a limited container sees its runtime's egress
// directory, and egressSocket the proxy's socket in it.
const (
	egressMount  = "/.sandboxcore/egress"
	egressSocket = "egress.sock"
)

// build validates spec and derives the configuration of its container of
// network mode ("" = the runtime's own) and its hash.
func (p *Provider) build(spec sandbox.RuntimeSpec, mode sandboxapi.Network) (*built, error) {
	bad := func(format string, args ...any) (*built, error) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "runtime %s: "+format, append([]any{clip(spec.ID)}, args...)...)
	}
	if err := sandboxapi.ValidateID("runtime id", spec.ID); err != nil {
		return nil, err
	}
	if err := runspec.ValidateEnv(spec.Env); err != nil {
		return nil, err
	}
	image := spec.Image
	if image == "" {
		image = p.image
	}
	if image == "" {
		return bad("no image: set RuntimeSpec.Image or the provider's default image (SANDBOX_RUNTIME_IMAGE)")
	}
	if err := runspec.CheckWorkdir(spec, runspec.BelowRoot); err != nil {
		return nil, err
	}
	mode, policy, err := containerNetwork(spec, mode)
	if err != nil {
		return nil, err
	}
	// Every mode: Docker's none network, loopback only. limited and
	// default reach the egress proxy through a unix socket, nothing else
	// (a bridge would reach the host's and other containers' ports:
	// Temporal's, the Web UI's); default's endpoint allows every public
	// destination.
	netMode := container.NetworkMode("none")
	ms, err := runspec.ResolveMounts(spec, runspec.BelowRoot)
	if err != nil {
		return nil, err
	}
	root, owner := ms.Root, ms.Owner
	if owner == nil {
		return bad("cannot read the owner of %q", root)
	}
	res, err := containerResources(spec.Resources)
	if err != nil {
		return bad("%v", err)
	}
	labels, err := containerLabels(spec, mode)
	if err != nil {
		return bad("%v", err)
	}
	mounts, entry, proxyEnv := p.containerMounts(spec.ID, mode, ms.Binds)
	init := true
	cfg := &container.Config{
		Image: image,
		// The supervisor of this network mode's processes under Docker's init.
		Entrypoint: entry,
		Env:        procexec.EnvList(procexec.BaseEnv(Home), proxyEnv, p.baseEnv, spec.Env),
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
	hash, err := specHash(cfg, host)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "runtime %s: %v", spec.ID, err)
	}
	cfg.Labels[LabelSpecHash] = hash
	return &built{config: cfg, host: host, hash: hash, root: root, workdir: spec.Workdir,
		mode: mode, policy: policy, name: modeContainer(spec.ID, mode, policy), uid: owner.Uid, gid: owner.Gid}, nil
}

// containerNetwork decides the network of a container of spec for mode:
// policy is the runtime's network (spec.Network, "" read as limited) and
// mode the container's ("" = policy). Errors: sandboxapi.ErrInvalidArgument
// for an unknown policy or a malformed allow-list, sandboxapi.ErrCommandRejected
// for a mode above the policy (docs/SECURITY.md "Network modes").
func containerNetwork(spec sandbox.RuntimeSpec, mode sandboxapi.Network) (sandboxapi.Network, sandboxapi.Network, error) {
	bad := func(format string, args ...any) (sandboxapi.Network, sandboxapi.Network, error) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "runtime %s: "+format, append([]any{clip(spec.ID)}, args...)...)
	}
	policy := procexec.RuntimeNetwork(spec)
	if !policy.Valid() {
		return bad("network %q: want none, limited or default", spec.Network)
	}
	if _, err := egress.ParseRules(spec.NetworkAllow); err != nil {
		return bad("%s", sandboxapi.Message(err))
	}
	if mode == "" {
		mode = policy
	}
	if !mode.Within(policy) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "runtime %s: network %s is above its network policy (%s)", spec.ID, mode, policy)
	}
	return mode, policy, nil
}

// containerResources translates resource hints into Docker's limits: CPU
// in cores to NanoCPUs, MemoryMB to a memory limit with no swap beyond it,
// Pids to the pids limit (DefaultPidsLimit when unset); nil means only the
// default pids limit. A negative hint is an error.
func containerResources(r *sandbox.ResourceHints) (container.Resources, error) {
	res := container.Resources{}
	pids := int64(DefaultPidsLimit)
	if r != nil {
		if r.CPU < 0 || r.MemoryMB < 0 || r.Pids < 0 || r.DiskGB < 0 {
			return res, errors.New("negative resource hint")
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
	return res, nil
}

// containerLabels are the labels of spec's container of mode: spec.Labels
// with this package's own set over them (managed-by, runtime, workspace,
// network, and the spec itself as JSON without its labels and allow-list,
// which a handle from Get needs to build the runtime's other containers);
// LabelSpecHash is left for build to set.
func containerLabels(spec sandbox.RuntimeSpec, mode sandboxapi.Network) (map[string]string, error) {
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
	labels[LabelNetwork] = string(mode)
	// The allow-list is the egress proxy's, never a container's.
	stored := spec
	stored.Labels, stored.NetworkAllow = nil, nil
	specJSON, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	labels[LabelSpec] = string(specJSON)
	return labels, nil
}

// containerMounts returns the mounts of runtime id's container of mode
// (the spec's binds, the supervisor binary read-only, the /tmp volume, and
// in the limited and default networks the egress socket's directory
// read-only), the supervisor's command line as its entrypoint, and the
// proxy variables of those networks (nil otherwise).
func (p *Provider) containerMounts(id string, mode sandboxapi.Network, binds []runspec.Bind) ([]mount.Mount, []string, map[string]string) {
	bind := func(src, target string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: src, Target: target, ReadOnly: ro,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}
	}
	mounts := make([]mount.Mount, 0, len(binds)+3)
	for _, b := range binds {
		mounts = append(mounts, bind(b.Source, b.Target, !b.Writable))
	}
	mounts = append(mounts,
		bind(p.sup, SupervisorPath, true),
		mount.Mount{Type: mount.TypeVolume, Source: TmpVolume(id), Target: "/tmp",
			VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelRuntime: id}}})
	entry := []string{SupervisorPath, "serve", "--listen-abstract", supervisorSocket, "--runtime", id, "--layout", "docker",
		"--buffer", strconv.Itoa(sandboxapi.ProcessBufferBytes), "--max-procs", strconv.Itoa(sandboxapi.MaxProcesses),
		"--id-prefix", supervisor.IDPrefix(mode)}
	var proxyEnv map[string]string
	if dir := p.egressDirOf(id, mode); dir != "" {
		mounts = append(mounts, bind(dir, egressMount, true))
		entry = append(entry, "--egress-socket", egressMount+"/"+egressSocket)
		proxyEnv = procexec.ProxyEnv(supervisor.EgressListen)
	}
	return mounts, entry, proxyEnv
}

// specHash is the hash a container carries in LabelSpecHash: the first 12
// bytes of the SHA-256 of its configuration and host configuration as JSON,
// in hex (a container whose hash differs was built from another spec).
func specHash(cfg *container.Config, host *container.HostConfig) (string, error) {
	sum, err := json.Marshal(struct {
		C *container.Config
		H *container.HostConfig
	}{cfg, host})
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(sum)
	return hex.EncodeToString(h[:12]), nil
}
