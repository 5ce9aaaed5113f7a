package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The operations the workflow handles itself (the operation table's
// "handle" entries): acquire, hibernate and release; exec, cancel and the
// process updates are in session_proc.go.

func (s *session) validateAcquire(in sandboxapi.AcquireInput) error {
	req := in.Request
	if req == nil {
		return nil
	}
	if _, err := req.Validate(sandboxapi.PermissiveURLs); err != nil {
		return err
	}
	if id := sandboxapi.WorkspaceIDForKey(req.Key()); id != s.wsID {
		return sandboxapi.FieldError("request", "the request's key belongs to workspace %s, not %s", id, s.wsID)
	}
	if s.ws != nil {
		if repo, _ := sandboxapi.ParseRepoURL(req.RepoURL, sandboxapi.PermissiveURLs); repo.Key() != s.ws.Repo.Key() {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s belongs to repository %s, not %s", s.wsID, s.ws.Repo.Key(), repo.Key())
		}
	}
	return nil
}

// changeNetworkPolicy: an acquire of an active session whose request names
// another network policy runs the acquire activities again, which store it
// (docs/SECURITY.md "Network modes"). Histories recorded before never sent
// a policy, so they never reach the version marker.
const changeNetworkPolicy = "session-acquire-network-policy"

func (s *session) acquire(ctx workflow.Context, in sandboxapi.AcquireInput) (sandboxapi.Handle, error) {
	h, err := s.acquireLocked(ctx, in)
	if err != nil || s.ws == nil {
		return h, err
	}
	retired(ctx, changeSetup)
	mode := ""
	if in.Request != nil {
		mode = in.Request.Setup
	}
	s.planSetup(ctx, mode)
	if mode == sandboxapi.SetupWait {
		if err := s.awaitSetup(ctx); err != nil {
			return sandboxapi.Handle{}, err
		}
	}
	h.Setup = s.setupCopy()
	return h, nil
}

// acquireLocked is the acquire update under the session's exclusive lock.
func (s *session) acquireLocked(ctx workflow.Context, in sandboxapi.AcquireInput) (sandboxapi.Handle, error) {
	s.first.began = true
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.Handle{}, err
	}
	defer s.end(ctx, true)
	if s.ws != nil && !s.ev.evicted && s.phase != phaseDormant {
		if !policyChange(in.Request, s.ws) ||
			workflow.GetVersion(ctx, changeNetworkPolicy, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			h := wire.HandleFor(*s.ws, s.settings, false)
			h.RuntimeReplica = s.replica
			return h, nil
		}
		return s.resume(ctx, in.Request, false)
	}
	req := in.Request
	if req == nil {
		req = s.request
	}
	return s.resume(ctx, req, false)
}

// policyChange reports whether req names a network policy other than
// ws's: a mode, or allow-list entries, that differ from the stored ones (a
// request naming none keeps them).
func policyChange(req *sandboxapi.WorkspaceRequest, ws *sandboxapi.Workspace) bool {
	if req == nil || (req.Network == "" && req.NetworkAllow == nil) {
		return false
	}
	if req.Network != "" && req.Network != ws.Network {
		return true
	}
	allow, err := sandboxapi.CanonicalNetworkAllow("network_allow", req.NetworkAllow)
	return err != nil || !slices.Equal(allow, ws.NetworkAllow)
}

// wake resumes a dormant workspace before an operation runs on it: the
// acquire activities run again (access re-checked, the worktree repaired or
// restored) under the exclusive lock. Concurrent operations wake it once.
func (s *session) wake(ctx workflow.Context) error {
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	defer s.end(ctx, true)
	if s.phase != phaseDormant {
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
func (s *session) resume(ctx workflow.Context, req *sandboxapi.WorkspaceRequest, restore bool) (sandboxapi.Handle, error) {
	first := s.ws == nil
	fail := func(err error) (sandboxapi.Handle, error) {
		if first {
			s.phase, s.first.failure = phaseFailed, err
		}
		return sandboxapi.Handle{}, err
	}
	if first {
		s.phase = phaseAcquiring // an acquire after a failed one
	}
	var loc wire.LocateResult
	locIn := wire.WorkspaceActivityInput{WorkspaceID: s.wsID}
	retry := &temporal.RetryPolicy{MaximumAttempts: 5}
	retired(ctx, changeLocateLocal)
	// Locate only reads the store, which every worker of the shared queue
	// reaches: run it in this workflow task (no activity task, no extra
	// workflow task before the acquire activity).
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
	if err := s.result(workflow.ExecuteLocalActivity(lctx, wire.ActivityLocate, locIn).Get(ctx, &loc)); err != nil {
		return fail(err)
	}
	if req == nil && !loc.Exists && !(restore && loc.Removed) {
		if !first {
			s.ending = true // a dormant run of a removed workspace ends
		}
		if loc.Removed {
			// Destroyed: a run started to resume it ends destroyed, not
			// failed (changeFailedRun; finish), and says how to get it back.
			s.first.keyDestroyed = first
			return fail(appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s was destroyed; restore brings back what its destroy saved, an acquire with a full request starts its key fresh", s.wsID)))
		}
		return fail(appError(sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s does not exist; acquire it with a full request", s.wsID)))
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
	s.ev.evicted, s.ending, s.phase = false, false, phaseActive // an evicted workspace was restored
	s.publish(ctx)
	s.moveToHost = !s.settings.StayOnSharedQueue && workflow.GetInfo(ctx).TaskQueueName != wire.HostTaskQueue(ws.HostID)
	s.replica = out.RuntimeReplica
	h := wire.HandleFor(ws, s.settings, out.Created)
	h.RestoredFrom, h.Restorable, h.ForkedFrom = out.RestoredFrom, out.Restorable, out.ForkedFrom
	h.RuntimeReplica = out.RuntimeReplica
	return h, nil
}

func (s *session) hibernate(ctx workflow.Context, _ sandboxapi.None) (sandboxapi.HibernateResult, error) {
	if s.phase == phaseDormant {
		return s.stopDormant(ctx, wire.ActivityHibernate)
	}
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.HibernateResult{}, err
	}
	// Never wait for a command: cancel what runs or waits (docs/API.md
	// "Cancelling a command").
	s.cancelAll(ctx, cancelByHibernate)
	out, err := writeOp[sandboxapi.HibernateResult](s, ctx, opQuick, wire.ActivityHibernate, wire.WorkspaceActivityInput{WorkspaceID: s.wsID})
	if err == nil {
		s.runtimeRunning = false
		s.processesStopped()
		s.setState(ctx, sandboxapi.StateIdle)
	}
	return out, err
}

func (s *session) release(ctx workflow.Context, in sandboxapi.ReleaseInput) (sandboxapi.ReleaseResult, error) {
	name, what := wire.ActivityHibernate, "stopped"
	if in.DestroyRuntime {
		name, what = wire.ActivityDestroyRuntime, "destroyed"
	}
	if s.phase == phaseDormant { // nothing runs: do not resume the workspace to stop it
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
	s.cancelAll(ctx, cancelByRelease)
	if _, err := writeOp[sandboxapi.HibernateResult](s, ctx, opQuick, name, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}); err != nil {
		return sandboxapi.ReleaseResult{}, err
	}
	s.runtimeRunning = false
	s.processesStopped()
	if in.DestroyRuntime {
		s.replica = nil
	}
	s.ending = true
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
