package sandboxapi

import (
	"reflect"
	"slices"
)

// Op declares one SessionWorkflow update: its wire name and the Go types of
// its argument and result (docs/API.md "Updates"). It is the client half of
// the operation table; the worker half (workflows/ops.go) binds each Op to
// its validator and activity. A client sends In as the update's one argument
// and decodes Out from its result; an Op whose In is None takes no argument
// (an empty object or no argument at all).
type Op[In, Out any] struct {
	// Name is the update name.
	Name string
	// Mutating: the update runs alone (no other operation of the workspace
	// runs meanwhile); read-only ones run together when nothing mutating does.
	Mutating bool
	// Immediate: the update never waits for the session's lock; it runs at
	// once whatever else runs (the process controls and cancel, docs/API.md
	// "Processes").
	Immediate bool
	// Summary is one line for documentation.
	Summary string
}

// Info returns the Op's OpInfo.
func (o Op[In, Out]) Info() OpInfo {
	info := OpInfo{Name: o.Name, Mutating: o.Mutating, Immediate: o.Immediate, Summary: o.Summary,
		In: reflect.TypeFor[In](), Out: reflect.TypeFor[Out]()}
	if info.In == reflect.TypeFor[None]() {
		info.In = nil
	}
	return info
}

// None is the argument of an update that takes none.
type None struct{}

// OpInfo describes one update for documentation, schema generation and
// tests (Operations).
type OpInfo struct {
	Name      string
	Mutating  bool
	Immediate bool
	Summary   string
	// In is the argument's type, nil when the update takes none.
	In reflect.Type
	// Out is the result's type.
	Out reflect.Type
}

// Update names of SessionWorkflow, one per Op below.
const (
	UpdateAcquire           = "acquire"
	UpdateExec              = "exec"
	UpdateReadFile          = "read_file"
	UpdateWriteFile         = "write_file"
	UpdateEditFile          = "edit_file"
	UpdateListDir           = "list_dir"
	UpdateSearch            = "search"
	UpdateStatus            = "status"
	UpdateDiff              = "diff"
	UpdateLog               = "log"
	UpdateReadOutput        = "read_output"
	UpdateCommit            = "commit"
	UpdateHibernate         = "hibernate"
	UpdateRelease           = "release"
	UpdatePush              = "push"
	UpdateCreatePullRequest = "create_pull_request"
	UpdateMergeBranches     = "merge_branches"
	UpdateProcessStart      = "process_start"
	UpdateProcessRead       = "process_read"
	UpdateProcessWrite      = "process_write"
	UpdateProcessSignal     = "process_signal"
	UpdateProcessResize     = "process_resize"
	UpdateProcessList       = "process_list"
	UpdateCancel            = "cancel"
	UpdateCheckpoint        = "checkpoint"
	UpdateCheckpoints       = "checkpoints"
	UpdateRollback          = "rollback"
	UpdateFork              = "fork"
	UpdateDestroy           = "destroy"
	UpdateRestore           = "restore"
	UpdatePreviewURL        = "preview_url"
	UpdateOverlaps          = "overlaps"
	UpdateSetup             = "setup"
)

