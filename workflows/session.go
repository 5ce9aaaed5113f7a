package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Limits of one SessionWorkflow run.
const (
	// opsPerRun bounds the updates handled by one run before continue-as-new
	// (Temporal allows 2,000 updates per run; history also grows per update).
	opsPerRun = 500
	// acquireWait is how long a run started without a successful acquire waits
	// for one before it completes.
	acquireWait = 10 * time.Minute
	// hostScheduleToStart is how long an operation waits for its host's worker
	// to pick it up before failing with WorkspaceUnavailable, unless the host's
	// SessionSettings.HostWait says otherwise.
	hostScheduleToStart = 2 * time.Minute
)

// permissiveURLs is used by validators only: the acquire activity applies the
// worker host's real URL policy.
var permissiveURLs = sandbox.URLPolicy{AllowFile: true, AllowHTTP: true}

// session is the state of one SessionWorkflow run.
type session struct {
	wsID     string
	request  *sandbox.WorkspaceRequest
	ws       *sandbox.Workspace
	settings SessionSettings

	runtimeRunning bool
	lastActivity   time.Time
	ops            int64
	seq            int64 // changes at every operation start and end
	inFlight       int
	writers        int
	writersWaiting int
	readers        int

	acquireFailed bool
	released      bool
	// moveToHost asks the main loop to continue as new on the host's task
	// queue, where quick operations run as local activities.
	moveToHost bool
	state      string
	lastError  string

	ev evictState // evict, pin and unpin signals (session_evict.go)
}

// SessionWorkflow is the entity of one workspace (DESIGN.md "Temporal shape").
// Agents get-or-create it with update-with-start (acquire, conflict policy
// USE_EXISTING) and then send updates; mutating updates run one at a time,
// read-only ones together when nothing mutating runs. After IdleStop without
// an operation the runtime is hibernated; after IdleClose it is destroyed and
// the run completes (the workspace stays; the next acquire starts a new run
// that finds it). The run continues as new when Temporal suggests it.
func SessionWorkflow(ctx workflow.Context, in SessionInput) error {
	if err := sandbox.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return temporal.NewNonRetryableApplicationError(sandbox.Message(err), sandbox.ErrInvalidArgument.Type, nil)
	}
	s := &session{wsID: in.WorkspaceID, request: in.Request, state: StateAcquiring, lastActivity: workflow.Now(ctx)}
	if c := in.Carry; c != nil {
		ws := c.Workspace
		s.ws, s.settings, s.runtimeRunning, s.lastActivity, s.state = &ws, c.Settings, c.RuntimeRunning, c.LastActivity, StateActive
		switch {
		case c.State != "":
			s.state = c.State
		case !c.RuntimeRunning:
			s.state = StateIdle
		}
	}
	if err := s.register(ctx); err != nil {
		return err
	}
	return s.run(ctx)
}

func (s *session) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryDescribe, s.describe); err != nil {
		return err
	}
	type reg struct {
		name      string
		handler   any
		validator any
	}
	regs := []reg{
		{UpdateAcquire, s.acquire, s.validateAcquire},
		{UpdateExec, s.exec, s.validateExec},
		{UpdateReadFile, s.readFile, s.validatePath},
		{UpdateWriteFile, s.writeFile, s.validateWrite},
		{UpdateListDir, s.listDir, s.validateListDir},
		{UpdateSearch, s.search, s.validateSearch},
		{UpdateStatus, s.status, s.validateNothing},
		{UpdateDiff, s.diff, s.validateNothing},
		{UpdateCommit, s.commit, s.validateCommit},
		{UpdateHibernate, s.hibernate, s.validateNothing},
		{UpdateRelease, s.release, s.validateRelease},
		{UpdateMergeBranches, s.mergeBranches, s.validateMergeBranches},
		{UpdatePush, s.push, s.validatePush},
		{UpdateCreatePullRequest, s.createPullRequest, s.validatePullRequest},
	}
	for _, r := range regs {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, r.name, r.handler, workflow.UpdateHandlerOptions{Validator: r.validator}); err != nil {
			return err
		}
	}
	return s.registerEviction(ctx)
}

