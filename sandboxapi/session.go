package sandboxapi

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// ContractVersion is the semantic version of this wire contract, carried by
// every Handle and SessionDescription (docs/API.md "Versioning"): within a
// major version changes are additive only (new operations, new optional
// fields, new error kinds below an existing one); a minor version adds, a
// patch version fixes documentation or behaviour without changing shapes.
const ContractVersion = "1.0.0"

// Task queues.
const (
	// DefaultTaskQueue is the shared queue every worker polls; session
	// workflows start here (SANDBOX_TASK_QUEUE overrides).
	DefaultTaskQueue = "sandbox"
	// HostTaskQueuePrefix + host id is the queue only that host polls; every
	// activity touching a local workspace's files or runtime is sent there.
	HostTaskQueuePrefix = "sandbox-host-"
)

// SessionWorkflowType is the registered name of the per-workspace workflow
// (docs/API.md "Getting a session").
const SessionWorkflowType = "SessionWorkflow"

// QueryDescribe returns a SessionDescription.
const QueryDescribe = "describe"

// Custom search attributes set on every session for the Web UI and for
// listing (docs/API.md "Listing workspaces", "Operators"; docs/OPERATIONS.md).
// All are Keyword (exact match) except SearchAttrConversation and
// SearchAttrTask, which are KeywordList holding one value: a Temporal
// namespace with SQL visibility (SQLite, PostgreSQL) has only 10 Keyword
// slots, and a one-value KeywordList still matches exactly with = and IN
// (SearchAttributeTypes).
const (
	SearchAttrUser      = "SandboxUser"
	SearchAttrProject   = "SandboxProject"
	SearchAttrRepo      = "SandboxRepo"
	SearchAttrMode      = "SandboxMode"
	SearchAttrState     = "SandboxState"
	SearchAttrHost      = "SandboxHost"
	SearchAttrWorkspace = "SandboxWorkspace"
	// SearchAttrBranch is the workspace's branch (unset for analysis
	// workspaces, which are detached).
	SearchAttrBranch = "SandboxBranch"
	// SearchAttrRuntime is the runtime kind of the workspace's host (RuntimeKinds).
	SearchAttrRuntime = "SandboxRuntime"
	// SearchAttrConversation is an edit workspace's conversation id (KeywordList of one).
	SearchAttrConversation = "SandboxConversation"
	// SearchAttrTask is a task workspace's task id (KeywordList of one).
	SearchAttrTask = "SandboxTask"
	// SearchAttrDirty (Bool) is whether the workspace has uncommitted
	// changes, as its session last learned (acquire, status, write_file,
	// commit, merge_branches); upserted only when that value changes.
	SearchAttrDirty = "SandboxDirty"
	// SearchAttrEvictionFailures (Int) is set on every eviction run when it
	// finishes: its failed and blocked actions plus its unreachable or failed hosts.
	SearchAttrEvictionFailures = "SandboxEvictionFailures"
)

// MemoWorkspace is the memo field of every session holding its Handle (JSON),
// refreshed on acquire: what the Web UI and `sandboxctl list` show.
const MemoWorkspace = "workspace"

// SearchAttributeNames lists every custom search attribute (types in SearchAttributeTypes).
var SearchAttributeNames = []string{SearchAttrUser, SearchAttrProject, SearchAttrRepo, SearchAttrMode, SearchAttrState, SearchAttrHost, SearchAttrWorkspace,
	SearchAttrBranch, SearchAttrRuntime, SearchAttrConversation, SearchAttrTask, SearchAttrDirty, SearchAttrEvictionFailures}

// SearchAttributeTypes maps every custom search attribute to its indexed
// value type, as workers register them (idempotently, on every start).
// 9 of a SQL-visibility namespace's 10 Keyword slots, 2 of its 3
// KeywordList slots, 1 of its 3 Bool and 1 of its 3 Int slots.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	SearchAttrUser: enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttrProject: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrRepo: enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttrMode: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrState: enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttrHost: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrWorkspace: enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttrBranch: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrRuntime:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrConversation: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, SearchAttrTask: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	SearchAttrDirty: enumspb.INDEXED_VALUE_TYPE_BOOL, SearchAttrEvictionFailures: enumspb.INDEXED_VALUE_TYPE_INT,
}

// SessionStartSearchAttributes are the search attributes a session is
// started with (by the client's update-with-start, or as a fan-out's child):
// SandboxWorkspace = wsID and SandboxState = acquiring, plus SandboxUser,
// SandboxProject and SandboxMode when req is not nil. The run sets the rest
// (repo, host, later states) itself.
func SessionStartSearchAttributes(wsID string, req *WorkspaceRequest) []temporal.SearchAttributeUpdate {
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace).ValueSet(wsID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrState).ValueSet(StateAcquiring),
	}
	if req != nil {
		attrs = append(attrs,
			temporal.NewSearchAttributeKeyKeyword(SearchAttrUser).ValueSet(req.UserID),
			temporal.NewSearchAttributeKeyKeyword(SearchAttrProject).ValueSet(req.ProjectID),
			temporal.NewSearchAttributeKeyKeyword(SearchAttrMode).ValueSet(string(req.Mode)))
	}
	return attrs
}

