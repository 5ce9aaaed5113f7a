package sandbox

import (
	"time"
)

// WorkspaceMode is one of the seed's three workspace kinds ("Core Model: Workspace").
type WorkspaceMode string

// The three workspace modes and their uniqueness keys (DESIGN.md "The three things").
const (
	// ModeAnalysis: read-only, keyed by (user, project, base_ref), detached HEAD.
	ModeAnalysis WorkspaceMode = "analysis"
	// ModeEdit: writable, keyed by (user, project, conversation_id), branch agent/edits-<conversation_id>.
	ModeEdit WorkspaceMode = "edit"
	// ModeTask: writable, keyed by (user, project, task_id), branch agent/task-<task_id>.
	ModeTask WorkspaceMode = "task"
)

// Valid reports whether m is one of the three modes.
func (m WorkspaceMode) Valid() bool {
	return m == ModeAnalysis || m == ModeEdit || m == ModeTask
}

// Capabilities are derived from the mode once (seed P3, CapabilitiesFromMode) and
// stored on the workspace; every mutating operation checks Writable.
type Capabilities struct {
	// Writable: files may be changed and commits made.
	Writable bool `json:"writable"`
	// Isolated: commands run in an isolated runtime (set by the runtime, not the mode).
	Isolated bool `json:"isolated"`
	// Persistent: the workspace survives runtime destruction (always true for local worktrees).
	Persistent bool `json:"persistent"`
}

// CapabilitiesFromMode is the single source of truth for a mode's capabilities.
// isolated comes from the runtime provider (RuntimeCapabilities.Isolated).
func CapabilitiesFromMode(m WorkspaceMode, isolated bool) Capabilities {
	return Capabilities{Writable: m != ModeAnalysis, Isolated: isolated, Persistent: true}
}

// RepoIdentity is a normalized repository identity derived from its URL
// (ParseRepoURL): host lowercased, owner and name as written, ".git" stripped.
type RepoIdentity struct {
	// Host is the lowercased host[:port], or FileHost ("_file") for file URLs.
	Host string `json:"host"`
	// Owner is the path before the last segment ("org" or "group/subgroup").
	Owner string `json:"owner"`
	// Name is the last path segment without ".git".
	Name string `json:"name"`
	// URL is the clone URL as validated (credentials never included).
	URL string `json:"url"`
}

// FullName returns "owner/name".
func (r RepoIdentity) FullName() string { return r.Owner + "/" + r.Name }

// Key returns "host/owner/name", the repo cache's uniqueness key.
func (r RepoIdentity) Key() string { return r.Host + "/" + r.Owner + "/" + r.Name }

// RepoCacheState is the lifecycle state of a repo cache row.
type RepoCacheState string

// Repo cache states.
const (
	RepoCacheCloning RepoCacheState = "cloning"
	RepoCacheReady   RepoCacheState = "ready"
	RepoCacheEvicted RepoCacheState = "evicted"
)

// RepoCache is one durable bare mirror (seed "Storage Model: sandbox_repo_caches").
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

// WorkspaceRequest asks for a workspace (seed "Public Service API").
// RepoURL is required; RepoName, when set, must agree with the identity parsed
// from RepoURL. BaseRef empty means the remote's default branch.
type WorkspaceRequest struct {
	UserID         string        `json:"user_id"`
	ProjectID      string        `json:"project_id"`
	RepoName       string        `json:"repo_name,omitempty"`
	RepoURL        string        `json:"repo_url"`
	BaseRef        string        `json:"base_ref,omitempty"`
	Mode           WorkspaceMode `json:"mode"`
	ConversationID string        `json:"conversation_id,omitempty"`
	TaskID         string        `json:"task_id,omitempty"`
	// BranchName overrides the mode's branch (edit/task only); it must pass ValidateBranchName.
	BranchName string `json:"branch_name,omitempty"`
	// FromBranch, for task workspaces, starts the task branch from this local
	// branch (e.g. a conversation's agent/edits-<id>) instead of BaseRef.
	FromBranch string `json:"from_branch,omitempty"`
}

// WorkspaceState is the lifecycle state of a workspace row.
type WorkspaceState string

// Workspace states.
const (
	WorkspaceCreating WorkspaceState = "creating"
	WorkspaceReady    WorkspaceState = "ready"
	WorkspaceEvicted  WorkspaceState = "evicted"
	WorkspaceRemoved  WorkspaceState = "removed"
)

// Workspace is one durable worktree (seed "Storage Model: sandbox_workspaces").
type Workspace struct {
	ID             string         `json:"workspace_id"`
	Key            string         `json:"key"` // WorkspaceKey of the request
	RepoCacheID    string         `json:"repo_cache_id"`
	Repo           RepoIdentity   `json:"repo"`
	ProjectID      string         `json:"project_id"`
	UserID         string         `json:"user_id"`
	Mode           WorkspaceMode  `json:"mode"`
	ConversationID string         `json:"conversation_id,omitempty"`
	TaskID         string         `json:"task_id,omitempty"`
	BaseRef        string         `json:"base_ref"`    // as requested, or the default branch
	BaseCommit     string         `json:"base_commit"` // resolved at creation; diffs are taken against it
	BranchName     string         `json:"branch"`      // empty for analysis (detached)
	LocalPath      string         `json:"local_path"`
	HostID         string         `json:"host_id"`
	State          WorkspaceState `json:"state"`
	Dirty          bool           `json:"dirty"`
	PinnedUntil    *time.Time     `json:"pinned_until,omitempty"`
	Capabilities   Capabilities   `json:"capabilities"`
	LastUsedAt     time.Time      `json:"last_used_at"`
	SizeBytes      int64          `json:"size_bytes"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`

	// BaseFetchedAt is when the repo cache the base commit was resolved in
	// had last fetched from the remote (RepoCache.LastFetchedAt then): the
	// base is the remote's state as of that time. nil when unknown (rows
	// older than the column).
	BaseFetchedAt *time.Time `json:"base_fetched_at,omitempty"`
	// UninitializedSubmodules lists the submodule paths whose recorded
	// commit is not checked out (docs/API.md "Submodules"). Not stored: the
	// acquire activity fills it from the worktree.
	UninitializedSubmodules []string `json:"uninitialized_submodules,omitempty"`
}

