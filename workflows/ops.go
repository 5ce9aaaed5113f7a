package workflows

import (
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The worker half of the operation table (docs/API.md "Updates"): every
// sandboxapi.Op is bound here, once, to its validator and to the activity
// that serves it. The table drives the update registration of each
// SessionWorkflow run, and activities.Register and the contract tests check
// it against their own lists, so an operation cannot be served without being
// declared, registered and documented.

// opClass picks an operation's activity options (hostOptions).
type opClass int

const (
	opQuick opClass = iota // file reads/writes, status, diff: a local activity on the host queue
	opGit                  // commit, merge, push, pull request: an activity with heartbeats
	opExec                 // a command: an activity, never retried
)

// operation binds one public Op to the workflow: its argument is decoded
// strictly (wire.Decode), checked by validate against the session, then
// either handled by handle or sent to the activity under the session's
// read (read-only op) or write (mutating op) lock.
type operation[In, Out any] struct {
	op sandboxapi.Op[In, Out]
	// writes: the operation changes the workspace, so a read-only (analysis)
	// workspace refuses it with SandboxCommandRejected.
	writes bool
	// validate checks the decoded argument (nil: nothing beyond decoding).
	validate func(s *session, in In) error
	// activity, class and input describe the generic call: the activity's
	// name (wire.Activity*), its options class and its argument.
	activity string
	class    opClass
	input    func(s *session, in In) any
	// handle, when set, replaces the generic call.
	handle func(s *session, ctx workflow.Context, in In) (Out, error)
}

// bind starts the binding of op; its payload types are op's (inferred).
// The methods below complete it, each returning the binding.
func bind[In, Out any](op sandboxapi.Op[In, Out]) operation[In, Out] {
	return operation[In, Out]{op: op}
}

// writing marks an operation that changes the workspace (refused on
// read-only workspaces).
func (o operation[In, Out]) writing() operation[In, Out] {
	o.writes = true
	return o
}

// validatedBy sets the operation's validator.
func (o operation[In, Out]) validatedBy(validate func(s *session, in In) error) operation[In, Out] {
	o.validate = validate
	return o
}

// call serves the operation with the generic call of its activity, in
// options class, under the session's read or write lock. The activity is
// the one named after the update (wire.OpActivity: the activities.Activities
// method of that name); its argument is wire.OpInput (the workspace and the
// update's argument), or wire.WorkspaceActivityInput for an operation that
// takes none, unless sending sets another.
func (o operation[In, Out]) call(class opClass) operation[In, Out] {
	o.activity, o.class = wire.OpActivity(o.op.Name), class
	if o.input == nil {
		o.input = opInput[In]
	}
	return o
}

// sending sets the argument the generic call sends (call's default is
// wire.OpInput).
func (o operation[In, Out]) sending(input func(s *session, in In) any) operation[In, Out] {
	o.input = input
	return o
}

// opInput is the generic call's default argument: wire.OpInput, or
// wire.WorkspaceActivityInput for an operation that takes no argument.
func opInput[In any](s *session, in In) any {
	if _, none := any(in).(sandboxapi.None); none {
		return wire.WorkspaceActivityInput{WorkspaceID: s.wsID}
	}
	return wire.OpInput[In]{WorkspaceID: s.wsID, Request: in}
}

// handled serves the operation with handle, which calls activity (""
// when it calls several).
func (o operation[In, Out]) handled(activity string, handle func(s *session, ctx workflow.Context, in In) (Out, error)) operation[In, Out] {
	o.activity, o.handle = activity, handle
	return o
}

// registrar is one entry of the table, whatever its payload types.
type registrar interface {
	register(s *session, ctx workflow.Context) error
	info() OperationInfo
}

// OperationInfo describes one bound operation (Operations).
type OperationInfo struct {
	sandboxapi.OpInfo
	// Activity is the activity serving it ("" when the workflow handles it
	// with several activities, e.g. acquire).
	Activity string
	// Writes: refused on read-only workspaces.
	Writes bool
}

func (o operation[In, Out]) info() OperationInfo {
	return OperationInfo{OpInfo: o.op.Info(), Activity: o.activity, Writes: o.writes}
}

// register installs the update handler and its validator on this run.
func (o operation[In, Out]) register(s *session, ctx workflow.Context) error {
	validator := func(raw converter.RawValue) error {
		err := o.check(s, raw)
		if err != nil && s.refusalEndsRun() {
			// The run's first update, refused: accepted so that its
			// handler refuses it and the run ends at once (a rejected
			// update leaves nothing in the history to end it by).
			return nil
		}
		return err
	}
	// The handler's result is Out, or for exec the activity's payload
	// ready for the client (session.passThrough).
	handler := func(ctx workflow.Context, raw converter.RawValue) (any, error) {
		var zero Out
		if s.ws == nil && !s.foreign && s.inputErr == nil {
			// Maybe accepted by refusalEndsRun (a workspace is only set by
			// an activity's result, in a later workflow task than this
			// update's validation): check it as the validator did. The
			// marker is asked only on a refusal, so a recorded history
			// whose update passed never reaches it, and one that would
			// fail a newer check replays as it ran.
			if err := o.check(s, raw); err != nil && workflow.GetVersion(ctx, changeFailedRun, workflow.DefaultVersion, 1) >= 1 {
				s.first.refused = true
				if s.first.failure == nil && !s.first.began {
					s.first.failure = err
				}
				s.lastError = err.Error()
				s.learn(ctx, o.op.Name, zero, zero, err, 0)
				return zero, err
			}
		}
		// Validated already (duplicate keys refused there): decoded as the
		// run recorded it, also for updates accepted before that check.
		in, err := wire.DecodeAccepted[In](o.op.Name, raw)
		if err != nil {
			return zero, appError(err)
		}
		start := workflow.Now(ctx)
		ctx = workflow.WithValue(ctx, updateKey{}, workflow.GetCurrentUpdateInfo(ctx))
		out, err := o.serve(s, ctx, in)
		// Every operation, whatever its types: its outcome and what its
		// result says about the workspace go to the current details.
		s.learn(ctx, o.op.Name, in, out, err, workflow.Now(ctx).Sub(start))
		if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
			if rv, ok := s.takeRawResult(u.ID); ok && err == nil {
				return rv, nil
			}
		}
		return out, err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, o.op.Name, handler, workflow.UpdateHandlerOptions{Validator: validator})
}

