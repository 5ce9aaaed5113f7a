package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// fanout is the state of one TaskFanoutWorkflow run.
type fanout struct {
	in   sandboxapi.FanoutInput
	opID string // "<workflow id>/<run id>": prefix of every update id the activities send
	// segment is the tenant segment of the workflow id
	// (sandbox-fanout/<segment>/<fanout_id>): the fan-out works only on
	// that tenant's conversation. "" under a legacy id, and in runs
	// recorded before tenant ids (versionFanoutTenant).
	segment string
	report  sandboxapi.FanoutReport
	hostID  string
	request sandboxapi.WorkspaceRequest // the conversation's request, template of the task requests
	// completions holds the first complete_task signal per waiting task.
	completions map[string]*sandboxapi.CompleteTaskSignal
	running     int
}

// TaskFanoutWorkflow runs N tasks in parallel task workspaces and merges the
// accepted ones back into a conversation's edit workspace (docs/DESIGN.md "Workspace lifecycle";
// DESIGN.md "Temporal shape"; docs/API.md "Task fan-out").
//
//  1. Prepare: resume (or acquire) the conversation's SessionWorkflow and send
//     it a commit update: uncommitted changes are checkpointed, and the
//     branch tip is pinned as StartCommit. With FromFork nothing is
//     committed and StartCommit is the conversation's HEAD: each task is
//     then created by the conversation session's fork update when it
//     starts (its workspace holds the conversation's uncommitted and
//     untracked files as uncommitted changes) instead of as below.
//  2. Tasks, started in input order with at most MaxParallel in progress:
//     each task's SessionWorkflow (workflow id sandbox-session/<hash of the
//     task key>, the normal session of a task workspace, subject to normal
//     idle timers and eviction) is started as a child workflow (parent-close
//     policy ABANDON) and acquired by update-with-start on the
//     conversation host's task queue, in task mode on branch
//     agent/<tenant>/task-<task_id> created at StartCommit. A task with a script runs
//     it (exec update, ["sh","-c",script]); exit 0 succeeds. A task without
//     one waits for complete_task. A succeeded task's changes are committed
//     (commit update); every task's diff against StartCommit is collected.
//  3. Merge: the succeeded, accepted tasks that changed something are merged
//     in input order by one merge_branches update on the conversation's
//     session (serialized with the agent's own commands); a conflicting task
//     is reported with its files and the conversation stays clean.
//
// The workflow sends no update itself (workflows cannot): each step is an
// activity that sends the update through the Temporal client with an update
// id derived from this run, the task and the activity attempt, so a step
// retried after a worker crash first collects the outcome of the previous
// attempt's update (waiting for it when still running) and only sends a new
// one when that failed. The fan-out's own state is Temporal history, replayed
// on another worker. Errors: the workflow fails (ErrInvalidArgument for bad
// input, or the prepare step's error) only when no task could start; task
// and merge failures are reported in the sandboxapi.FanoutReport it returns.
func TaskFanoutWorkflow(ctx workflow.Context, raw converter.RawValue) (sandboxapi.FanoutReport, error) {
	info := workflow.GetInfo(ctx)
	in, decodeErr := decodeInput[sandboxapi.FanoutInput](ctx, sandboxapi.TaskFanoutWorkflowType, raw)
	f := &fanout{
		in:          in,
		opID:        info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID,
		completions: map[string]*sandboxapi.CompleteTaskSignal{},
		report: sandboxapi.FanoutReport{
			FanoutID: strings.TrimPrefix(info.WorkflowExecution.ID, sandboxapi.FanoutWorkflowIDPrefix),
			State:    sandboxapi.FanoutPreparing,
		},
	}
	if decodeErr != nil {
		f.report.State, f.report.Error = sandboxapi.FanoutFailed, decodeErr.Error()
		return f.report, appError(decodeErr)
	}
	for _, check := range []func() error{
		func() error { return f.readWorkflowID(ctx, info.WorkflowExecution.ID) },
		in.Validate,
		func() error { return f.checkConversationTenant(ctx) },
	} {
		if err := check(); err != nil {
			f.report.State, f.report.Error = sandboxapi.FanoutFailed, err.Error()
			return f.report, appError(err)
		}
	}
	f.report.ConversationWorkspaceID, _ = in.ConversationWorkspace()
	f.report.MaxParallel = in.Parallel()
	f.report.FromFork = in.FromFork
	f.report.Tasks = pendingTasks(in.Tasks)
	if err := workflow.SetQueryHandler(ctx, sandboxapi.QueryProgress, f.progress); err != nil {
		return f.report, err
	}
	watchDetails(ctx, f.details)
	f.receiveCompletions(ctx)

	if err := f.prepare(ctx); err != nil {
		f.report.State, f.report.Error = sandboxapi.FanoutFailed, errorMessage(err)
		return f.report, appError(err)
	}

	f.report.State = sandboxapi.FanoutRunning
	if err := f.runTasks(ctx); err != nil {
		return f.report, err
	}

	f.merge(ctx)
	return f.report, nil
}