// run is the main coroutine: idle timers, continue-as-new and completion.
func (s *session) run(ctx workflow.Context) error {
	logger := workflow.GetLogger(ctx)
	for {
		if s.released || s.acquireFailed {
			break
		}
		if s.ws == nil {
			ok, err := workflow.AwaitWithTimeout(ctx, acquireWait, func() bool { return s.ws != nil || s.acquireFailed || s.released })
			if err != nil {
				return err
			}
			if !ok && s.inFlight == 0 {
				s.acquireFailed = true
			}
			continue
		}
		if s.inFlight == 0 && (s.moveToHost || s.ops >= opsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && s.inFlight == 0 && !s.signalsPending() }); err != nil {
				return err
			}
			if s.ev.evicted { // evicted meanwhile: complete instead
				continue
			}
			logger.Info("continuing as new", "ops", s.ops, "task_queue", HostTaskQueue(s.ws.HostID))
			return workflow.NewContinueAsNewError(workflow.WithWorkflowTaskQueue(ctx, HostTaskQueue(s.ws.HostID)), SessionWorkflowType, SessionInput{
				WorkspaceID: s.wsID,
				Carry: &SessionCarry{Workspace: *s.ws, Settings: s.settings, RuntimeRunning: s.runtimeRunning, State: s.state,
					LastActivity: s.lastActivity, Ops: 0},
			})
		}
		now := workflow.Now(ctx)
		idle := now.Sub(s.lastActivity)
		if s.inFlight == 0 && s.runtimeRunning && idle >= s.settings.IdleStop {
			if err := s.stopRuntime(ctx, false); err != nil {
				logger.Warn("idle hibernate failed", "error", err)
				s.lastActivity = workflow.Now(ctx) // retry after another idle period
			}
			continue
		}
		if s.inFlight == 0 && idle >= s.settings.IdleClose {
			if err := s.stopRuntime(ctx, true); err != nil {
				logger.Warn("idle destroy failed", "error", err)
			}
			break
		}
		var wait time.Duration
		if s.inFlight == 0 {
			deadline := s.lastActivity.Add(s.settings.IdleClose)
			if s.runtimeRunning {
				deadline = s.lastActivity.Add(s.settings.IdleStop)
			}
			wait = max(deadline.Sub(now), time.Second)
		}
		seq := s.seq
		cond := func() bool {
			return s.seq != seq || s.released || (s.inFlight == 0 && (s.moveToHost || workflow.GetInfo(ctx).GetContinueAsNewSuggested()))
		}
		if wait == 0 {
			if err := workflow.Await(ctx, cond); err != nil {
				return err
			}
		} else if _, err := workflow.AwaitWithTimeout(ctx, wait, cond); err != nil {
			return err
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && s.inFlight == 0 && !s.signalsPending() }); err != nil {
		return err
	}
	if s.ws != nil && s.runtimeRunning {
		// An operation admitted after release restarted the runtime: stop it again.
		_ = s.stopRuntime(ctx, false)
	}
	if state, ok := s.finalState(); ok {
		s.setState(ctx, state)
		return nil
	}
	if s.ws == nil {
		s.setState(ctx, StateFailed)
		return nil
	}
	s.setState(ctx, StateClosed)
	return nil
}

// --- locking -------------------------------------------------------------

func (s *session) begin(ctx workflow.Context, mutating bool) error {
	s.inFlight++
	s.seq++
	if mutating {
		s.writersWaiting++
		err := workflow.Await(ctx, func() bool { return s.writers == 0 && s.readers == 0 })
		s.writersWaiting--
		if err != nil {
			s.inFlight--
			return err
		}
		s.writers++
	} else {
		if err := workflow.Await(ctx, func() bool { return s.writers == 0 && s.writersWaiting == 0 }); err != nil {
			s.inFlight--
			return err
		}
		s.readers++
	}
	return nil
}

func (s *session) end(ctx workflow.Context, mutating bool) {
	if mutating {
		s.writers--
	} else {
		s.readers--
	}
	s.inFlight--
	s.ops++
	s.seq++
	s.lastActivity = workflow.Now(ctx)
}

