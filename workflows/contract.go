// Package workflows holds sandboxcore's Temporal workflows and their wire
// contract: the workflow type, the workflow-id scheme, update/signal/query
// names, activity names and every payload (JSON, documented in docs/API.md so a
// backend in any language can call it with its own Temporal SDK).
//
// Workflow code here is deterministic: it does no I/O and imports no adapter;
// all work happens in activities (package activities) reached by name.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Task queues.
const (
	// DefaultTaskQueue is the shared queue every worker polls; session
	// workflows start here (SANDBOX_TASK_QUEUE overrides).
	DefaultTaskQueue = "sandbox"
	// HostTaskQueuePrefix + host id is the queue only that host polls; every
	// activity touching a local workspace's files or runtime is sent there.
	HostTaskQueuePrefix = "sandbox-host-"
)

// HostTaskQueue returns "sandbox-host-<hostID>".
func HostTaskQueue(hostID string) string { return HostTaskQueuePrefix + hostID }

// SessionWorkflowType is the registered name of the per-workspace workflow.
const SessionWorkflowType = "SessionWorkflow"

// Update names of SessionWorkflow (DESIGN.md "Temporal shape").
const (
	UpdateAcquire   = "acquire"
	UpdateExec      = "exec"
	UpdateReadFile  = "read_file"
	UpdateWriteFile = "write_file"
	UpdateListDir   = "list_dir"
	UpdateSearch    = "search"
	UpdateStatus    = "status"
	UpdateDiff      = "diff"
	UpdateCommit    = "commit"
	UpdateHibernate = "hibernate"
	UpdateRelease   = "release"
)

// Update names of the remote side (issue 5; payloads in contract_push.go).
const (
	UpdatePush              = "push"
	UpdateCreatePullRequest = "create_pull_request"
)

// UpdateMergeBranches merges local branches into the session's workspace
// (issue 7, the task fan-out; argument sandbox.MergeRequest, result sandbox.MergeResult).
const UpdateMergeBranches = "merge_branches"

// QueryDescribe returns a SessionDescription.
const QueryDescribe = "describe"

// Activity names (registered by package activities).
const (
	ActivityLocate         = "sandbox.Locate"
	ActivityAcquire        = "sandbox.Acquire"
	ActivityExec           = "sandbox.Exec"
	ActivityReadFile       = "sandbox.ReadFile"
	ActivityWriteFile      = "sandbox.WriteFile"
	ActivityListDir        = "sandbox.ListDir"
	ActivitySearch         = "sandbox.Search"
	ActivityStatus         = "sandbox.Status"
	ActivityDiff           = "sandbox.Diff"
	ActivityCommit         = "sandbox.Commit"
	ActivityHibernate      = "sandbox.Hibernate"
	ActivityDestroyRuntime = "sandbox.DestroyRuntime"
)

// Activity names of the remote side (issue 5).
const (
	ActivityPush              = "sandbox.Push"
	ActivityCreatePullRequest = "sandbox.CreatePullRequest"
)

// ActivityMergeBranches serves the merge_branches update (issue 7).
const ActivityMergeBranches = "sandbox.MergeBranches"

// Custom search attributes (Keyword) set on every session for the Web UI.
const (
	SearchAttrUser      = "SandboxUser"
	SearchAttrProject   = "SandboxProject"
	SearchAttrRepo      = "SandboxRepo"
	SearchAttrMode      = "SandboxMode"
	SearchAttrState     = "SandboxState"
	SearchAttrHost      = "SandboxHost"
	SearchAttrWorkspace = "SandboxWorkspace"
)

// MemoWorkspace is the memo field of every session holding its Handle (JSON),
// refreshed on acquire: what the Web UI and `sandboxctl list` show.
const MemoWorkspace = "workspace"

// SearchAttributeNames lists every custom search attribute (all Keyword).
var SearchAttributeNames = []string{SearchAttrUser, SearchAttrProject, SearchAttrRepo, SearchAttrMode, SearchAttrState, SearchAttrHost, SearchAttrWorkspace}