// versionFanoutTenant marks the change that keeps a fan-out to its tenant
// (docs/API.md "Task fan-out"): a run whose workflow id is neither
// sandbox-fanout/<tenant segment>/<fanout_id> nor the legacy
// sandbox-fanout/<fanout_id> fails, and so does a run whose conversation
// request is another tenant's (before: both ran). Asked only on those
// refusals, so a history of an accepted run never reaches the marker, and
// the replayer's own workflow id finds none in a recorded history. What
// else the workflow id now decides changes no command: the fan-out id of
// the report and of the commit messages (the same as before for a legacy
// id), and the tenant the prepare activity checks (in its input).
const versionFanoutTenant = "fanout-tenant"

// readWorkflowID sets the report's fan-out id and f.segment from the
// workflow id wfID (sandboxapi.ParseFanoutWorkflowID). A legacy id
// (sandbox-fanout/<fanout_id>, started by a client from before tenant ids)
// runs as before, with no segment. Errors: ErrInvalidArgument for a
// workflow id of neither form (nil in runs recorded before
// versionFanoutTenant).
func (f *fanout) readWorkflowID(ctx workflow.Context, wfID string) error {
	seg, id, ok := sandboxapi.ParseFanoutWorkflowID(wfID)
	if ok {
		f.report.FanoutID, f.segment = id, seg
		return nil
	}
	if workflow.GetVersion(ctx, versionFanoutTenant, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workflow id %q is not a fan-out's: start it under %s<tenant segment>/<fanout_id> (docs/API.md \"Task fan-out\")",
		sandboxapi.Clip(wfID, 200), sandboxapi.FanoutWorkflowIDPrefix)
}

// checkConversationTenant refuses a conversation request of another tenant
// than the workflow id's, before anything runs. The message names no id of
// that request: it only says they do not match. A conversation given by
// workspace id is checked by the prepare activity, once its session says
// whose it is (wire.FanoutPrepareInput.TenantSegment). Errors:
// ErrInvalidArgument (field conversation; nil in runs recorded before
// versionFanoutTenant).
func (f *fanout) checkConversationTenant(ctx workflow.Context) error {
	r := f.in.Conversation
	if f.segment == "" || r == nil || sandboxapi.TenantSegment(r.UserID, r.ProjectID) == f.segment {
		return nil
	}
	if workflow.GetVersion(ctx, versionFanoutTenant, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return sandboxapi.FieldError("conversation", "conversation: its user_id and project_id are not the tenant of this fan-out's workflow id (sandbox-fanout/<tenant segment>/<fanout_id>): start the fan-out as the conversation's user and project")
}

// pendingTasks is the report's first row of every task: pending, a script
// task when it has a script, else an agent's.
func pendingTasks(tasks []sandboxapi.TaskSpec) []sandboxapi.TaskResult {
	var out []sandboxapi.TaskResult
	for _, t := range tasks {
		kind := sandboxapi.TaskKindAgent
		if t.Script != "" {
			kind = sandboxapi.TaskKindScript
		}
		out = append(out, sandboxapi.TaskResult{TaskID: t.TaskID, Kind: kind, Status: sandboxapi.TaskPending})
	}
	return out
}

// receiveCompletions starts the coroutine that takes complete_task
// signals for the run's life. A payload the data converter refuses is
// dropped by the SDK (Receive then waits for the next); one that fails
// strict decoding is ignored like an unknown task (signals cannot be
// rejected).
func (f *fanout) receiveCompletions(ctx workflow.Context) {
	signals := workflow.GetSignalChannel(ctx, sandboxapi.SignalCompleteTask)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var raw converter.RawValue
			signals.Receive(ctx, &raw)
			if refusedWithoutPayload(ctx, sandboxapi.SignalCompleteTask, raw) {
				continue
			}
			sig, corrupt, err := decodeStrictly[sandboxapi.CompleteTaskSignal](ctx, sandboxapi.SignalCompleteTask, raw)
			if err != nil || corrupt {
				workflow.GetLogger(ctx).Warn("malformed complete_task signal ignored", "error", err)
				continue
			}
			f.complete(ctx, sig)
		}
	})
}