// check is the validator's check of one update: the run admits it, its
// argument decodes strictly, a writing operation meets a writable
// workspace, and the operation's own validator passes. It changes nothing.
func (o operation[In, Out]) check(s *session, raw converter.RawValue) error {
	if err := s.admitting(o.op.Name); err != nil {
		return err
	}
	in, err := wire.Decode[In](o.op.Name, raw)
	if err != nil {
		return appError(err)
	}
	if o.writes {
		if err := s.writable(); err != nil {
			return err
		}
	}
	if o.validate != nil {
		if err := o.validate(s, in); err != nil {
			return appError(err)
		}
	}
	return nil
}

// serve runs the operation: its handle func, or the generic activity call
// under the read or write lock.
func (o operation[In, Out]) serve(s *session, ctx workflow.Context, in In) (Out, error) {
	if o.handle != nil {
		return o.handle(s, ctx, in)
	}
	if o.op.Mutating {
		return writeOp[Out](s, ctx, o.class, o.activity, o.input(s, in))
	}
	return readOp[Out](s, ctx, o.activity, o.input(s, in))
}

// operations is the table, in sandboxapi.Operations order.
var operations = []registrar{
	bind(sandboxapi.OpAcquire).
		validatedBy((*session).validateAcquire).
		handled("", (*session).acquire),
	bind(sandboxapi.OpExec).
		validatedBy(validateExec).
		handled(wire.ActivityExec, (*session).exec),
	bind(sandboxapi.OpReadFile).
		validatedBy(func(_ *session, in sandboxapi.ReadFileInput) error { return validPath(in.Path) }).
		sending(func(s *session, in sandboxapi.ReadFileInput) any {
			return wire.FileActivityInput{WorkspaceID: s.wsID, Path: in.Path}
		}).
		call(opQuick),
	bind(sandboxapi.OpWriteFile).writing().
		validatedBy(validateWrite).
		sending(func(s *session, in sandboxapi.WriteFileInput) any {
			return wire.FileActivityInput{WorkspaceID: s.wsID, Path: in.Path, Content: in.Content, Mode: in.Mode, IfMatch: in.IfMatch}
		}).
		call(opQuick),
	// edit_file: one edit applied by the host in one step under the
	// exclusive lock (never a client-side read-then-write).
	bind(sandboxapi.OpEditFile).writing().
		validatedBy(validateEdit).
		handled(wire.ActivityEditFile, func(s *session, ctx workflow.Context, in sandboxapi.EditFileInput) (sandboxapi.EditFileResult, error) {
			ai := wire.EditFileActivityInput{WorkspaceID: s.wsID, Request: in}
			if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
				ai.UpdateID = u.ID // a retried activity does not apply the edit twice
			}
			return writeOp[sandboxapi.EditFileResult](s, ctx, opQuick, wire.ActivityEditFile, ai)
		}),
	bind(sandboxapi.OpListDir).
		validatedBy(func(_ *session, in sandboxapi.ListDirInput) error {
			if in.Depth < 0 || in.Depth > sandboxapi.MaxListDepth {
				return sandboxapi.FieldError("depth", "list_dir depth must be between 0 and %d", sandboxapi.MaxListDepth)
			}
			return validPath(in.Path)
		}).
		sending(func(s *session, in sandboxapi.ListDirInput) any {
			return wire.FileActivityInput{WorkspaceID: s.wsID, Path: in.Path, Depth: in.Depth, SkipHidden: in.SkipHidden, SkipIgnored: in.SkipIgnored}
		}).
		call(opQuick),
	bind(sandboxapi.OpSearch).
		validatedBy(validateSearch).
		call(opQuick),
	bind(sandboxapi.OpStatus).
		call(opQuick),
	bind(sandboxapi.OpDiff).
		call(opQuick),
	bind(sandboxapi.OpLog).
		validatedBy(func(_ *session, in sandboxapi.LogRequest) error {
			if in.Limit < 0 || in.Limit > sandboxapi.MaxLogCommits {
				return sandboxapi.FieldError("limit", "log limit must be between 0 and %d", sandboxapi.MaxLogCommits)
			}
			return nil
		}).
		call(opQuick),
	bind(sandboxapi.OpReadOutput).
		validatedBy(func(_ *session, in sandboxapi.ReadOutputInput) error { return in.Validate() }).
		call(opQuick),
	bind(sandboxapi.OpCommit).writing().
		validatedBy(func(_ *session, in sandboxapi.CommitRequest) error {
			if in.Message == "" {
				return sandboxapi.FieldError("message", "commit needs a message")
			}
			return nil
		}).
		call(opGit),
	bind(sandboxapi.OpHibernate).
		handled(wire.ActivityHibernate, (*session).hibernate),
	bind(sandboxapi.OpRelease).
		handled(wire.ActivityHibernate, (*session).release),
	bind(sandboxapi.OpPush).writing().
		call(opGit),
	// The head is checked by the activity (it is the workspace branch).
	bind(sandboxapi.OpCreatePullRequest).writing().
		validatedBy(func(_ *session, in sandboxapi.PullRequestInput) error { return in.Validate() }).
		call(opGit),
	// merge_branches merges local branches into the workspace's branch under
	// the exclusive lock, so it never races the agent's own commands; the
	// activity is retried after a crash (the merge rolls back an interrupted
	// attempt and skips branches already merged).
	// A dry run (docs/API.md "Merge preview") changes nothing: it runs under
	// the shared lock, beside the other read-only operations (no recorded
	// history holds one: dry_run did not decode before it existed).
	bind(sandboxapi.OpMergeBranches).writing().
		validatedBy(func(_ *session, in sandboxapi.MergeRequest) error { return in.Validate() }).
		handled(wire.ActivityMergeBranches, func(s *session, ctx workflow.Context, in sandboxapi.MergeRequest) (sandboxapi.MergeResult, error) {
			ai := wire.OpInput[sandboxapi.MergeRequest]{WorkspaceID: s.wsID, Request: in}
			if in.DryRun {
				return sharedOp[sandboxapi.MergeResult](s, ctx, opGit, wire.ActivityMergeBranches, ai)
			}
			return writeOp[sandboxapi.MergeResult](s, ctx, opGit, wire.ActivityMergeBranches, ai)
		}),
	// The process updates and cancel (session_proc.go): process_start takes
	// the exclusive lock like exec; the others are immediate (never wait for
	// the lock: a running exec's output is read, and the exec cancelled,
	// while it holds it).
	bind(sandboxapi.OpProcessStart).
		validatedBy(validateProcessStart).
		handled(wire.ActivityProcessStart, (*session).processStart),
	bind(sandboxapi.OpProcessRead).
		validatedBy(validateProcessRead).
		handled(wire.ActivityProcessRead, (*session).processRead),
	bind(sandboxapi.OpProcessWrite).
		validatedBy(validateProcessWrite).
		handled(wire.ActivityProcessWrite, (*session).processWrite),
	bind(sandboxapi.OpProcessSignal).
		validatedBy(validateProcessSignal).
		handled(wire.ActivityProcessSignal, (*session).processSignal),
	bind(sandboxapi.OpProcessResize).
		validatedBy(validateProcessResize).
		handled(wire.ActivityProcessResize, (*session).processResize),
	bind(sandboxapi.OpProcessList).
		handled(wire.ActivityProcessList, (*session).processList),
	bind(sandboxapi.OpCancel).
		validatedBy(validateCancel).
		handled(wire.ActivityExecCancel, (*session).cancel),
	// The lifecycle (docs/API.md "Checkpoints", "Fork", "Destroy";
	// session_lifecycle.go). destroy is allowed on read-only workspaces:
	// ending one changes nothing in it.
	bind(sandboxapi.OpCheckpoint).writing().
		validatedBy(func(_ *session, in sandboxapi.CheckpointInput) error { return in.Validate() }).
		sending(func(s *session, in sandboxapi.CheckpointInput) any {
			return wire.CheckpointActivityInput{WorkspaceID: s.wsID, Label: in.Label}
		}).
		call(opGit),
	bind(sandboxapi.OpCheckpoints).
		call(opQuick),
	bind(sandboxapi.OpRollback).writing().
		validatedBy(func(_ *session, in sandboxapi.RollbackInput) error { return in.Validate() }).
		sending(func(s *session, in sandboxapi.RollbackInput) any {
			return wire.RollbackActivityInput{WorkspaceID: s.wsID, Checkpoint: in.Checkpoint}
		}).
		call(opGit),
	bind(sandboxapi.OpFork).writing().
		validatedBy((*session).validateFork).
		handled(wire.ActivityForkPrepare, (*session).fork),
	bind(sandboxapi.OpDestroy).
		handled(wire.ActivityDestroy, (*session).destroy),
	bind(sandboxapi.OpRestore).writing().
		handled(wire.ActivityRestoreDestroyed, (*session).restore),
	// preview_url asks the runtime's backend for a URL of a port (read-only:
	// it changes neither the workspace nor the runtime; refused where the
	// runtime has no such capability).
	bind(sandboxapi.OpPreviewURL).
		validatedBy(func(_ *session, in sandboxapi.PreviewURLInput) error { return in.Validate() }).
		sending(func(s *session, in sandboxapi.PreviewURLInput) any {
			return wire.PreviewURLActivityInput{WorkspaceID: s.wsID, Port: in.Port}
		}).
		call(opQuick),
	// overlaps reads this workspace's changes and those of the host's other
	// workspaces of the same repository, user and project (read-only; an
	// activity with heartbeats: it may read many worktrees).
	bind(sandboxapi.OpOverlaps).
		handled(wire.ActivityOverlaps, func(s *session, ctx workflow.Context, _ sandboxapi.None) (sandboxapi.OverlapsResult, error) {
			return sharedOp[sandboxapi.OverlapsResult](s, ctx, opGit, wire.ActivityOverlaps, wire.WorkspaceActivityInput{WorkspaceID: s.wsID})
		}),
	// setup: run the repository's setup again (session_setup.go).
	bind(sandboxapi.OpSetup).
		handled("", (*session).rerunSetup),
}

