package sandboxapi

import "time"

// WorkspaceMode is one of the three workspace kinds (docs/DESIGN.md "The three things").
type WorkspaceMode string

// The three workspace modes and their uniqueness keys (docs/DESIGN.md "The three things").
const (
	// ModeAnalysis: read-only, keyed by (user, project, base_ref), detached HEAD.
	ModeAnalysis WorkspaceMode = "analysis"
	// ModeEdit: writable, keyed by (user, project, conversation_id), branch agent/<tenant>/edits-<conversation_id> (EditBranch).
	ModeEdit WorkspaceMode = "edit"
	// ModeTask: writable, keyed by (user, project, task_id), branch agent/<tenant>/task-<task_id> (TaskBranch).
	ModeTask WorkspaceMode = "task"
)

// Valid reports whether m is one of the three modes.
func (m WorkspaceMode) Valid() bool {
	return m == ModeAnalysis || m == ModeEdit || m == ModeTask
}

// Capabilities are derived from the mode once (CapabilitiesFromMode) and
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

// WorkspaceRequest asks for a workspace (docs/API.md "Getting a session").
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
	// branch (e.g. a conversation's agent/<tenant>/edits-<id>) instead of BaseRef.
	FromBranch string `json:"from_branch,omitempty"`
	// Network is the workspace's network policy: the widest network any of
	// its commands may use (docs/SECURITY.md "Network modes"). "" keeps the
	// stored policy of an existing workspace and gives a new one the
	// worker's default (SANDBOX_RUNTIME_NETWORK); a mode above the worker's
	// SANDBOX_NETWORK_MAX is SandboxCommandRejected. An acquire that sets it
	// (or NetworkAllow) replaces the stored policy.
	Network Network `json:"network,omitempty"`
	// NetworkAllow adds allow-list entries (NetworkRule forms, at most
	// MaxNetworkAllowEntries) to the worker's SANDBOX_NETWORK_ALLOW for this
	// workspace's limited network, e.g. a private registry.
	NetworkAllow []string `json:"network_allow,omitempty"`
	// Refresh makes the acquire fetch the repository from its remote now,
	// whatever the repo cache's freshness window (SANDBOX_FETCH_FRESHNESS),
	// so a new workspace starts from the remote's current tip (docs/API.md
	// "Getting a session", Freshness). It is no part of the workspace's key.
	Refresh bool `json:"refresh,omitempty"`
	// Setup says whether the repository's setup commands run for this
	// acquire (SetupAuto, the default; SetupWait; SetupSkip; docs/RUNTIMES.md
	// "Setup"). It is no part of the workspace's key.
	Setup string `json:"setup,omitempty"`
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

// Workspace is one durable worktree: the stored record (docs/DESIGN.md "The three things").
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
	// Network is the workspace's network policy (WorkspaceRequest.Network as
	// resolved at acquire); "" for a workspace recorded before policies
	// existed (the worker's SANDBOX_RUNTIME_NETWORK applies).
	Network Network `json:"network,omitempty"`
	// NetworkAllow is the workspace's own allow-list entries, canonical
	// (NetworkRule.String), added to the worker's for its limited network.
	NetworkAllow []string  `json:"network_allow,omitempty"`
	LastUsedAt   time.Time `json:"last_used_at"`
	SizeBytes    int64     `json:"size_bytes"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`

	// BaseFetchedAt is when the repo cache the base commit was resolved in
	// had last fetched from the remote (RepoCache.LastFetchedAt then): the
	// base is the remote's state as of that time. nil when unknown (rows
	// older than the column).
	BaseFetchedAt *time.Time `json:"base_fetched_at,omitempty"`
	// UninitializedSubmodules lists the submodule paths whose recorded
	// commit is not checked out (docs/API.md "Submodules"). Not stored: the
	// acquire activity fills it from the worktree.
	UninitializedSubmodules []string `json:"uninitialized_submodules,omitempty"`
	// Environment is what the repository's own files say its commands
	// need, read at BaseCommit (docs/RUNTIMES.md "Repository
	// environment"); nil when the repository has none of those files. Not
	// stored: the acquire activity fills it.
	Environment *RepoEnvironment `json:"environment,omitempty"`
}

// RepoEnvironment is a repository's environment as read from
// .sandboxcore.yaml and .devcontainer/devcontainer.json at the workspace's
// base commit (docs/RUNTIMES.md "Repository environment"). Nothing in it
// is trusted: what fails validation is left out and named in Problems.
type RepoEnvironment struct {
	// Sources are the files read, in order of precedence (later wins).
	Sources []string `json:"sources"`
	// Image is the image the repository names (devcontainer "image",
	// .sandboxcore.yaml "image"); never pulled.
	Image string `json:"image,omitempty"`
	// ImageUsed: the workspace's runtimes run Image (the Docker runtime,
	// when the worker's SANDBOX_REPO_IMAGES allows it and its daemon has
	// it); otherwise Problems says why not and the worker's image runs.
	ImageUsed bool `json:"image_used,omitempty"`
	// Env are the variables every command of the workspace gets
	// (devcontainer "containerEnv" and "remoteEnv", .sandboxcore.yaml
	// "env"); the worker's own variables and a command's env win over them.
	Env map[string]string `json:"env,omitempty"`
	// Setup are the setup commands, each an argv, in order (devcontainer
	// onCreateCommand, updateContentCommand, postCreateCommand;
	// .sandboxcore.yaml "setup").
	Setup [][]string `json:"setup,omitempty"`
	// Lockfiles are the files whose content decides whether the setup runs
	// again (.sandboxcore.yaml "lockfiles").
	Lockfiles []string `json:"lockfiles,omitempty"`
	// LockfilesHash is a hash of the lockfiles' content in the worktree as
	// of this acquire ("" when the environment names none): the setup runs
	// again when it changes.
	LockfilesHash string `json:"lockfiles_hash,omitempty"`
	// Prepared are the directories of the worktree the setup produces
	// (.sandboxcore.yaml "prepared": node_modules, .venv, vendor): after a
	// setup succeeds they are kept as a prepared tree keyed by the
	// lockfiles, and a new workspace whose lockfiles hash the same gets
	// them instead of running the setup (docs/RUNTIMES.md "Prepared
	// trees").
	Prepared []string `json:"prepared,omitempty"`
	// ForwardPorts are the ports the repository's services listen on
	// (devcontainer "forwardPorts"), for preview URLs.
	ForwardPorts []int `json:"forward_ports,omitempty"`
	// Ignored names the devcontainer.json properties this service does not
	// use (features, build, mounts, …).
	Ignored []string `json:"ignored,omitempty"`
	// Problems says what was refused and why (unknown or malformed fields,
	// hostile values, files too large), one line each.
	Problems []string `json:"problems,omitempty"`
}

// Network is a runtime's network policy (docs/SECURITY.md "Network modes").
type Network string

// Network policies.
const (
	NetworkNone    Network = "none"
	NetworkLimited Network = "limited"
	NetworkDefault Network = "default"
)