// runTasks runs every task (runTask) in input order, at most MaxParallel
// at once, and waits for them all. Errors: the workflow's cancellation.
func (f *fanout) runTasks(ctx workflow.Context) error {
	wg := workflow.NewWaitGroup(ctx)
	for i := range f.report.Tasks {
		if err := workflow.Await(ctx, func() bool { return f.running < f.report.MaxParallel }); err != nil {
			return err
		}
		f.running++
		f.report.Running = f.running
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			f.runTask(ctx, i)
			f.running--
			f.report.Running = f.running
		})
	}
	wg.Wait(ctx)
	return ctx.Err()
}

// complete records a complete_task signal; unknown tasks, script tasks and
// repeated signals are ignored (signals cannot be rejected).
func (f *fanout) complete(ctx workflow.Context, sig sandboxapi.CompleteTaskSignal) {
	for _, t := range f.in.Tasks {
		if t.TaskID != sig.TaskID {
			continue
		}
		if t.Script != "" || f.completions[sig.TaskID] != nil {
			break
		}
		if len(sig.Message) > 1024 {
			sig.Message = strings.ToValidUTF8(sig.Message[:1024], "")
		}
		f.completions[sig.TaskID] = &sig
		return
	}
	workflow.GetLogger(ctx).Warn("complete_task ignored", "task_id", sig.TaskID)
}

// progress is the progress query: the report without patches.
func (f *fanout) progress() (sandboxapi.FanoutReport, error) {
	return f.report.WithoutPatches(), nil
}

// runActivity runs one fan-out activity on this workflow's task queue.
func runActivity(ctx workflow.Context, startToClose time.Duration, attempts int32, name string, in, out any) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		// A worker that dies is noticed within this; the activity is then
		// retried on another (or the restarted) worker.
		HeartbeatTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, MaximumAttempts: attempts},
	})
	return workflow.ExecuteActivity(ctx, name, in).Get(ctx, out)
}

// prepare checkpoints the conversation and pins the start commit.
func (f *fanout) prepare(ctx workflow.Context) error {
	var out wire.FanoutPrepareResult
	err := runActivity(ctx, 15*time.Minute, 5, wire.ActivityFanoutPrepare, wire.FanoutPrepareInput{
		OpID: f.opID, WorkspaceID: f.report.ConversationWorkspaceID, Request: f.in.Conversation,
		CheckpointMessage: fmt.Sprintf("Checkpoint before fan-out %s", f.report.FanoutID),
		Fork:              f.in.FromFork,
		TenantSegment:     f.segment,
	}, &out)
	if err != nil {
		return err
	}
	h := out.Handle
	f.hostID = h.HostID
	f.request = sandboxapi.WorkspaceRequest{UserID: h.UserID, ProjectID: h.ProjectID, RepoURL: h.Repo.URL}
	f.report.Branch, f.report.StartCommit, f.report.Checkpointed = h.Branch, out.StartCommit, out.Checkpointed
	f.report.Head = out.StartCommit
	return nil
}