// waitReady blocks an operation until the first acquire finished.
func (s *session) waitReady(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return s.ws != nil || s.acquireFailed }); err != nil {
		return err
	}
	if s.ws == nil {
		return appError(sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %s could not be acquired", s.wsID))
	}
	return nil
}

// --- activities ----------------------------------------------------------

type opClass int

const (
	opQuick opClass = iota // file reads/writes, status, diff
	opGit                  // commit
	opExec
)

func (s *session) hostOptions(class opClass, timeout time.Duration) workflow.ActivityOptions {
	o := workflow.ActivityOptions{
		TaskQueue:              HostTaskQueue(s.ws.HostID),
		ScheduleToStartTimeout: hostWait(s.settings.HostWait),
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	}
	switch class {
	case opGit:
		o.StartToCloseTimeout = 10 * time.Minute
		o.HeartbeatTimeout = 30 * time.Second
	case opExec:
		// A command is never retried behind the agent's back: its outcome would be unknown.
		o.StartToCloseTimeout = timeout + time.Minute
		o.HeartbeatTimeout = 30 * time.Second
		o.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
	}
	return o
}

func (s *session) call(ctx workflow.Context, opts workflow.ActivityOptions, name string, in, out any) error {
	actx := workflow.WithActivityOptions(ctx, opts)
	err := workflow.ExecuteActivity(actx, name, in).Get(ctx, out)
	return s.result(err)
}

// callQuick runs a short operation: as a local activity when this run is on
// the workspace's host queue (no extra task-queue hop), else as an activity
// sent to that host.
func (s *session) callQuick(ctx workflow.Context, name string, in, out any) error {
	if s.ws == nil || workflow.GetInfo(ctx).TaskQueueName != HostTaskQueue(s.ws.HostID) {
		return s.call(ctx, s.hostOptions(opQuick, 0), name, in, out)
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	})
	return s.result(workflow.ExecuteLocalActivity(lctx, name, in).Get(ctx, out))
}

func (s *session) result(err error) error {
	if err != nil {
		s.lastError = err.Error()
		return appError(err)
	}
	s.lastError = ""
	return nil
}

func hostWait(d time.Duration) time.Duration {
	if d <= 0 {
		return hostScheduleToStart
	}
	return d
}

// appError turns an activity failure into the update's failure: an
// ApplicationError whose Type is one of the stable sandbox error types
// (docs/API.md "Errors").
func appError(err error) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if sandbox.KindByType(app.Type()) != nil {
			return temporal.NewNonRetryableApplicationError(app.Message(), app.Type(), nil)
		}
		return temporal.NewNonRetryableApplicationError(app.Message(), sandbox.ErrSandbox.Type, nil)
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		switch to.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return temporal.NewNonRetryableApplicationError("the workspace's host did not pick up the operation in time (host down?)", sandbox.ErrWorkspaceUnavailable.Type, nil)
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return temporal.NewNonRetryableApplicationError("the worker running the operation stopped responding (restarted?); its outcome is unknown", sandbox.ErrRuntimeUnavailable.Type, nil)
		}
		return temporal.NewNonRetryableApplicationError("operation timed out: "+err.Error(), sandbox.ErrTimeout.Type, nil)
	}
	if k := sandbox.KindOf(err); k != nil {
		return temporal.NewNonRetryableApplicationError(sandbox.Message(err), k.Type, nil)
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return temporal.NewNonRetryableApplicationError("operation canceled", sandbox.ErrTimeout.Type, nil)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), sandbox.ErrSandbox.Type, nil)
}

func (s *session) setState(ctx workflow.Context, state string) {
	s.state = state
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword(SearchAttrState).ValueSet(state))
}

func (s *session) publish(ctx workflow.Context) {
	ws := s.ws
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(SearchAttrUser).ValueSet(ws.UserID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrProject).ValueSet(ws.ProjectID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrRepo).ValueSet(ws.Repo.Key()),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrMode).ValueSet(string(ws.Mode)),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrHost).ValueSet(ws.HostID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace).ValueSet(ws.ID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrState).ValueSet(s.state),
	)
	_ = workflow.UpsertMemo(ctx, map[string]any{MemoWorkspace: HandleFor(*ws, s.settings, false)})
}