// The operations of SessionWorkflow (docs/API.md "Updates"), in
// documentation order: each is declared once, here, and listed by
// Operations in this order.
var (
	OpAcquire = declare(Op[AcquireInput, Handle]{Name: UpdateAcquire, Mutating: true,
		Summary: "get or create the workspace (update-with-start) and return its handle"})
	OpExec = declare(Op[ExecRequest, ExecResult]{Name: UpdateExec, Mutating: true,
		Summary: "run one command in the workspace's runtime"})
	OpReadFile = declare(Op[ReadFileInput, ReadFileResult]{Name: UpdateReadFile,
		Summary: "read a file of the workspace (at most 1 MiB)"})
	OpWriteFile = declare(Op[WriteFileInput, WriteFileResult]{Name: UpdateWriteFile, Mutating: true,
		Summary: "create or replace a file of the workspace"})
	OpEditFile = declare(Op[EditFileInput, EditFileResult]{Name: UpdateEditFile, Mutating: true,
		Summary: "edit one text file in one step: str_replace, insert or create"})
	OpListDir = declare(Op[ListDirInput, ListDirResult]{Name: UpdateListDir,
		Summary: "list one directory of the workspace"})
	OpSearch = declare(Op[SearchRequest, SearchResult]{Name: UpdateSearch,
		Summary: "find lines matching a pattern in the workspace's files"})
	OpStatus = declare(Op[None, WorkspaceStatus]{Name: UpdateStatus,
		Summary: "the workspace's git state: files, commits since base, unpushed commits"})
	OpDiff = declare(Op[None, Diff]{Name: UpdateDiff,
		Summary: "everything changed against the recorded base commit, as a binary-safe patch"})
	OpLog = declare(Op[LogRequest, LogResult]{Name: UpdateLog,
		Summary: "the newest commits reachable from HEAD"})
	OpReadOutput = declare(Op[ReadOutputInput, ReadOutputResult]{Name: UpdateReadOutput,
		Summary: "a page of the whole output an exec kept (keep_output)"})
	OpCommit = declare(Op[CommitRequest, CommitResult]{Name: UpdateCommit, Mutating: true,
		Summary: "commit the workspace's changes onto its branch"})
	OpHibernate = declare(Op[None, HibernateResult]{Name: UpdateHibernate, Mutating: true,
		Summary: "stop the runtime; the workspace stays"})
	OpRelease = declare(Op[ReleaseInput, ReleaseResult]{Name: UpdateRelease, Mutating: true,
		Summary: "release the session (runtime stopped or destroyed); the next operation resumes it"})
	OpPush = declare(Op[PushRequest, PushResult]{Name: UpdatePush, Mutating: true,
		Summary: "push the workspace branch to the same branch upstream"})
	OpCreatePullRequest = declare(Op[PullRequestInput, PullRequest]{Name: UpdateCreatePullRequest, Mutating: true,
		Summary: "open (or reuse) a pull request from the pushed workspace branch"})
	OpMergeBranches = declare(Op[MergeRequest, MergeResult]{Name: UpdateMergeBranches, Mutating: true,
		Summary: "merge local branches or workspaces into the workspace's branch, in order; dry_run previews"})
	OpProcessStart = declare(Op[ProcessStartInput, ProcessStartResult]{Name: UpdateProcessStart, Mutating: true,
		Summary: "start a background process; returns its id at once"})
	OpProcessRead = declare(Op[ProcessReadInput, ProcessReadResult]{Name: UpdateProcessRead, Immediate: true,
		Summary: "read a process's output from an offset, waiting up to wait_ms for new output"})
	OpProcessWrite = declare(Op[ProcessWriteInput, ProcessWriteResult]{Name: UpdateProcessWrite, Immediate: true,
		Summary: "write to a process's stdin (or terminal), optionally closing it"})
	OpProcessSignal = declare(Op[ProcessSignalInput, ProcessResult]{Name: UpdateProcessSignal, Immediate: true,
		Summary: "send a signal to a process (KILL: its whole tree)"})
	OpProcessResize = declare(Op[ProcessResizeInput, ProcessResult]{Name: UpdateProcessResize, Immediate: true,
		Summary: "resize a PTY process's terminal"})
	OpProcessList = declare(Op[None, ProcessListResult]{Name: UpdateProcessList, Immediate: true,
		Summary: "list the runtime's background processes, live and recently ended"})
	OpCancel = declare(Op[CancelInput, CancelResult]{Name: UpdateCancel, Immediate: true,
		Summary: "cancel a running or queued exec by its update id: its whole tree is killed"})
	OpCheckpoint = declare(Op[CheckpointInput, Checkpoint]{Name: UpdateCheckpoint, Mutating: true,
		Summary: "record the workspace's exact state (files, modes, HEAD) as a checkpoint"})
	OpCheckpoints = declare(Op[None, CheckpointList]{Name: UpdateCheckpoints,
		Summary: "list the workspace's checkpoints, oldest first"})
	OpRollback = declare(Op[RollbackInput, RollbackResult]{Name: UpdateRollback, Mutating: true,
		Summary: "bring files and HEAD back to a checkpoint, checkpointing the state left first"})
	OpFork = declare(Op[ForkInput, ForkResult]{Name: UpdateFork, Mutating: true,
		Summary: "create a task or edit workspace holding exactly this workspace's current files"})
	OpDestroy = declare(Op[DestroyInput, DestroyResult]{Name: UpdateDestroy, Mutating: true,
		Summary: "save unsaved work (unless discard), remove runtime, worktree and record, end the session"})
	OpRestore = declare(Op[None, Handle]{Name: UpdateRestore, Mutating: true,
		Summary: "bring back the work a destroy (or an eviction) saved, byte for byte"})
	OpPreviewURL = declare(Op[PreviewURLInput, PreviewURL]{Name: UpdatePreviewURL,
		Summary: "a URL reaching a port of the workspace's running runtime (remote and Docker runtimes)"})
	OpOverlaps = declare(Op[None, OverlapsResult]{Name: UpdateOverlaps,
		Summary: "the other live workspaces of this repository, user and project that changed the same files, by risk"})
	OpSetup = declare(Op[None, SetupState]{Name: UpdateSetup, Mutating: true,
		Summary: "run the repository's setup commands again now (or wait for the running ones) and return their outcome"})
)