// runTask drives task i from acquire to its diff; failures end up in its result.
func (f *fanout) runTask(ctx workflow.Context, i int) {
	spec := f.in.Tasks[i]
	t := &f.report.Tasks[i]
	t.StartedAt = workflow.Now(ctx)
	defer func() { t.FinishedAt = workflow.Now(ctx) }()
	fail := func(err error) {
		t.Status, t.Message = sandboxapi.TaskError, errorMessage(err)
	}

	t.Status = sandboxapi.TaskAcquiring
	h, err := f.acquireTask(ctx, spec)
	if err != nil {
		fail(err)
		return
	}
	t.WorkspaceID, t.WorkflowID, t.Branch = h.WorkspaceID, h.WorkflowID, h.Branch

	var final string
	if spec.Script != "" {
		t.Status = sandboxapi.TaskRunning
		final, err = f.runScript(ctx, spec, h, t)
	} else {
		t.Status = sandboxapi.TaskWaiting
		final, err = f.awaitAgent(ctx, spec, t)
	}
	if err != nil {
		fail(err)
		return
	}

	t.Status = sandboxapi.TaskFinishing
	var fin wire.FinishTaskResult
	if err := runActivity(ctx, 15*time.Minute, 5, wire.ActivityFanoutFinishTask, wire.FinishTaskInput{
		OpID: f.opID, TaskID: spec.TaskID, HostID: f.hostID, WorkspaceID: h.WorkspaceID,
		Commit: final == sandboxapi.TaskSucceeded, Message: taskCommitMessage(f.report.FanoutID, spec),
	}, &fin); err != nil {
		fail(err)
		return
	}
	t.Commit, t.Diff, t.Status = fin.Commit, &fin.Diff, final
}

// acquireTask gets the task's workspace on the conversation's host: a fork
// of the conversation made by its session (FromFork), or a workspace of
// its own at the start commit (its session started as a child first, in
// runs recorded after that change). Errors: the activities'.
func (f *fanout) acquireTask(ctx workflow.Context, spec sandboxapi.TaskSpec) (sandboxapi.Handle, error) {
	var h sandboxapi.Handle
	if f.in.FromFork {
		// The task is a fork of the conversation, made by its session (and
		// so serialized with its agent's commands). Only inputs with
		// FromFork take this path, so recorded histories replay unchanged.
		err := runActivity(ctx, 15*time.Minute, 5, wire.ActivityFanoutForkTask, wire.FanoutForkTaskInput{
			OpID: f.opID, WorkspaceID: f.report.ConversationWorkspaceID, TaskID: spec.TaskID, HostID: f.hostID,
		}, &h)
		return h, err
	}
	req := f.request
	req.Mode, req.TaskID, req.BaseRef = sandboxapi.ModeTask, spec.TaskID, f.report.StartCommit
	if workflow.GetVersion(ctx, versionTaskChildSession, workflow.DefaultVersion, 1) == 1 {
		if err := f.startTaskSession(ctx, req); err != nil {
			return h, err
		}
	}
	err := runActivity(ctx, 15*time.Minute, 5, wire.ActivityFanoutAcquireTask, wire.AcquireTaskInput{
		HostID: f.hostID, StartCommit: f.report.StartCommit, Request: req,
	}, &h)
	return h, err
}

// runScript runs the task's script in its workspace h (the RunScript
// activity, bounded by the task timeout), records exit code, timeout and
// output tails in t, and returns the task's final status (scriptStatus).
// Errors: the activity's.
func (f *fanout) runScript(ctx workflow.Context, spec sandboxapi.TaskSpec, h sandboxapi.Handle, t *sandboxapi.TaskResult) (string, error) {
	timeout := f.in.TaskTimeout()
	var r wire.RunScriptResult
	if err := runActivity(ctx, timeout+10*time.Minute, 3, wire.ActivityFanoutRunScript, wire.RunScriptInput{
		OpID: f.opID, TaskID: spec.TaskID, HostID: f.hostID, WorkspaceID: h.WorkspaceID,
		Script: spec.Script, TimeoutS: int(timeout / time.Second),
	}, &r); err != nil {
		return "", err
	}
	code := r.ExitCode
	t.ExitCode, t.TimedOut, t.StdoutTail, t.StderrTail = &code, r.TimedOut, r.StdoutTail, r.StderrTail
	return scriptStatus(r), nil
}