// stopRuntime hibernates (destroy=false) or destroys the runtime under the write lock.
func (s *session) stopRuntime(ctx workflow.Context, destroy bool) error {
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	defer s.end(ctx, true)
	s.ops-- // housekeeping is not an agent operation
	name := ActivityHibernate
	if destroy {
		name = ActivityDestroyRuntime
	}
	var out HibernateResult
	if err := s.callQuick(ctx, name, WorkspaceActivityInput{WorkspaceID: s.wsID}, &out); err != nil {
		return err
	}
	s.runtimeRunning = false
	if !s.released {
		s.setState(ctx, StateIdle)
	}
	return nil
}

// --- handlers ------------------------------------------------------------

func (s *session) validateAcquire(in AcquireInput) error {
	req := in.Request
	if req == nil {
		if s.request == nil && s.ws == nil && s.wsID == "" {
			return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "acquire needs a request"))
		}
		return nil
	}
	if _, err := req.Validate(permissiveURLs); err != nil {
		return appError(err)
	}
	if id := sandbox.WorkspaceIDForKey(req.Key()); id != s.wsID {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "the request's key belongs to workspace %s, not %s", id, s.wsID))
	}
	if s.ws != nil {
		if repo, _ := sandbox.ParseRepoURL(req.RepoURL, permissiveURLs); repo.Key() != s.ws.Repo.Key() {
			return appError(sandbox.Errorf(sandbox.ErrConflict, "workspace %s belongs to repository %s, not %s", s.wsID, s.ws.Repo.Key(), repo.Key()))
		}
	}
	return nil
}

func (s *session) acquire(ctx workflow.Context, in AcquireInput) (Handle, error) {
	if err := s.begin(ctx, true); err != nil {
		return Handle{}, err
	}
	defer s.end(ctx, true)
	if s.ws != nil && !s.ev.evicted {
		return HandleFor(*s.ws, s.settings, false), nil
	}
	req := in.Request
	if req == nil {
		req = s.request
	}
	s.acquireFailed = false
	var loc LocateResult
	locOpts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}}
	if err := s.call(ctx, locOpts, ActivityLocate, WorkspaceActivityInput{WorkspaceID: s.wsID}, &loc); err != nil {
		s.acquireFailed = true
		return Handle{}, err
	}
	if req == nil && !loc.Exists {
		s.acquireFailed = true
		return Handle{}, appError(sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %s does not exist; acquire it with a full request", s.wsID))
	}
	opts := workflow.ActivityOptions{
		// A clone may take long; the activity heartbeats, so a dead worker is noticed quickly.
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 5},
	}
	if loc.Exists && loc.HostID != "" {
		opts.TaskQueue = HostTaskQueue(loc.HostID)
		opts.ScheduleToStartTimeout = hostWait(loc.HostWait)
	}
	var out AcquireActivityResult
	if err := s.call(ctx, opts, ActivityAcquire, AcquireActivityInput{WorkspaceID: s.wsID, Request: req}, &out); err != nil {
		s.acquireFailed = true
		return Handle{}, err
	}
	ws := out.Workspace
	s.ws, s.settings = &ws, out.Settings
	s.state = StateActive
	s.lastError = ""
	s.ev.evicted, s.released = false, false // an evicted workspace was restored
	s.publish(ctx)
	s.moveToHost = !s.settings.StayOnSharedQueue && workflow.GetInfo(ctx).TaskQueueName != HostTaskQueue(ws.HostID)
	h := HandleFor(ws, s.settings, out.Created)
	h.RestoredFrom = out.RestoredFrom
	return h, nil
}

func (s *session) validateExec(req sandbox.ExecRequest) error {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "exec needs a command"))
	}
	if req.TimeoutS < 0 || time.Duration(req.TimeoutS)*time.Second > sandbox.MaxExecTimeout {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "timeout_s must be between 0 and %d", int(sandbox.MaxExecTimeout/time.Second)))
	}
	if req.MaxOutputBytes < 0 || req.MaxOutputBytes > sandbox.MaxOutputBytesLimit {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "max_output_bytes must be between 0 and %d", sandbox.MaxOutputBytesLimit))
	}
	if len(req.Stdin) > sandbox.MaxStdinBytes {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "stdin is larger than %d bytes", sandbox.MaxStdinBytes))
	}
	if req.Cwd != "" {
		if _, err := sandbox.CleanRelPath(req.Cwd); err != nil {
			return appError(err)
		}
	}
	return s.validateNothing()
}