// Session states: the SandboxState search attribute and
// SessionDescription.State (docs/API.md "Session states").
const (
	// StateAcquiring: the run waits for (or runs) its first acquire.
	StateAcquiring = "acquiring"
	// StateActive: the workspace is ready and its runtime may be running.
	StateActive = "active"
	// StateIdle: the runtime is hibernated; the session is open.
	StateIdle = "idle"
	// StateReleased: the agent released the session (runtime stopped or
	// destroyed); the next operation resumes it.
	StateReleased = "released"
	// StateClosed: the session closed after SANDBOX_IDLE_CLOSE without an
	// operation (runtime destroyed); the next operation resumes it.
	StateClosed = "closed"
	// StateEvicted: eviction saved and removed the worktree; the next
	// acquire restores it.
	StateEvicted = "evicted"
	// StateFailed: the run's acquire failed or was rejected; it ended and is
	// never listed as a workspace.
	StateFailed = "failed"
	// StateDestroyed: destroy removed the workspace; the run ended (the
	// session is complete) and is never listed as a workspace.
	StateDestroyed = "destroyed"
)

// SessionStates lists every session state, for documentation and schemas.
var SessionStates = []string{StateAcquiring, StateActive, StateIdle, StateReleased, StateClosed, StateEvicted, StateFailed, StateDestroyed}

// ListWorkspacesQuery is the visibility query that lists workspaces one row
// each, with their state in SandboxState (docs/API.md "Listing
// workspaces"): a workspace's session run stays open (released, closed and
// evicted ones included) until the workspace is removed, and a run whose
// acquire failed ends with StateFailed. AND further filters onto it, e.g.
// "SandboxUser = 'alice'".
const ListWorkspacesQuery = "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running'"

// SessionInput is SessionWorkflow's argument (docs/API.md "Getting a
// session"): Request for the first acquire of a key, or WorkspaceID alone
// to resume an existing workspace (or to deliver a signal with
// signal-with-start).
type SessionInput struct {
	// WorkspaceID is WorkspaceIDForKey of the request's key.
	WorkspaceID string `json:"workspace_id"`
	// Request, when set, must have the key of WorkspaceID.
	Request *WorkspaceRequest `json:"request,omitempty"`
}

// AcquireInput is the acquire update's argument. Request may be nil to attach
// to the session's existing workspace; when set, it must have the session's key.
type AcquireInput struct {
	Request *WorkspaceRequest `json:"request,omitempty"`
}

// Handle is what acquire returns: enough for an agent to work with the workspace.
type Handle struct {
	WorkspaceID string `json:"workspace_id"`
	WorkflowID  string `json:"workflow_id"`
	// LocalPath is the worktree's absolute path on its host.
	LocalPath    string        `json:"local_path"`
	Branch       string        `json:"branch"`
	BaseRef      string        `json:"base_ref"`
	BaseCommit   string        `json:"base_commit"`
	Mode         WorkspaceMode `json:"mode"`
	Capabilities Capabilities  `json:"capabilities"`
	Repo         RepoIdentity  `json:"repo"`
	HostID       string        `json:"host_id"`
	// RuntimeKind is the host's runtime provider (RuntimeKinds).
	RuntimeKind string `json:"runtime_kind"`
	UserID      string `json:"user_id"`
	ProjectID   string `json:"project_id"`
	// Created is true when this acquire made the worktree (false on reuse).
	Created bool `json:"created"`
	// RestoredFrom is set when this acquire restored an evicted workspace's
	// saved work: the backup ref (refs/sandbox/evicted/<workspace id>) it
	// was written from.
	RestoredFrom string `json:"restored_from,omitempty"`
	// Restorable is set when this workspace's key was destroyed with its work
	// saved and the work was not brought back (this acquire started fresh):
	// the backup ref (refs/sandbox/destroyed/<workspace id>) the restore
	// update brings back (docs/API.md "Destroy").
	Restorable string `json:"restorable,omitempty"`
	// ForkedFrom is set when this acquire created the workspace as a fork:
	// the source workspace's id (docs/API.md "Fork").
	ForkedFrom string `json:"forked_from,omitempty"`
	// RuntimeReplica is the remote runtime's replica state (optional: set
	// by remote runtimes such as Daytona once the workspace has a runtime;
	// docs/API.md "Remote runtimes").
	RuntimeReplica *RuntimeReplica `json:"runtime_replica,omitempty"`
	// ContractVersion is the worker's ContractVersion.
	ContractVersion string `json:"contract_version"`
	// Network is the workspace's network policy (Workspace.Network).
	Network Network `json:"network,omitempty"`
	// NetworkAllow is the workspace's own allow-list entries
	// (Workspace.NetworkAllow).
	NetworkAllow []string `json:"network_allow,omitempty"`
	// CodeHost: the worker has a code host for the repository's host, so
	// create_pull_request can be served (docs/API.md "Updates"); false when
	// none is configured (that update is then SandboxCommandRejected).
	CodeHost bool `json:"code_host,omitempty"`
	// BaseFetchedAt is when the repo cache had last fetched from the remote
	// when BaseCommit was resolved (Workspace.BaseFetchedAt): the base is
	// the remote's state as of then, up to SANDBOX_FETCH_FRESHNESS old for a
	// new workspace of the default branch. Omitted when unknown.
	BaseFetchedAt *time.Time `json:"base_fetched_at,omitempty"`
	// UninitializedSubmodules lists the submodule paths whose recorded
	// commit is not checked out as of this acquire (submodules off, or not
	// fetched; docs/API.md "Submodules"). Omitted when none.
	UninitializedSubmodules []string `json:"uninitialized_submodules,omitempty"`
	// Environment is the repository's environment read at BaseCommit
	// (Workspace.Environment, docs/RUNTIMES.md "Repository environment");
	// omitted when the repository has none.
	Environment *RepoEnvironment `json:"environment,omitempty"`
	// Setup is the state of the workspace's setup run as of this acquire
	// (docs/RUNTIMES.md "Setup"); omitted when the repository names no
	// setup command.
	Setup *SetupState `json:"setup,omitempty"`
}