// scriptStatus is a script task's final status: timed out, succeeded
// (exit 0) or failed.
func scriptStatus(r wire.RunScriptResult) string {
	switch {
	case r.TimedOut:
		return sandboxapi.TaskTimedOut
	case r.ExitCode == 0:
		return sandboxapi.TaskSucceeded
	default:
		return sandboxapi.TaskFailed
	}
}

// awaitAgent waits up to the task timeout for the complete_task signal of
// an agent's task and returns its final status (agentStatus), setting t's
// message to the signal's. Errors: the workflow's cancellation.
func (f *fanout) awaitAgent(ctx workflow.Context, spec sandboxapi.TaskSpec, t *sandboxapi.TaskResult) (string, error) {
	ok, err := workflow.AwaitWithTimeout(ctx, f.in.TaskTimeout(), func() bool { return f.completions[spec.TaskID] != nil })
	if err != nil {
		return "", err
	}
	final, msg := agentStatus(ok, f.completions[spec.TaskID])
	if ok {
		t.Message = msg
	}
	return final, nil
}

// agentStatus is an agent task's final status and message: timed out when
// no completion came (!ok), else as the completion c says.
func agentStatus(ok bool, c *sandboxapi.CompleteTaskSignal) (string, string) {
	switch {
	case !ok:
		return sandboxapi.TaskTimedOut, ""
	case c.Succeeded:
		return sandboxapi.TaskSucceeded, c.Message
	default:
		return sandboxapi.TaskFailed, c.Message
	}
}

// taskCommitMessage is the message of a task's commit: the task and
// fan-out ids, then the task's instructions.
func taskCommitMessage(fanoutID string, spec sandboxapi.TaskSpec) string {
	msg := "Task " + spec.TaskID + " (fan-out " + fanoutID + ")"
	if spec.Instructions != "" {
		msg += "\n\n" + spec.Instructions
	}
	return msg
}

// versionTaskChildSession marks the change that starts each task's session
// as a child workflow (histories recorded before it replay without one).
const versionTaskChildSession = "fanout-task-child-session"

// startTaskSession starts the task's SessionWorkflow as a child of the
// fan-out, on the conversation host's task queue, with parent-close
// policy ABANDON: the task session outlives the fan-out, keeps its idle timers
// and follows normal eviction. The acquire activity that follows attaches to
// it by update-with-start. A session already running under that workflow id
// is ErrConflict: the task id is in use (by another fan-out, or an agent),
// and two drivers of one task workspace would report each other's work. Any
// other start failure is logged and left to the acquire activity, which
// starts the session itself.
func (f *fanout) startTaskSession(ctx workflow.Context, req sandboxapi.WorkspaceRequest) error {
	wsID := sandboxapi.WorkspaceIDForKey(req.Key())
	wfID, err := sandboxapi.SessionWorkflowID(wsID)
	if err != nil { // cannot happen for a derived id; the acquire reports it
		return nil
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            wfID,
		TaskQueue:             wire.HostTaskQueue(f.hostID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(sandboxapi.SessionStartSearchAttributes(wsID, &req)...),
		// User metadata rides on the same start command (replay-compatible:
		// the command is matched by type).
		StaticSummary: sandboxapi.SessionSummary(wsID, &req) + " · fan-out " + sandboxapi.EscapeMarkdown(f.report.FanoutID),
		StaticDetails: sandboxapi.SessionDetails(wsID, &req),
	})
	// Disconnected: cancelling the fan-out must not cancel the task sessions
	// (ABANDON covers the parent closing, not its context being cancelled).
	cctx, _ = workflow.NewDisconnectedContext(cctx)
	var started workflow.Execution
	err = workflow.ExecuteChildWorkflow(cctx, sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: wsID, Request: &req}).
		GetChildWorkflowExecution().Get(ctx, &started)
	switch {
	case err == nil:
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "task %s: a session for this task id is still open (another fan-out or an agent is using it, or an earlier task session has not idled out yet, workspace %s); use a new task id", req.TaskID, wsID)
	default:
		workflow.GetLogger(ctx).Warn("task session not started as a child; the acquire starts it", "task_id", req.TaskID, "error", err)
	}
	return nil
}

