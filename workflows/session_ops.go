package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The operations the workflow handles itself (the operation table's
// "handle" entries): acquire, exec, hibernate and release.

func (s *session) validateAcquire(in sandboxapi.AcquireInput) error {
	req := in.Request
	if req == nil {
		return nil
	}
	if _, err := req.Validate(sandboxapi.PermissiveURLs); err != nil {
		return err
	}
	if id := sandbox.WorkspaceIDForKey(req.Key()); id != s.wsID {
		return sandbox.FieldError("request", "the request's key belongs to workspace %s, not %s", id, s.wsID)
	}
	if s.ws != nil {
		if repo, _ := sandbox.ParseRepoURL(req.RepoURL, sandboxapi.PermissiveURLs); repo.Key() != s.ws.Repo.Key() {
			return sandbox.Errorf(sandbox.ErrConflict, "workspace %s belongs to repository %s, not %s", s.wsID, s.ws.Repo.Key(), repo.Key())
		}
	}
	return nil
}

func (s *session) acquire(ctx workflow.Context, in sandboxapi.AcquireInput) (sandboxapi.Handle, error) {
	s.acquireBegan = true
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.Handle{}, err
	}
	defer s.end(ctx, true)
	if s.ws != nil && !s.ev.evicted && !s.dormant {
		h := wire.HandleFor(*s.ws, s.settings, false)
		h.RuntimeReplica = s.replica
		return h, nil
	}
	req := in.Request
	if req == nil {
		req = s.request
	}
	return s.resume(ctx, req, false)
}

// wake resumes a dormant workspace before an operation runs on it: the
// acquire activities run again (access re-checked, the worktree repaired or
// restored) under the exclusive lock. Concurrent operations wake it once.
func (s *session) wake(ctx workflow.Context) error {
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	defer s.end(ctx, true)
	if !s.dormant {
		return nil
	}
	_, err := s.resume(ctx, nil, false)
	return err
}

// resume runs the locate and acquire activities for req (nil: the stored
// workspace) and makes the run active. A first acquire that fails ends the
// run; a dormant run stays dormant, and ends when its workspace is gone.
// restore (the restore update) also reaches a destroyed workspace's
// tombstone and brings back what its destroy saved (docs/API.md "Destroy").
func (s *session) resume(ctx workflow.Context, req *sandbox.WorkspaceRequest, restore bool) (sandboxapi.Handle, error) {
	first := s.ws == nil
	fail := func(err error) (sandboxapi.Handle, error) {
		if first {
			s.acquireFailed = true
		}
		return sandboxapi.Handle{}, err
	}
	if first {
		s.acquireFailed = false
	}
	var loc wire.LocateResult
	locIn := wire.WorkspaceActivityInput{WorkspaceID: s.wsID}
	retry := &temporal.RetryPolicy{MaximumAttempts: 5}
	if workflow.GetVersion(ctx, changeLocateLocal, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		locOpts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry}
		if err := s.call(ctx, locOpts, wire.ActivityLocate, locIn, &loc); err != nil {
			return fail(err)
		}
	} else {
		// Locate only reads the store, which every worker of the shared
		// queue reaches: run it in this workflow task (no activity task,
		// no extra workflow task before the acquire activity).
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
		if err := s.result(workflow.ExecuteLocalActivity(lctx, wire.ActivityLocate, locIn).Get(ctx, &loc)); err != nil {
			return fail(err)
		}
	}
	if req == nil && !loc.Exists && !(restore && loc.Removed) {
		if !first {
			s.released = true // a dormant run of a removed workspace ends
		}
		return fail(appError(sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %s does not exist; acquire it with a full request", s.wsID)))
	}
	opts := workflow.ActivityOptions{
		// A clone may take long; the activity heartbeats, so a dead worker is noticed quickly.
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 5},
	}
	// A tombstone's kept work (backup, checkpoints) lives on its host: the
	// key's next workspace is made there.
	if (loc.Exists || loc.Removed) && loc.HostID != "" {
		opts.TaskQueue = wire.HostTaskQueue(loc.HostID)
		opts.ScheduleToStartTimeout = hostWait(loc.HostWait)
	}
	var out wire.AcquireActivityResult
	if err := s.call(ctx, opts, wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: s.wsID, Request: req, Restore: restore}, &out); err != nil {
		return fail(err)
	}
	ws := out.Workspace
	s.ws, s.settings = &ws, out.Settings
	s.state = sandboxapi.StateActive
	s.lastError = ""
	s.ev.evicted, s.released, s.dormant = false, false, false // an evicted workspace was restored
	s.publish(ctx)
	s.moveToHost = !s.settings.StayOnSharedQueue && workflow.GetInfo(ctx).TaskQueueName != wire.HostTaskQueue(ws.HostID)
	s.replica = out.RuntimeReplica
	h := wire.HandleFor(ws, s.settings, out.Created)
	h.RestoredFrom, h.Restorable, h.ForkedFrom = out.RestoredFrom, out.Restorable, out.ForkedFrom
	h.RuntimeReplica = out.RuntimeReplica
	return h, nil
}