func (s *session) exec(ctx workflow.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.waitReady(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := s.begin(ctx, true); err != nil {
		return sandbox.ExecResult{}, err
	}
	defer s.end(ctx, true)
	var out sandbox.ExecResult
	s.runtimeRunning = true
	if s.state != StateActive {
		s.setState(ctx, StateActive)
	}
	in := ExecActivityInput{WorkspaceID: s.wsID, Request: req}
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		in.UpdateID = u.ID
	}
	err := s.call(ctx, s.hostOptions(opExec, req.Timeout()), ActivityExec, in, &out)
	return out, err
}

func (s *session) validateNothing() error {
	if s.released {
		return appError(sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "session %s was released; acquire it again", s.wsID))
	}
	return nil
}

func (s *session) validatePath(in ReadFileInput) error {
	if _, err := sandbox.CleanRelPath(in.Path); err != nil {
		return appError(err)
	}
	return s.validateNothing()
}

func (s *session) validateListDir(in ListDirInput) error {
	return s.validatePath(ReadFileInput(in))
}

func (s *session) writable() error {
	if s.ws != nil && !s.ws.Capabilities.Writable {
		return appError(sandbox.Errorf(sandbox.ErrCommandRejected, "workspace %s is a read-only %s workspace", s.wsID, s.ws.Mode))
	}
	return nil
}

func (s *session) validateWrite(in WriteFileInput) error {
	clean, err := sandbox.CleanRelPath(in.Path)
	if err != nil {
		return appError(err)
	}
	if clean == "." {
		return appError(sandbox.Errorf(sandbox.ErrInvalidWorkspacePath, "write_file needs a file path"))
	}
	if sandbox.IsGitMetadataPath(clean) {
		return appError(sandbox.Errorf(sandbox.ErrInvalidWorkspacePath, "path %q is inside .git", in.Path))
	}
	if len(in.Content) > sandbox.MaxFileBytes {
		return appError(sandbox.Errorf(sandbox.ErrResourceLimit, "content is larger than %d bytes", sandbox.MaxFileBytes))
	}
	if in.Mode&^0o777 != 0 {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "mode %o: only permission bits are allowed", in.Mode))
	}
	if err := s.writable(); err != nil {
		return err
	}
	return s.validateNothing()
}

func (s *session) validateSearch(req sandbox.SearchRequest) error {
	if err := sandbox.ValidateSearchPattern(req.Pattern, sandbox.MaxSearchPatternBytes); err != nil {
		return appError(err)
	}
	if req.MaxResults < 0 || req.MaxResults > sandbox.MaxSearchResults {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "max_results must be between 0 and %d", sandbox.MaxSearchResults))
	}
	if _, err := sandbox.CleanRelPath(req.Path); err != nil {
		return appError(err)
	}
	return s.validateNothing()
}

func (s *session) validateCommit(req sandbox.CommitRequest) error {
	if req.Message == "" {
		return appError(sandbox.Errorf(sandbox.ErrInvalidArgument, "commit needs a message"))
	}
	if err := s.writable(); err != nil {
		return err
	}
	return s.validateNothing()
}

func (s *session) validateRelease(ReleaseInput) error { return s.validateNothing() }

// readOp runs a read-only activity under the shared lock.
func readOp[In, Out any](s *session, ctx workflow.Context, name string, in In) (Out, error) {
	var out Out
	if err := s.waitReady(ctx); err != nil {
		return out, err
	}
	if err := s.begin(ctx, false); err != nil {
		return out, err
	}
	defer s.end(ctx, false)
	err := s.callQuick(ctx, name, in, &out)
	return out, err
}

// writeOp runs a mutating activity under the exclusive lock.
func writeOp[In, Out any](s *session, ctx workflow.Context, class opClass, name string, in In) (Out, error) {
	var out Out
	if err := s.waitReady(ctx); err != nil {
		return out, err
	}
	if err := s.begin(ctx, true); err != nil {
		return out, err
	}
	defer s.end(ctx, true)
	var err error
	if class == opQuick {
		err = s.callQuick(ctx, name, in, &out)
	} else {
		err = s.call(ctx, s.hostOptions(class, 0), name, in, &out)
	}
	return out, err
}