// Operations describes every operation the workflow registers, in table
// order (for tests and documentation checks).
func Operations() []OperationInfo {
	out := make([]OperationInfo, len(operations))
	for i, o := range operations {
		out[i] = o.info()
	}
	return out
}

func validPath(p string) error {
	_, err := sandboxapi.CleanRelPath(p)
	return err
}

func validateExec(s *session, req sandboxapi.ExecRequest) error {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return sandboxapi.FieldError("cmd", "exec needs a command")
	}
	if err := sandboxapi.ValidateNetwork("network", req.Network); err != nil {
		return err
	}
	// A network above the workspace's recorded policy is refused before it
	// reaches the history; the activity checks again (docs/SECURITY.md
	// "Network modes": the worker's maximum may have narrowed the policy).
	if s != nil && s.ws != nil && s.ws.Network.Valid() && req.Network != "" && !req.Network.Within(s.ws.Network) {
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "exec: network %s is above the network policy of workspace %s (%s)", req.Network, s.wsID, s.ws.Network)
	}
	if req.TimeoutS < 0 || req.TimeoutS > int(sandboxapi.MaxExecTimeout.Seconds()) {
		return sandboxapi.FieldError("timeout_s", "timeout_s must be between 0 and %d", int(sandboxapi.MaxExecTimeout.Seconds()))
	}
	if req.MaxOutputBytes < 0 || req.MaxOutputBytes > sandboxapi.MaxOutputBytesLimit {
		return sandboxapi.FieldError("max_output_bytes", "max_output_bytes must be between 0 and %d", sandboxapi.MaxOutputBytesLimit)
	}
	if len(req.Stdin) > sandboxapi.MaxStdinBytes {
		return sandboxapi.FieldError("stdin", "stdin is larger than %d bytes", sandboxapi.MaxStdinBytes)
	}
	if req.Cwd != "" {
		return validPath(req.Cwd)
	}
	return nil
}