// Runtime kinds (Handle.RuntimeKind).
const (
	RuntimeLocal  = "local"
	RuntimeBwrap  = "bwrap"
	RuntimeDocker = "docker"
	// RuntimeDaytona is the remote runtime: each runtime a Daytona sandbox
	// holding a replica of the workspace (RuntimeReplica).
	RuntimeDaytona = "daytona"
	// RuntimeE2B is the other remote runtime: each runtime an E2B sandbox
	// holding a replica of the workspace (RuntimeReplica).
	RuntimeE2B = "e2b"
)

// RuntimeKinds lists every runtime kind, for documentation and schemas.
var RuntimeKinds = []string{RuntimeLocal, RuntimeBwrap, RuntimeDocker, RuntimeDaytona, RuntimeE2B}

// HibernateResult says what hibernate did.
type HibernateResult struct {
	RuntimeID string `json:"runtime_id"`
	Stopped   bool   `json:"stopped"`
}

// ReleaseInput releases the session: the runtime is hibernated (or
// destroyed when DestroyRuntime); the workspace always stays.
type ReleaseInput struct {
	DestroyRuntime bool `json:"destroy_runtime,omitempty"`
}

// ReleaseResult confirms a release.
type ReleaseResult struct {
	WorkspaceID string `json:"workspace_id"`
	// Runtime is "stopped", "destroyed" or "not running".
	Runtime string `json:"runtime"`
}

// SessionDescription is the describe query's result.
type SessionDescription struct {
	WorkspaceID string `json:"workspace_id"`
	// State is one of SessionStates.
	State string `json:"state"`
	// Workspace is the workspace's stored record (nil before the first acquire).
	Workspace      *Workspace `json:"workspace,omitempty"`
	RuntimeKind    string     `json:"runtime_kind"`
	RuntimeRunning bool       `json:"runtime_running"`
	// InFlight counts the operations running or waiting for the lock.
	InFlight int `json:"in_flight"`
	// Ops counts the operations this run handled.
	Ops          int64     `json:"ops"`
	LastActivity time.Time `json:"last_activity"`
	// IdleStopAt is when the runtime is hibernated if nothing happens; set
	// only while it runs. A live background process defers it (docs/API.md
	// "Idle rules for processes").
	IdleStopAt *time.Time `json:"idle_stop_at,omitempty"`
	// LiveProcesses counts the background processes the session started
	// that may still run (as far as it learnt from process operations).
	LiveProcesses int `json:"live_processes,omitempty"`
	// RunningExecs lists the update ids of the execs running or queued.
	RunningExecs []string `json:"running_execs,omitempty"`
	// IdleCloseAt is when the session closes if nothing happens; the zero
	// time once it is released, closed or evicted.
	IdleCloseAt time.Time `json:"idle_close_at"`
	LastError   string    `json:"last_error,omitempty"`
	// RuntimeReplica is the remote runtime's replica state as of the last
	// acquire or exec (optional, as Handle.RuntimeReplica).
	RuntimeReplica *RuntimeReplica `json:"runtime_replica,omitempty"`
	// ContractVersion is the worker's ContractVersion.
	ContractVersion string `json:"contract_version"`
	// Setup is the state of the workspace's setup run (docs/RUNTIMES.md
	// "Setup"); omitted when the repository names no setup command.
	Setup *SetupState `json:"setup,omitempty"`
}