func (s *session) readFile(ctx workflow.Context, in ReadFileInput) (ReadFileResult, error) {
	return readOp[FileActivityInput, ReadFileResult](s, ctx, ActivityReadFile, FileActivityInput{WorkspaceID: s.wsID, Path: in.Path})
}

func (s *session) writeFile(ctx workflow.Context, in WriteFileInput) (WriteFileResult, error) {
	return writeOp[FileActivityInput, WriteFileResult](s, ctx, opQuick, ActivityWriteFile, FileActivityInput{WorkspaceID: s.wsID, Path: in.Path, Content: in.Content, Mode: in.Mode})
}

func (s *session) listDir(ctx workflow.Context, in ListDirInput) (ListDirResult, error) {
	return readOp[FileActivityInput, ListDirResult](s, ctx, ActivityListDir, FileActivityInput{WorkspaceID: s.wsID, Path: in.Path})
}

func (s *session) search(ctx workflow.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	return readOp[SearchActivityInput, sandbox.SearchResult](s, ctx, ActivitySearch, SearchActivityInput{WorkspaceID: s.wsID, Request: req})
}

func (s *session) status(ctx workflow.Context) (sandbox.WorkspaceStatus, error) {
	return readOp[WorkspaceActivityInput, sandbox.WorkspaceStatus](s, ctx, ActivityStatus, WorkspaceActivityInput{WorkspaceID: s.wsID})
}

func (s *session) diff(ctx workflow.Context) (sandbox.Diff, error) {
	return readOp[WorkspaceActivityInput, sandbox.Diff](s, ctx, ActivityDiff, WorkspaceActivityInput{WorkspaceID: s.wsID})
}

func (s *session) commit(ctx workflow.Context, req sandbox.CommitRequest) (sandbox.CommitResult, error) {
	return writeOp[CommitActivityInput, sandbox.CommitResult](s, ctx, opGit, ActivityCommit, CommitActivityInput{WorkspaceID: s.wsID, Request: req})
}

func (s *session) hibernate(ctx workflow.Context) (HibernateResult, error) {
	if err := s.waitReady(ctx); err != nil {
		return HibernateResult{}, err
	}
	out, err := writeOp[WorkspaceActivityInput, HibernateResult](s, ctx, opQuick, ActivityHibernate, WorkspaceActivityInput{WorkspaceID: s.wsID})
	if err == nil {
		s.runtimeRunning = false
		s.setState(ctx, StateIdle)
	}
	return out, err
}

func (s *session) release(ctx workflow.Context, in ReleaseInput) (ReleaseResult, error) {
	if err := s.waitReady(ctx); err != nil {
		return ReleaseResult{}, err
	}
	name, what := ActivityHibernate, "stopped"
	if in.DestroyRuntime {
		name, what = ActivityDestroyRuntime, "destroyed"
	}
	if _, err := writeOp[WorkspaceActivityInput, HibernateResult](s, ctx, opQuick, name, WorkspaceActivityInput{WorkspaceID: s.wsID}); err != nil {
		return ReleaseResult{}, err
	}
	s.runtimeRunning = false
	s.released = true
	return ReleaseResult{WorkspaceID: s.wsID, Runtime: what}, nil
}

func (s *session) describe() (SessionDescription, error) {
	d := SessionDescription{
		WorkspaceID: s.wsID, State: s.state, Workspace: s.ws, RuntimeKind: s.settings.RuntimeKind,
		RuntimeRunning: s.runtimeRunning, InFlight: s.inFlight, Ops: s.ops, LastActivity: s.lastActivity,
		IdleCloseAt: s.lastActivity.Add(s.settings.IdleClose), LastError: s.lastError,
	}
	if s.runtimeRunning {
		t := s.lastActivity.Add(s.settings.IdleStop)
		d.IdleStopAt = &t
	}
	return d, nil
}

// String is for logs.
func (s *session) String() string { return fmt.Sprintf("session(%s, %s)", s.wsID, s.state) }