// SessionStartSearchAttributes are the search attributes a session is
// started with (by the client's update-with-start, or as a fan-out's child):
// SandboxWorkspace = wsID and SandboxState = acquiring, plus SandboxUser,
// SandboxProject and SandboxMode when req is not nil. The run sets the rest
// (repo, host, later states) itself.
func SessionStartSearchAttributes(wsID string, req *sandbox.WorkspaceRequest) []temporal.SearchAttributeUpdate {
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

// Session states (the SandboxState search attribute and SessionDescription.State).
const (
	StateAcquiring = "acquiring"
	StateActive    = "active"
	StateIdle      = "idle" // runtime hibernated, session still open
	StateClosed    = "closed"
	StateFailed    = "failed"
)

// SessionInput starts a SessionWorkflow run. Exactly one of Request (first
// acquire of a key) or WorkspaceID alone (resume of an existing workspace) is
// the normal case; Carry is set only by continue-as-new.
type SessionInput struct {
	WorkspaceID string                    `json:"workspace_id"`
	Request     *sandbox.WorkspaceRequest `json:"request,omitempty"`
	Carry       *SessionCarry             `json:"carry,omitempty"`
}

// SessionCarry is the state handed across continue-as-new.
type SessionCarry struct {
	Workspace      sandbox.Workspace `json:"workspace"`
	Settings       SessionSettings   `json:"settings"`
	RuntimeRunning bool              `json:"runtime_running"`
	LastActivity   time.Time         `json:"last_activity"`
	Ops            int64             `json:"ops"`
	// State is the previous run's state (StateActive or StateIdle); empty in
	// histories recorded before it existed.
	State string `json:"state,omitempty"`
}

// SessionSettings come from the worker host (returned by the acquire
// activity), so the workflow never reads the environment.
type SessionSettings struct {
	// IdleStop: stop (hibernate) the runtime after this long without an operation.
	IdleStop time.Duration `json:"idle_stop"`
	// IdleClose: destroy the runtime and complete the run after this long without an operation.
	IdleClose time.Duration `json:"idle_close"`
	// RuntimeKind is the host's runtime provider ("local", "bwrap", "docker" …).
	RuntimeKind string `json:"runtime_kind"`
	// StayOnSharedQueue keeps the session's run on the shared task queue. By
	// default (false) the run continues as new on its host's queue after
	// acquire, where quick operations are local activities; that is right when
	// one host serves everything (the embedded server). With several hosts a
	// run on a dead host's queue could not even fail: staying on the shared
	// queue lets any worker fail the operation with WorkspaceUnavailable after HostWait.
	StayOnSharedQueue bool `json:"stay_on_shared_queue,omitempty"`
	// HostWait bounds how long an operation waits for its host's worker to pick
	// it up (activity schedule-to-start); 0 means 2 minutes.
	HostWait time.Duration `json:"host_wait,omitempty"`
}

// AcquireInput is the acquire update's argument. Request may be nil to attach
// to the session's existing workspace; when set, it must have the session's key.
type AcquireInput struct {
	Request *sandbox.WorkspaceRequest `json:"request,omitempty"`
}

// Handle is what acquire returns: enough for an agent to work with the workspace.
type Handle struct {
	WorkspaceID  string                `json:"workspace_id"`
	WorkflowID   string                `json:"workflow_id"`
	LocalPath    string                `json:"local_path"`
	Branch       string                `json:"branch"`
	BaseRef      string                `json:"base_ref"`
	BaseCommit   string                `json:"base_commit"`
	Mode         sandbox.WorkspaceMode `json:"mode"`
	Capabilities sandbox.Capabilities  `json:"capabilities"`
	Repo         sandbox.RepoIdentity  `json:"repo"`
	HostID       string                `json:"host_id"`
	RuntimeKind  string                `json:"runtime_kind"`
	UserID       string                `json:"user_id"`
	ProjectID    string                `json:"project_id"`
	// Created is true when this acquire made the worktree (false on reuse).
	Created bool `json:"created"`
	// RestoredFrom is set when this acquire restored an evicted workspace's
	// saved work: the backup ref (sandbox.EvictedRef) it was written from.
	RestoredFrom string `json:"restored_from,omitempty"`
	// BaseFetchedAt is when the repo cache had last fetched from the remote
	// when BaseCommit was resolved (sandbox.Workspace.BaseFetchedAt): the
	// base is the remote's state as of then, up to SANDBOX_FETCH_FRESHNESS
	// old for a new workspace of the default branch. Omitted when unknown.
	BaseFetchedAt *time.Time `json:"base_fetched_at,omitempty"`
	// UninitializedSubmodules lists the submodule paths whose recorded
	// commit is not checked out as of this acquire (submodules off, or not
	// fetched; docs/API.md "Submodules"). Omitted when none.
	UninitializedSubmodules []string `json:"uninitialized_submodules,omitempty"`
}

// HandleFor builds the Handle of a workspace.
func HandleFor(ws sandbox.Workspace, settings SessionSettings, created bool) Handle {
	wfID, _ := sandbox.SessionWorkflowID(ws.ID)
	return Handle{
		WorkspaceID: ws.ID, WorkflowID: wfID, LocalPath: ws.LocalPath, Branch: ws.BranchName,
		BaseRef: ws.BaseRef, BaseCommit: ws.BaseCommit, Mode: ws.Mode, Capabilities: ws.Capabilities,
		Repo: ws.Repo, HostID: ws.HostID, RuntimeKind: settings.RuntimeKind, UserID: ws.UserID,
		ProjectID: ws.ProjectID, Created: created, BaseFetchedAt: ws.BaseFetchedAt,
		UninitializedSubmodules: ws.UninitializedSubmodules,
	}
}

// ReadFileInput is read_file's argument (Path workspace-relative).
type ReadFileInput struct {
	Path string `json:"path"`
}

// ReadFileResult carries the bytes (base64 in JSON).
type ReadFileResult struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Size    int64  `json:"size"`
	// LFSPointer is set when Content is a Git LFS pointer
	// (sandbox.ParseLFSPointer): the file's real content was not fetched.
	LFSPointer bool `json:"lfs_pointer,omitempty"`
}