// operations collects the declarations of the Op variables, in the order
// Go initializes them: their order in the source (declare).
var operations []OpInfo

// declare records op in operations and returns it.
func declare[In, Out any](op Op[In, Out]) Op[In, Out] {
	operations = append(operations, op.Info())
	return op
}

// Operations lists every update of SessionWorkflow in documentation order.
func Operations() []OpInfo { return slices.Clone(operations) }

// MessageInfo describes a workflow argument, signal or query for
// documentation and schema generation (Messages).
type MessageInfo struct {
	// Kind is "workflow", "signal", "query" or "update" (an update of a
	// workflow other than the session, whose updates are Operations).
	Kind string
	// Workflow is the workflow type the message belongs to.
	Workflow string
	// Name is the workflow type (Kind "workflow"), signal or query name.
	Name string
	// In is the argument's type (nil: none); Out the result's (nil: none).
	In, Out reflect.Type
}

// Messages lists the workflow arguments and results, signals and queries of
// the contract (docs/API.md).
func Messages() []MessageInfo {
	t := func(v any) reflect.Type { return reflect.TypeOf(v) }
	return []MessageInfo{
		{Kind: "workflow", Workflow: SessionWorkflowType, Name: SessionWorkflowType, In: t(SessionInput{})},
		{Kind: "query", Workflow: SessionWorkflowType, Name: QueryDescribe, Out: t(SessionDescription{})},
		{Kind: "query", Workflow: SessionWorkflowType, Name: QueryEviction, Out: t(EvictionState{})},
		{Kind: "signal", Workflow: SessionWorkflowType, Name: SignalEvict, In: t(EvictRequest{})},
		{Kind: "signal", Workflow: SessionWorkflowType, Name: SignalPin, In: t(PinRequest{})},
		{Kind: "signal", Workflow: SessionWorkflowType, Name: SignalUnpin, In: t(PinRequest{})},
		{Kind: "signal", Workflow: SessionWorkflowType, Name: SignalProcessUsed, In: t(ProcessUsedSignal{})},
		{Kind: "workflow", Workflow: ProcessStreamWorkflowType, Name: ProcessStreamWorkflowType, In: t(StreamInput{})},
		{Kind: "update", Workflow: ProcessStreamWorkflowType, Name: UpdateProcessRead, In: t(ProcessReadInput{}), Out: t(ProcessReadResult{})},
		{Kind: "workflow", Workflow: TaskFanoutWorkflowType, Name: TaskFanoutWorkflowType, In: t(FanoutInput{}), Out: t(FanoutReport{})},
		{Kind: "query", Workflow: TaskFanoutWorkflowType, Name: QueryProgress, Out: t(FanoutReport{})},
		{Kind: "signal", Workflow: TaskFanoutWorkflowType, Name: SignalCompleteTask, In: t(CompleteTaskSignal{})},
		{Kind: "workflow", Workflow: EvictionCronWorkflowType, Name: EvictionCronWorkflowType, In: t(EvictionInput{}), Out: t(EvictionRunResult{})},
		{Kind: "signal", Workflow: EvictionCronWorkflowType, Name: SignalEvictionReply, In: t(EvictResult{})},
		{Kind: "workflow", Workflow: CleanupWorkflowType, Name: CleanupWorkflowType, In: t(CleanupInput{}), Out: t(CleanupReport{})},
		{Kind: "query", Workflow: CleanupWorkflowType, Name: QueryProgress, Out: t(CleanupReport{})},
	}
}