func validateWrite(_ *session, in sandboxapi.WriteFileInput) error {
	clean, err := sandboxapi.CleanRelPath(in.Path)
	if err != nil {
		return err
	}
	if clean == "." {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "write_file needs a file path")
	}
	if sandboxapi.IsGitMetadataPath(clean) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path %q is inside .git", in.Path)
	}
	if len(in.Content) > sandboxapi.MaxFileBytes {
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "content is larger than %d bytes", sandboxapi.MaxFileBytes)
	}
	if in.Mode&^0o777 != 0 {
		return sandboxapi.FieldError("mode", "mode %o: only permission bits are allowed", in.Mode)
	}
	return sandboxapi.ValidateIfMatch(in.IfMatch)
}

func validateEdit(_ *session, in sandboxapi.EditFileInput) error {
	clean, err := sandboxapi.CleanRelPath(in.Path)
	if err != nil {
		return err
	}
	if clean == "." {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "edit_file needs a file path")
	}
	if sandboxapi.IsGitMetadataPath(clean) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path %q is inside .git", in.Path)
	}
	return in.Validate()
}

func validateSearch(_ *session, req sandboxapi.SearchRequest) error {
	if err := sandboxapi.ValidateSearchPattern(req.Pattern, sandboxapi.MaxSearchPatternBytes); err != nil {
		return err
	}
	if req.MaxResults < 0 || req.MaxResults > sandboxapi.MaxSearchResults {
		return sandboxapi.FieldError("max_results", "max_results must be between 0 and %d", sandboxapi.MaxSearchResults)
	}
	if len(req.Glob) > 1024 || strings.ContainsRune(req.Glob, 0) {
		return sandboxapi.FieldError("glob", "search glob is longer than 1024 bytes or holds a NUL byte")
	}
	return validPath(req.Path)
}