// WriteFileInput is write_file's argument; Mode 0 means 0644.
type WriteFileInput struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
}

// WriteFileResult confirms a write.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// ListDirInput is list_dir's argument ("" = the workspace root).
type ListDirInput struct {
	Path string `json:"path,omitempty"`
}

// ListDirResult lists one directory, sorted by name.
type ListDirResult struct {
	Path    string              `json:"path"`
	Entries []sandbox.FileEntry `json:"entries"`
}

// HibernateResult says what hibernate did.
type HibernateResult struct {
	RuntimeID string `json:"runtime_id"`
	Stopped   bool   `json:"stopped"`
}

// ReleaseInput ends the session run: the runtime is hibernated (or destroyed
// when DestroyRuntime); the workspace always stays.
type ReleaseInput struct {
	DestroyRuntime bool `json:"destroy_runtime,omitempty"`
}

// ReleaseResult confirms a release.
type ReleaseResult struct {
	WorkspaceID string `json:"workspace_id"`
	Runtime     string `json:"runtime"` // "stopped" or "destroyed"
}

// SessionDescription is the describe query's result.
type SessionDescription struct {
	WorkspaceID    string             `json:"workspace_id"`
	State          string             `json:"state"`
	Workspace      *sandbox.Workspace `json:"workspace,omitempty"`
	RuntimeKind    string             `json:"runtime_kind"`
	RuntimeRunning bool               `json:"runtime_running"`
	InFlight       int                `json:"in_flight"`
	Ops            int64              `json:"ops"`
	LastActivity   time.Time          `json:"last_activity"`
	IdleStopAt     *time.Time         `json:"idle_stop_at,omitempty"`
	IdleCloseAt    time.Time          `json:"idle_close_at"`
	LastError      string             `json:"last_error,omitempty"`
}

// Activity inputs. Every activity takes the workspace id; the activity loads
// the workspace row from the store (so payloads stay small and secret-free).

// StreamWindowBytes bounds each stream's bytes in one ExecProgress.
const StreamWindowBytes = 64 << 10

// ExecProgress is the heartbeat detail of a running exec activity
// (ActivityExec): the newest bytes of each stream (at most StreamWindowBytes)
// and the absolute offset just past them, so Stdout covers
// [StdoutEnd-len(Stdout), StdoutEnd). A client streams a command's output by
// polling the session's pending exec activity (DescribeWorkflowExecution) and
// printing the bytes past what it has printed (docs/API.md).
type ExecProgress struct {
	UpdateID  string `json:"update_id"`
	Stdout    []byte `json:"stdout"`
	StdoutEnd int64  `json:"stdout_end"`
	Stderr    []byte `json:"stderr"`
	StderrEnd int64  `json:"stderr_end"`
}

// LocateResult says where a workspace lives ("" host = not created yet).
type LocateResult struct {
	HostID string `json:"host_id"`
	Exists bool   `json:"exists"`
	// HostWait is the locating worker's SessionSettings.HostWait.
	HostWait time.Duration `json:"host_wait,omitempty"`
}

// AcquireActivityInput is the acquire activity's argument.
type AcquireActivityInput struct {
	WorkspaceID string                    `json:"workspace_id"`
	Request     *sandbox.WorkspaceRequest `json:"request,omitempty"`
}

// AcquireActivityResult is the acquire activity's result.
type AcquireActivityResult struct {
	Workspace sandbox.Workspace `json:"workspace"`
	Settings  SessionSettings   `json:"settings"`
	Created   bool              `json:"created"`
	// RestoredFrom: see Handle.RestoredFrom.
	RestoredFrom string `json:"restored_from,omitempty"`
}

// ExecActivityInput is the exec activity's argument.
type ExecActivityInput struct {
	WorkspaceID string              `json:"workspace_id"`
	Request     sandbox.ExecRequest `json:"request"`
	// UpdateID is the exec update's id, echoed in ExecProgress so a streaming
	// client recognizes its own command.
	UpdateID string `json:"update_id,omitempty"`
}

// FileActivityInput serves read_file, write_file and list_dir.
type FileActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	Path        string `json:"path"`
	Content     []byte `json:"content,omitempty"`
	Mode        uint32 `json:"mode,omitempty"`
}

// SearchActivityInput is the search activity's argument.
type SearchActivityInput struct {
	WorkspaceID string                `json:"workspace_id"`
	Request     sandbox.SearchRequest `json:"request"`
}

// CommitActivityInput is the commit activity's argument.
type CommitActivityInput struct {
	WorkspaceID string                `json:"workspace_id"`
	Request     sandbox.CommitRequest `json:"request"`
}

// WorkspaceActivityInput serves status, diff, hibernate and destroy-runtime.
type WorkspaceActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
}