// merge brings the accepted tasks into the conversation, in input order.
func (f *fanout) merge(ctx workflow.Context) {
	accept := map[string]bool{}
	for _, id := range f.in.AcceptTaskIDs {
		accept[id] = true
	}
	var branches []string
	var idx []int
	for i := range f.report.Tasks {
		t := &f.report.Tasks[i]
		switch {
		case t.Status != sandboxapi.TaskSucceeded:
			t.Merge = sandboxapi.TaskMergeSkipped
		case len(accept) > 0 && !accept[t.TaskID]:
			t.Merge = sandboxapi.TaskMergeNotAccepted
		case t.Commit == f.report.StartCommit:
			t.Merge = sandboxapi.TaskMergeNoChanges
		default:
			branches = append(branches, t.Branch)
			idx = append(idx, i)
		}
	}
	if len(branches) == 0 {
		f.report.State = sandboxapi.FanoutCompleted
		return
	}
	f.report.State = sandboxapi.FanoutMerging
	var res wire.FanoutMergeResult
	err := runActivity(ctx, 15*time.Minute, 5, wire.ActivityFanoutMerge, wire.FanoutMergeInput{
		OpID: f.opID, WorkspaceID: f.report.ConversationWorkspaceID,
		Request: sandboxapi.MergeRequest{Branches: branches, CheckpointMessage: "Checkpoint before merging fan-out " + f.report.FanoutID},
	}, &res)
	if err == nil && len(res.Branches) != len(branches) {
		err = fmt.Errorf("merge_branches answered %d outcomes for %d branches", len(res.Branches), len(branches))
	}
	if err != nil {
		for _, i := range idx {
			f.report.Tasks[i].Merge = sandboxapi.TaskMergeFailed
		}
		f.report.State, f.report.Error = sandboxapi.FanoutFailed, "merge: "+errorMessage(err)
		return
	}
	// Outcomes by branch: the merge ran in the order its preview chose
	// (results recorded before previews are in the given order).
	outcome := map[string]sandboxapi.BranchMerge{}
	for _, b := range res.Branches {
		outcome[b.Branch] = b
	}
	task := map[string]string{} // branch → task id
	for _, i := range idx {
		task[f.report.Tasks[i].Branch] = f.report.Tasks[i].TaskID
	}
	if res.Preview != nil {
		for _, b := range res.Preview.Branches {
			f.report.MergeOrder = append(f.report.MergeOrder, task[b.Branch])
		}
	}
	for _, i := range idx {
		t := &f.report.Tasks[i]
		b, ok := outcome[t.Branch]
		if !ok {
			t.Merge, t.Message = sandboxapi.TaskMergeFailed, "merge_branches gave no outcome for "+t.Branch
			continue
		}
		if res.Preview != nil {
			for _, p := range res.Preview.Branches {
				if p.Branch == t.Branch {
					t.MergePreview, t.PreviewConflictFiles = p.Status, p.ConflictFiles
				}
			}
		}
		switch b.Status {
		case sandboxapi.MergeMerged:
			t.Merge = sandboxapi.TaskMergeMerged
		case sandboxapi.MergeConflict:
			t.Merge, t.ConflictFiles = sandboxapi.TaskMergeConflict, b.ConflictFiles
		default:
			t.Merge, t.Message = sandboxapi.TaskMergeFailed, b.Status+": "+b.Message
		}
	}
	f.report.Head = res.Head
	f.report.State = sandboxapi.FanoutCompleted
}

// errorMessage is an activity failure's text without Temporal's wrapping:
// "<Type>: <message>" for application errors.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type() + ": " + app.Message()
	}
	return err.Error()
}