func (s *session) exec(ctx workflow.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.waitReady(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := s.begin(ctx, true); err != nil {
		return sandbox.ExecResult{}, err
	}
	defer s.end(ctx, true)
	// The activity's result is the command's (wire.ExecActivityResult inlines
	// it: histories where it returned a bare ExecResult decode the same).
	var out wire.ExecActivityResult
	s.runtimeRunning = true
	if s.state != sandboxapi.StateActive {
		s.setState(ctx, sandboxapi.StateActive)
	}
	in := wire.ExecActivityInput{WorkspaceID: s.wsID, Request: req}
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		in.UpdateID = u.ID
	}
	err := s.call(ctx, s.hostOptions(opExec, req.Timeout()), wire.ActivityExec, in, &out)
	if out.RuntimeReplica != nil {
		s.replica = out.RuntimeReplica
	}
	return out.ExecResult, err
}

func (s *session) hibernate(ctx workflow.Context, _ sandboxapi.None) (sandboxapi.HibernateResult, error) {
	if s.dormant {
		return s.stopDormant(ctx, wire.ActivityHibernate)
	}
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	out, err := writeOp[sandboxapi.HibernateResult](s, ctx, opQuick, wire.ActivityHibernate, wire.WorkspaceActivityInput{WorkspaceID: s.wsID})
	if err == nil {
		s.runtimeRunning = false
		s.setState(ctx, sandboxapi.StateIdle)
	}
	return out, err
}

func (s *session) release(ctx workflow.Context, in sandboxapi.ReleaseInput) (sandboxapi.ReleaseResult, error) {
	name, what := wire.ActivityHibernate, "stopped"
	if in.DestroyRuntime {
		name, what = wire.ActivityDestroyRuntime, "destroyed"
	}
	if s.dormant { // nothing runs: do not resume the workspace to stop it
		if _, err := s.stopDormant(ctx, name); err != nil {
			return sandboxapi.ReleaseResult{}, err
		}
		if !in.DestroyRuntime {
			what = "not running"
		}
		return sandboxapi.ReleaseResult{WorkspaceID: s.wsID, Runtime: what}, nil
	}
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.ReleaseResult{}, err
	}
	if _, err := writeOp[sandboxapi.HibernateResult](s, ctx, opQuick, name, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}); err != nil {
		return sandboxapi.ReleaseResult{}, err
	}
	s.runtimeRunning = false
	if in.DestroyRuntime {
		s.replica = nil
	}
	s.released = true
	s.state = sandboxapi.StateReleased // published when the run ends (finish)
	return sandboxapi.ReleaseResult{WorkspaceID: s.wsID, Runtime: what}, nil
}

// stopDormant runs the hibernate or destroy-runtime activity for a dormant
// session under the exclusive lock, without resuming its workspace (both
// are idempotent: a stopped or missing runtime is success). The run stays dormant.
func (s *session) stopDormant(ctx workflow.Context, name string) (sandboxapi.HibernateResult, error) {
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	defer s.end(ctx, true)
	var out sandboxapi.HibernateResult
	err := s.callQuick(ctx, name, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}, &out)
	if err == nil && name == wire.ActivityDestroyRuntime {
		s.replica = nil
	}
	return out, err
}
