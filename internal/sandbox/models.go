package sandbox

import (
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"time"
)

// RepoCacheState is the lifecycle state of a repo cache row.
type RepoCacheState string

// Repo cache states.
const (
	RepoCacheCloning RepoCacheState = "cloning"
	RepoCacheReady   RepoCacheState = "ready"
	RepoCacheEvicted RepoCacheState = "evicted"
)

// RepoCache is one durable bare mirror (docs/DESIGN.md "Storage model").
// It never holds agent edits.
type RepoCache struct {
	ID            string         `json:"id"`
	RepoName      string         `json:"repo_name"`     // "owner/name"
	RepoURL       string         `json:"repo_url"`      // clone URL, no credentials
	Provider      string         `json:"provider"`      // "local"
	ProviderHost  string         `json:"provider_host"` // repository host, e.g. "github.com"
	LocalPath     string         `json:"local_path"`    // absolute path of the bare repository
	AuthScopeHash string         `json:"auth_scope_hash"`
	DefaultBranch string         `json:"default_branch"`
	HostID        string         `json:"host_id"` // worker host holding the files
	LastFetchedAt time.Time      `json:"last_fetched_at"`
	LastUsedAt    time.Time      `json:"last_used_at"`
	SizeBytes     int64          `json:"size_bytes"`
	State         RepoCacheState `json:"state"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// Mount is one bind of a host path into a runtime (docs/DESIGN.md "Ports").
// Shared marks a writable directory other workspaces mount too (the
// dependency cache): a disk quota measures it apart, with a quota of its
// own (docs/SECURITY.md "Resource limits (bubblewrap)").
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Writable bool   `json:"writable"`
	Shared   bool   `json:"shared,omitempty"`
}

// ResourceHints bound a runtime's resources; zero means the backend default.
type ResourceHints struct {
	CPU      float64 `json:"cpu,omitempty"`       // cores
	MemoryMB int64   `json:"memory_mb,omitempty"` // mebibytes
	DiskGB   int64   `json:"disk_gb,omitempty"`   // gibibytes
	Pids     int64   `json:"pids,omitempty"`      // max processes
}

// RuntimeSpec describes the compute to attach to a workspace (docs/DESIGN.md "Ports").
// Env is the complete environment the runtime adds to its fixed base set: the
// worker's own environment is never passed (docs/DESIGN.md "Rules").
type RuntimeSpec struct {
	// ID is the runtime id, derived from the workspace id (RuntimeIDFor).
	ID          string            `json:"id"`
	WorkspaceID string            `json:"workspace_id"`
	Image       string            `json:"image,omitempty"`
	Workdir     string            `json:"workdir"`
	Mounts      []Mount           `json:"mounts"`
	Env         map[string]string `json:"env,omitempty"`
	Resources   *ResourceHints    `json:"resources,omitempty"`
	// Network is the widest network a command of this runtime may use (the
	// workspace's policy, docs/SECURITY.md "Network modes"); a command's own
	// ExecRequest.Network or ProcessSpec.Network ("" = this) may be lower,
	// and one above it is refused with ErrCommandRejected.
	Network sandboxapi.Network `json:"network"`
	// NetworkAllow is the complete allow-list of the limited network
	// (canonical sandboxapi.NetworkRule forms: the worker's
	// SANDBOX_NETWORK_ALLOW and the workspace's own entries).
	NetworkAllow []string          `json:"network_allow,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// RuntimeState is the state of one runtime (docs/DESIGN.md "Storage model").
type RuntimeState string

// Runtime states.
const (
	RuntimeStarting RuntimeState = "starting"
	RuntimeRunning  RuntimeState = "running"
	RuntimeStopped  RuntimeState = "stopped"
	RuntimeError    RuntimeState = "error"
	RuntimeMissing  RuntimeState = "missing"
)

// RuntimeRecord is one runtime attachment (docs/DESIGN.md "Storage model").
// Records may be deleted aggressively; the workspace survives.
type RuntimeRecord struct {
	ID               string       `json:"id"`
	WorkspaceID      string       `json:"workspace_id"`
	BackendKind      string       `json:"backend_kind"`
	BackendRuntimeID string       `json:"backend_runtime_id"`
	Image            string       `json:"image"`
	State            RuntimeState `json:"state"`
	LastStartedAt    *time.Time   `json:"last_started_at,omitempty"`
	LastUsedAt       time.Time    `json:"last_used_at"`
	ExpiresAt        *time.Time   `json:"expires_at,omitempty"`
	CreatedAt        time.Time    `json:"created_at"`
	UpdatedAt        time.Time    `json:"updated_at"`
}

// SharedFileUID and SharedFileGID own the files a root worker shares
// read-only between workspaces by hard link (prepared trees; docs/RUNTIMES.md
// "Prepared trees"). No runtime runs a command as them, and a runtime that
// maps ids (bubblewrap's idmapped mounts) maps them to themselves: a command
// sees such a file as another user's, may read, rename or delete it, and can
// never write or chmod it.
const (
	SharedFileUID = 65533
	SharedFileGID = 65533
)

// RuntimeCapabilities are what a backend reports about itself, truthfully
// (docs/DESIGN.md "Ports"), each read by a consumer: Isolated by the
// workspace's capabilities (sandbox.CapabilitiesFromMode), PreviewURL by the
// preview_url activity, PerCommandNetwork by the exec and process
// activities. Background processes are no flag: the consumer asserts
// ProcessRuntime on the Runtime.
type RuntimeCapabilities struct {
	// Processes: the provider's runtimes implement ProcessRuntime (an exec
	// runs as a process the session starts and waits for; background
	// processes exist). The session learns it from its settings
	// (wire.SessionSettings.RuntimeProcesses); runtimetest checks both agree.
	Processes bool `json:"processes,omitempty"`
	// PreviewURL: the provider implements the preview_url activity's
	// PortPreviewer (docs/API.md "Preview URLs"); runtimetest checks both agree.
	PreviewURL bool `json:"preview_url"`
	// Isolated: commands cannot see or change the host beyond the mounted workspace.
	Isolated bool `json:"isolated"`
	// PerCommandNetwork: each command may run with a network narrower than
	// the runtime's (ExecRequest.Network, ProcessSpec.Network); without it a
	// command runs with RuntimeSpec.Network, and asking for another is
	// refused by the consumer (docs/SECURITY.md "Network modes").
	PerCommandNetwork bool `json:"per_command_network,omitempty"`
	// HostMounts: every RuntimeSpec.Mounts entry is the host directory
	// itself, shared live with the runtime (bubblewrap, Docker, local),
	// so the workspace's dependency cache can be mounted into it
	// (docs/RUNTIMES.md "Dependency caches"); a remote runtime holds a
	// replica of the workdir only and reports false.
	HostMounts bool `json:"host_mounts,omitempty"`
}
