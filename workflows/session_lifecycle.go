package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The lifecycle operations the workflow handles itself (docs/API.md
// "Fork", "Destroy"): fork, destroy and restore. checkpoint, checkpoints
// and rollback are plain table entries (ops.go). None of this changes what
// a recorded history does: the handlers run only for these new updates, and
// phaseDestroyed (which finish and begin check) is only ever entered by destroy.

// forkOf returns the fork's target request (its base ref filled in later)
// and id: the fork gets the source's network policy. s.ws must be set.
func (s *session) forkOf(in sandboxapi.ForkInput) (sandboxapi.WorkspaceRequest, string) {
	req := in.Request(s.ws.UserID, s.ws.ProjectID, s.ws.Repo.URL, "")
	req.Network, req.NetworkAllow = s.ws.Network, s.ws.NetworkAllow
	return req, sandboxapi.WorkspaceIDForKey(req.Key())
}

func (s *session) validateFork(in sandboxapi.ForkInput) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if s.ws != nil {
		if _, id := s.forkOf(in); id == s.wsID {
			return sandboxapi.FieldError("task_id", "a workspace cannot be forked into itself")
		}
	}
	return nil
}

// fork checkpoints this workspace and leaves a fork manifest for the target under
// the exclusive lock (the source's files, index and branch are not
// touched), then — without the lock — acquires the target's own session on
// this workspace's host, whose acquire writes the checkpoint into the new
// worktree as uncommitted changes on a branch from this HEAD.
func (s *session) fork(ctx workflow.Context, in sandboxapi.ForkInput) (sandboxapi.ForkResult, error) {
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.ForkResult{}, err
	}
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.ForkResult{}, err
	}
	req, targetID := s.forkOf(in)
	if targetID == s.wsID {
		s.end(ctx, true)
		return sandboxapi.ForkResult{}, appError(sandboxapi.FieldError("task_id", "a workspace cannot be forked into itself"))
	}
	opID := s.wsID + "/fork/" + targetID
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		opID = u.ID
	}
	host := s.ws.HostID
	var prep wire.ForkPrepareResult
	err := s.call(ctx, s.hostOptions(opGit, 0), wire.ActivityForkPrepare, wire.ForkPrepareInput{
		WorkspaceID: s.wsID, Target: sandbox.ForkTarget{ID: targetID, Branch: req.Branch(), OpID: opID},
	}, &prep)
	s.end(ctx, true)
	if err != nil {
		return sandboxapi.ForkResult{}, err
	}
	req.BaseRef = prep.Checkpoint.Head
	var h sandboxapi.Handle
	if err := s.call(ctx, s.hostOptions(opGit, 0), wire.ActivityForkAcquire, wire.ForkAcquireInput{
		SourceID: s.wsID, HostID: host, Request: req, OpID: opID,
	}, &h); err != nil {
		return sandboxapi.ForkResult{Checkpoint: prep.Checkpoint}, err
	}
	return sandboxapi.ForkResult{Handle: h, Checkpoint: prep.Checkpoint}, nil
}

// destroy runs the destroy activity on the workspace's host under the
// exclusive lock, without resuming a dormant or evicted workspace first,
// then ends the run for good: the session completes (state destroyed). A
// run that never had the workspace (update-with-start of a session that
// was not running) asks the store where it lives; one that does not exist
// is {Existed: false}. When the activity fails, nothing of the session
// changes (the workspace is left as the activity left it: see
// activities.Activities.Destroy).
func (s *session) destroy(ctx workflow.Context, in sandboxapi.DestroyInput) (sandboxapi.DestroyResult, error) {
	s.first.began = true
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.DestroyResult{}, err
	}
	defer s.end(ctx, true)
	fail := func(err error) (sandboxapi.DestroyResult, error) {
		if s.ws == nil {
			s.phase, s.first.failure = phaseFailed, err // a run started only for this destroy ends
		}
		return sandboxapi.DestroyResult{}, err
	}
	host, wait := "", s.settings.HostWait
	if s.ws != nil {
		host = s.ws.HostID
	} else {
		var loc wire.LocateResult
		opts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}}
		if err := s.call(ctx, opts, wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}, &loc); err != nil {
			return fail(err)
		}
		if loc.Exists || loc.Removed {
			host, wait = loc.HostID, loc.HostWait
		}
	}
	res := sandboxapi.DestroyResult{WorkspaceID: s.wsID, Message: "no such workspace: nothing to destroy"}
	if host != "" {
		opts := workflow.ActivityOptions{
			TaskQueue:              wire.HostTaskQueue(host),
			ScheduleToStartTimeout: hostWait(wait),
			StartToCloseTimeout:    evictActivityTimeout,
			HeartbeatTimeout:       30 * time.Second,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		}
		if err := s.call(ctx, opts, wire.ActivityDestroy, wire.DestroyActivityInput{WorkspaceID: s.wsID, Discard: in.Discard}, &res); err != nil {
			return fail(err)
		}
	}
	s.phase, s.ending, s.runtimeRunning = phaseDestroyed, true, false
	s.state = sandboxapi.StateDestroyed // published when the run ends (finish)
	return res, nil
}

// restore brings back saved work: in a run without an active workspace
// (the first operation of a new run, or a dormant session) the acquire
// activities run with Restore set — an evicted workspace is restored as on
// any acquire, a destroyed one is re-created from its tombstone with its
// saved work, a fresh one gets its key's destroy backup; in an active
// session the restore activity brings a pending destroy backup into the
// fresh workspace. Handle.RestoredFrom is "" when nothing was pending.
func (s *session) restore(ctx workflow.Context, _ sandboxapi.None) (sandboxapi.Handle, error) {
	s.first.began = true
	if err := s.begin(ctx, true); err != nil {
		return sandboxapi.Handle{}, err
	}
	defer s.end(ctx, true)
	if s.ws == nil || s.phase == phaseDormant || s.ev.evicted {
		return s.resume(ctx, nil, true)
	}
	var h sandboxapi.Handle
	if err := s.call(ctx, s.hostOptions(opGit, 0), wire.ActivityRestoreDestroyed, wire.WorkspaceActivityInput{WorkspaceID: s.wsID}, &h); err != nil {
		return h, err
	}
	if h.RestoredFrom != "" {
		s.ws.BaseCommit, s.ws.Dirty = h.BaseCommit, true
		s.publish(ctx)
	}
	h.RuntimeKind = s.settings.RuntimeKind
	return h, nil
}
