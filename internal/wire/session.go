package wire

import (
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// PullRequestFor returns the code host request of a create_pull_request
// argument whose head is the workspace branch head.
func PullRequestFor(in sandboxapi.PullRequestInput, head string) sandbox.PullRequestRequest {
	return sandbox.PullRequestRequest{Title: in.Title, Body: in.Body, Base: in.Base, Head: head, Draft: in.Draft,
		Reviewers: in.Reviewers, Labels: in.Labels}
}

// SessionRunInput is what SessionWorkflow actually decodes: the public
// sandboxapi.SessionInput plus the Carry a run hands its successor on
// continue-as-new (clients never send Carry).
type SessionRunInput struct {
	WorkspaceID string                       `json:"workspace_id"`
	Request     *sandboxapi.WorkspaceRequest `json:"request,omitempty"`
	Carry       *SessionCarry                `json:"carry,omitempty"`
}

// SessionCarry is the state handed across continue-as-new.
type SessionCarry struct {
	Workspace      sandboxapi.Workspace `json:"workspace"`
	Settings       SessionSettings      `json:"settings"`
	RuntimeRunning bool                 `json:"runtime_running"`
	LastActivity   time.Time            `json:"last_activity"`
	Ops            int64                `json:"ops"`
	// RuntimeReplica is the last replica state a remote runtime reported.
	RuntimeReplica *sandboxapi.RuntimeReplica `json:"runtime_replica,omitempty"`
	// State is the previous run's state (one of sandboxapi.SessionStates);
	// empty in histories recorded before it existed.
	State string `json:"state,omitempty"`
	// Dormant: the previous run ended released, closed or evicted; this run
	// holds no runtime and waits for the next operation or signal, which
	// resumes the workspace first (docs/API.md "Session states").
	Dormant bool `json:"dormant,omitempty"`
	// Processes are the background processes the session started that may
	// still run (idle rules).
	Processes []ProcessTrack `json:"processes,omitempty"`
	// Facts is what the previous run had learned of the workspace (its
	// current details); absent in histories recorded before it existed.
	Facts *SessionFacts `json:"facts,omitempty"`
	// Setup is the workspace's setup state (docs/RUNTIMES.md "Setup");
	// absent in histories recorded before it existed.
	Setup *sandboxapi.SetupState `json:"setup,omitempty"`
}

// SessionFacts is what a session run knows of its workspace from its own
// operations' results, without asking anything (the acquire, status,
// commit, push and merge results), and its last operation: the run's
// current details show them (docs/OPERATIONS.md "What a session shows").
// A fact keeps the name of the operation that reported it; Stale names a
// later operation that may have changed it (a command, or a merge).
type SessionFacts struct {
	// Head is the workspace's HEAD commit ("" unknown).
	Head     string `json:"head,omitempty"`
	HeadFrom string `json:"head_from,omitempty"`
	// Dirty is whether the worktree has uncommitted changes (nil unknown).
	Dirty     *bool  `json:"dirty,omitempty"`
	DirtyFrom string `json:"dirty_from,omitempty"`
	// Unpushed counts commits no remote-tracking branch, tag or push
	// contains (nil unknown).
	Unpushed     *int   `json:"unpushed,omitempty"`
	UnpushedFrom string `json:"unpushed_from,omitempty"`
	// Stale names the first operation since these facts that may have
	// changed them ("" none).
	Stale string `json:"stale,omitempty"`
	// LastOp is the last operation's update name, LastOutcome "ok", an exit
	// status ("exit 3", "timed out") or the error type; LastTookMS its
	// duration in milliseconds (workflow time) and LastAt when it ended.
	LastOp      string    `json:"last_op,omitempty"`
	LastOutcome string    `json:"last_outcome,omitempty"`
	LastTookMS  int64     `json:"last_took_ms,omitempty"`
	LastAt      time.Time `json:"last_at,omitzero"`
	// Overlaps is how many other workspaces the last overlaps update
	// found (nil: never asked), OverlapsHigh how many of them at high risk,
	// OverlapsAt when (docs/API.md "Overlaps"; the SandboxOverlaps line of
	// the session's current details).
	Overlaps     *int      `json:"overlaps,omitempty"`
	OverlapsHigh int       `json:"overlaps_high,omitempty"`
	OverlapsAt   time.Time `json:"overlaps_at,omitzero"`
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
	// ProcessMaxIdle: a live background process keeps the runtime from
	// hibernating this long after it was last started, read or written
	// (SANDBOX_PROCESS_MAX_IDLE); 0 means sandboxapi.DefaultProcessMaxIdle.
	ProcessMaxIdle time.Duration `json:"process_max_idle,omitempty"`
	// LockWait bounds how long an update a client sent waits for the
	// session's lock before it fails WorkspaceLocked naming what holds it
	// (SANDBOX_LOCK_WAIT; 0: no bound, as in runs recorded before it existed).
	LockWait time.Duration `json:"lock_wait,omitempty"`
	// RuntimeProcesses says whether the host's runtimes run processes
	// (sandbox.RuntimeCapabilities.Processes): when false an exec's command
	// runs in the exec activity at once, without first asking
	// ActivityExecStart. nil: not said (settings recorded before it
	// existed): the session asks ActivityExecStart, which answers
	// Unsupported on such a runtime.
	RuntimeProcesses *bool `json:"runtime_processes,omitempty"`
	// CodeHost: the host has a code host for this session's repository
	// (set per workspace by the acquire activity; sandboxapi.Handle.CodeHost).
	CodeHost bool `json:"code_host,omitempty"`
}

// HandleFor builds the sandboxapi.Handle of a workspace.
func HandleFor(ws sandboxapi.Workspace, settings SessionSettings, created bool) sandboxapi.Handle {
	wfID, _ := sandboxapi.SessionWorkflowID(ws.ID)
	return sandboxapi.Handle{
		WorkspaceID: ws.ID, WorkflowID: wfID, LocalPath: ws.LocalPath, Branch: ws.BranchName,
		BaseRef: ws.BaseRef, BaseCommit: ws.BaseCommit, Mode: ws.Mode, Capabilities: ws.Capabilities,
		Repo: ws.Repo, HostID: ws.HostID, RuntimeKind: settings.RuntimeKind, UserID: ws.UserID,
		ProjectID: ws.ProjectID, Created: created, ContractVersion: sandboxapi.ContractVersion,
		BaseFetchedAt: ws.BaseFetchedAt, UninitializedSubmodules: ws.UninitializedSubmodules,
		CodeHost: settings.CodeHost, Network: ws.Network, NetworkAllow: ws.NetworkAllow,
		Environment: ws.Environment,
	}
}

// LocateResult says where a workspace lives ("" host = not created yet).
type LocateResult struct {
	HostID string `json:"host_id"`
	Exists bool   `json:"exists"`
	// Removed: the workspace was destroyed and its row stays as a tombstone
	// (state removed) because what the destroy kept (a backup, checkpoints)
	// lives on HostID (docs/API.md "Destroy").
	Removed bool `json:"removed,omitempty"`
	// HostWait is the locating worker's SessionSettings.HostWait.
	HostWait time.Duration `json:"host_wait,omitempty"`
	// CodeHost: the host has a code host for this session's repository
	// (set per workspace by the acquire activity; sandboxapi.Handle.CodeHost).
	CodeHost bool `json:"code_host,omitempty"`
}

// AcquireActivityInput is the acquire activity's argument.
type AcquireActivityInput struct {
	WorkspaceID string                       `json:"workspace_id"`
	Request     *sandboxapi.WorkspaceRequest `json:"request,omitempty"`
	// Restore: the restore update asks for it; the work a destroy saved is
	// brought back (docs/API.md "Destroy").
	Restore bool `json:"restore,omitempty"`
}

// AcquireActivityResult is the acquire activity's result.
type AcquireActivityResult struct {
	Workspace sandboxapi.Workspace `json:"workspace"`
	Settings  SessionSettings      `json:"settings"`
	Created   bool                 `json:"created"`
	// RestoredFrom: see sandboxapi.Handle.RestoredFrom.
	RestoredFrom string `json:"restored_from,omitempty"`
	// Restorable, ForkedFrom: see sandboxapi.Handle.
	Restorable string `json:"restorable,omitempty"`
	ForkedFrom string `json:"forked_from,omitempty"`
	// RuntimeReplica: see sandboxapi.Handle.RuntimeReplica (remote runtimes only).
	RuntimeReplica *sandboxapi.RuntimeReplica `json:"runtime_replica,omitempty"`
}

// ExecActivityInput is the exec activity's argument.
type ExecActivityInput struct {
	WorkspaceID string                 `json:"workspace_id"`
	Request     sandboxapi.ExecRequest `json:"request"`
	// UpdateID is the exec update's id, echoed in sandboxapi.ExecProgress so a streaming
	// client recognizes its own command.
	UpdateID string `json:"update_id,omitempty"`
	// ProcessID, for ActivityExecStart, names the process to start (once);
	// for ActivityExec, the process ActivityExecStart started: the activity
	// waits for it (re-attaching after a retry) and never starts a command.
	ProcessID string `json:"process_id,omitempty"`
	// Wait is how long ActivityExecStart waits for the command to end.
	Wait time.Duration `json:"wait,omitempty"`
	// Setup marks the workspace's setup run: a command sent with
	// sandboxapi.ExecRequest.BesideSetup runs beside it.
	Setup bool `json:"setup,omitempty"`
	// RawResult asks ActivityExecStart and ActivityExec for their result
	// as ExecStartPayload and ExecPayload make it: the command's result
	// ready for the client, its ExecHead in the payload's metadata.
	RawResult bool `json:"raw_result,omitempty"`
}

// ExecActivityResult is the exec activity's result: the command's result
// (its fields inline, so histories recorded when the activity returned a
// bare sandboxapi.ExecResult decode into it) and, on remote runtimes, the
// replica's state after the command (sandboxapi.SessionDescription.RuntimeReplica).
type ExecActivityResult struct {
	sandboxapi.ExecResult
	RuntimeReplica *sandboxapi.RuntimeReplica `json:"runtime_replica,omitempty"`
}

// OpInput is the argument of an activity that serves one update on one
// workspace: the workspace and the update's argument as the client sent it
// (search, log, read_output, commit and the process updates; JSON
// {"workspace_id", "request"}).
type OpInput[T any] struct {
	WorkspaceID string `json:"workspace_id"`
	Request     T      `json:"request"`
}

// FileActivityInput serves read_file, write_file and list_dir (Depth,
// SkipHidden and SkipIgnored: sandboxapi.ListDirInput).
type FileActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	Path        string `json:"path"`
	Content     []byte `json:"content,omitempty"`
	Mode        uint32 `json:"mode,omitempty"`
	Depth       int    `json:"depth,omitempty"`
	SkipHidden  bool   `json:"skip_hidden,omitempty"`
	SkipIgnored bool   `json:"skip_ignored,omitempty"`
	// IfMatch is write_file's precondition (sandboxapi.WriteFileInput.IfMatch).
	IfMatch string `json:"if_match,omitempty"`
}

// EditFileActivityInput is the edit-file activity's argument; UpdateID
// (the edit_file update's id) keeps a retried activity from applying the
// edit twice.
type EditFileActivityInput struct {
	WorkspaceID string                   `json:"workspace_id"`
	Request     sandboxapi.EditFileInput `json:"request"`
	UpdateID    string                   `json:"update_id,omitempty"`
}

// PreviewURLActivityInput is the preview_url activity's argument.
type PreviewURLActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
	// Port is the preview_url update's port (validated: 1–65535).
	Port int `json:"port"`
}

// WorkspaceActivityInput serves status, diff, hibernate and destroy-runtime.
type WorkspaceActivityInput struct {
	WorkspaceID string `json:"workspace_id"`
}