// Network is a runtime's network policy (seed RuntimeSpec.network).
type Network string

// Network policies.
const (
	NetworkNone    Network = "none"
	NetworkLimited Network = "limited"
	NetworkDefault Network = "default"
)

// Mount is one bind of a host path into a runtime (seed "Runtime Port").
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Writable bool   `json:"writable"`
}

// ResourceHints bound a runtime's resources; zero means the backend default.
type ResourceHints struct {
	CPU      float64 `json:"cpu,omitempty"`       // cores
	MemoryMB int64   `json:"memory_mb,omitempty"` // mebibytes
	DiskGB   int64   `json:"disk_gb,omitempty"`   // gibibytes
	Pids     int64   `json:"pids,omitempty"`      // max processes
}

// RuntimeSpec describes the compute to attach to a workspace (seed "Runtime Port").
// Env is the complete environment the runtime adds to its fixed base set: the
// worker's own environment is never passed (seed "Security Rules").
type RuntimeSpec struct {
	// ID is the runtime id, derived from the workspace id (RuntimeIDFor).
	ID          string            `json:"id"`
	WorkspaceID string            `json:"workspace_id"`
	Image       string            `json:"image,omitempty"`
	Workdir     string            `json:"workdir"`
	Mounts      []Mount           `json:"mounts"`
	Env         map[string]string `json:"env,omitempty"`
	Resources   *ResourceHints    `json:"resources,omitempty"`
	Network     Network           `json:"network"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// RuntimeState is the state of one runtime (seed RuntimeState).
type RuntimeState string

// Runtime states.
const (
	RuntimeStarting RuntimeState = "starting"
	RuntimeRunning  RuntimeState = "running"
	RuntimeStopped  RuntimeState = "stopped"
	RuntimeError    RuntimeState = "error"
	RuntimeMissing  RuntimeState = "missing"
)

// RuntimeRecord is one runtime attachment (seed "Storage Model: sandbox_runtimes").
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

// RuntimeCapabilities are a backend's optional features, reported truthfully
// (seed "Optional Capabilities").
type RuntimeCapabilities struct {
	Snapshot           bool `json:"snapshot"`
	PreviewURL         bool `json:"preview_url"`
	InteractiveSession bool `json:"interactive_session"`
	// Isolated: commands cannot see or change the host beyond the mounted workspace.
	Isolated bool `json:"isolated"`
}

// Default and maximum exec limits.
const (
	// DefaultExecTimeout applies when ExecRequest.TimeoutS is zero.
	DefaultExecTimeout = 10 * time.Minute
	// MaxExecTimeout is the largest accepted ExecRequest.TimeoutS.
	MaxExecTimeout = 2 * time.Hour
	// DefaultMaxOutputBytes caps each of stdout and stderr when ExecRequest.MaxOutputBytes is zero.
	DefaultMaxOutputBytes = 256 << 10 // 256 KiB
	// MaxOutputBytesLimit is the largest accepted ExecRequest.MaxOutputBytes: both
	// streams at the limit, base64-encoded in JSON (×4/3), stay at about 1.3 MiB,
	// well under Temporal's 2 MB payload limit.
	MaxOutputBytesLimit = 512 << 10 // 512 KiB
	// MaxStdinBytes bounds ExecRequest.Stdin.
	MaxStdinBytes = 512 << 10
)

// ExecRequest is one command (seed "Runtime Port"). Cmd is an argv: no shell is
// implied (use ["sh","-c","..."] for one). Cwd is relative to the workspace root.
type ExecRequest struct {
	Cmd            []string          `json:"cmd"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutS       int               `json:"timeout_s,omitempty"`        // seconds; 0 = DefaultExecTimeout
	Stdin          []byte            `json:"stdin,omitempty"`            // nil = /dev/null
	MaxOutputBytes int               `json:"max_output_bytes,omitempty"` // per stream; 0 = default
}

// Timeout returns the effective timeout.
func (r ExecRequest) Timeout() time.Duration {
	if r.TimeoutS <= 0 {
		return DefaultExecTimeout
	}
	return time.Duration(r.TimeoutS) * time.Second
}

// OutputCap returns the effective per-stream output cap in bytes.
func (r ExecRequest) OutputCap() int {
	if r.MaxOutputBytes <= 0 {
		return DefaultMaxOutputBytes
	}
	return r.MaxOutputBytes
}

// ExecResult is a finished command. A non-zero exit is a result, not an error.
// Exit codes: 127 command not found, 124 timeout (TimedOut true), 128+n killed by signal n.
// When a stream exceeds the cap its head and tail are kept, joined by a marker line,
// Truncated is true, and StdoutBytes/StderrBytes hold the full byte counts.
type ExecResult struct {
	ExitCode    int    `json:"exit_code"`
	Stdout      []byte `json:"stdout"`
	Stderr      []byte `json:"stderr"`
	TimedOut    bool   `json:"timed_out"`
	Truncated   bool   `json:"truncated"`
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	DurationMS  int64  `json:"duration_ms"`
}

// ExecChunk is a piece of streamed output.
type ExecChunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   []byte `json:"data"`
}
