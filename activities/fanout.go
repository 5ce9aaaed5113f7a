package activities

import (
	"context"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Fanout holds the activities of TaskFanoutWorkflow. They touch no file: each
// drives a SessionWorkflow (the conversation's or a task's) through the
// Temporal client with updates, so every change still runs inside that
// session, serialized with its agent's commands. They are registered on the
// shared task queue (any worker can run them). Client and TaskQueue are
// required.
type Fanout struct {
	// Client is connected to the Temporal namespace of the sessions.
	Client client.Client
	// TaskQueue is where sessions start (SANDBOX_TASK_QUEUE); task sessions
	// start on their conversation host's queue instead.
	TaskQueue string
	// Logger notes steps sent again after a failed attempt; nil means slog.Default().
	Logger *slog.Logger
}

// Register registers every fan-out activity on w under its contract name
// (workflows.ActivityFanout*).
func (f *Fanout) Register(w interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	reg := func(fn any, name string) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(f.Prepare, wire.ActivityFanoutPrepare)
	reg(f.AcquireTask, wire.ActivityFanoutAcquireTask)
	reg(f.RunScript, wire.ActivityFanoutRunScript)
	reg(f.FinishTask, wire.ActivityFanoutFinishTask)
	reg(f.Merge, wire.ActivityFanoutMerge)
	reg(f.ForkTask, wire.ActivityFanoutForkTask)
}

func (f *Fanout) log() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// session returns the session of workspace wsID whose new runs start on
// queue, called with sessionrpc.ActivityPolicy: a run that is ending
// (SessionReleased) fails the attempt and the activity's retry policy sends
// it again; a gone run is resumed.
func (f *Fanout) session(queue, wsID string) (sessionrpc.Session, error) {
	return sessionrpc.Open(f.Client, queue, wsID, sessionrpc.ActivityPolicy)
}

// hostSession returns the session of a workspace living on hostID: if its
// run has completed, the next operation resumes it on that host's queue.
func (f *Fanout) hostSession(hostID, wsID string) (sessionrpc.Session, error) {
	return f.session(wire.HostTaskQueue(hostID), wsID)
}

// acquire validates req as sandboxclient.Acquire does and acquires its
// workspace by update-with-start on queue. Errors: typed (the acquire's).
func (f *Fanout) acquire(ctx context.Context, queue string, req sandboxapi.WorkspaceRequest) (sessionrpc.Session, sandboxapi.Handle, error) {
	return acquireSession(ctx, f.Client, queue, req, sessionrpc.ActivityPolicy)
}

// acquireSession validates req as sandboxclient.Acquire does (repository
// URL schemes are checked again by the acquiring worker under its policy)
// and acquires its workspace by update-with-start on queue, under policy.
// Errors: typed (the acquire's).
func acquireSession(ctx context.Context, tc client.Client, queue string, req sandboxapi.WorkspaceRequest, policy sessionrpc.Policy) (sessionrpc.Session, sandboxapi.Handle, error) {
	if _, err := req.Validate(sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true}); err != nil {
		return sessionrpc.Session{}, sandboxapi.Handle{}, err
	}
	s, err := sessionrpc.Open(tc, queue, sandboxapi.WorkspaceIDForKey(req.Key()), policy)
	if err != nil {
		return s, sandboxapi.Handle{}, err
	}
	h, err := s.Acquire(ctx, &req)
	return s, h, sandboxclient.FromTemporal(err)
}

// Prepare resumes (or acquires) the conversation's session, checks that it
// is an edit workspace, and sends it a commit update (checkpoint: nothing to
// commit on a clean workspace); the resulting HEAD is the fan-out's start
// commit. With in.Fork nothing is committed: the start commit is HEAD.
// With in.TenantSegment, a workspace of another tenant is refused before
// any of this. Errors: ErrInvalidArgument (not an edit workspace),
// ErrWorkspaceNotFound (unknown workspace id, or another tenant's), the
// acquire and commit errors.
func (f *Fanout) Prepare(ctx context.Context, in wire.FanoutPrepareInput) (wire.FanoutPrepareResult, error) {
	return whileHeartbeating(ctx, func() (wire.FanoutPrepareResult, error) {
		var s sessionrpc.Session
		var h sandboxapi.Handle
		var err error
		if in.Request != nil {
			s, h, err = f.acquire(ctx, f.TaskQueue, *in.Request)
		} else if s, err = f.session(f.TaskQueue, in.WorkspaceID); err == nil {
			h, err = s.Acquire(ctx, nil)
			err = sandboxclient.FromTemporal(err)
		}
		if err != nil {
			return wire.FanoutPrepareResult{}, err
		}
		if in.TenantSegment != "" && sandboxapi.TenantSegment(h.UserID, h.ProjectID) != in.TenantSegment {
			// Another tenant's workspace: refused as if it did not exist,
			// naming nothing of it but the id the caller gave.
			return wire.FanoutPrepareResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound,
				"workspace %s: the fan-out's user and project have no conversation workspace with that id", in.WorkspaceID)
		}
		if h.Mode != sandboxapi.ModeEdit {
			return wire.FanoutPrepareResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workspace %s is a %s workspace; a fan-out needs a conversation's edit workspace", h.WorkspaceID, h.Mode)
		}
		if in.Fork {
			// The tasks are forks: nothing is committed, they start at HEAD.
			st, err := call(ctx, s, sandboxapi.OpStatus, sandboxapi.None{})
			if err != nil {
				return wire.FanoutPrepareResult{}, err
			}
			return wire.FanoutPrepareResult{Handle: h, StartCommit: st.Head}, nil
		}
		c, err := once(ctx, f.log(), s, in.OpID+"/checkpoint", sandboxapi.OpCommit, sandboxapi.CommitRequest{Message: in.CheckpointMessage})
		if err != nil {
			return wire.FanoutPrepareResult{}, err
		}
		return wire.FanoutPrepareResult{Handle: h, StartCommit: c.Commit, Checkpointed: !c.NothingToCommit}, nil
	})
}

// AcquireTask gets or creates a task's workspace by update-with-start of its
// session on the conversation host's task queue (so the task branch lives in
// the same repo cache as the conversation's), starting branch
// agent/<tenant>/task-<task_id> at in.StartCommit. Errors: ErrWorkspaceUnavailable
// (the task workspace already lives on another host), ErrConflict (the task
// id's workspace exists and started from another commit: use a new task id),
// the acquire errors.
func (f *Fanout) AcquireTask(ctx context.Context, in wire.AcquireTaskInput) (sandboxapi.Handle, error) {
	return whileHeartbeating(ctx, func() (sandboxapi.Handle, error) {
		_, h, err := f.acquire(ctx, wire.HostTaskQueue(in.HostID), in.Request)
		if err != nil {
			return h, err
		}
		if h.HostID != in.HostID {
			return h, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "task workspace %s lives on host %s, the conversation on %s: they must share a repo cache to be merged", h.WorkspaceID, h.HostID, in.HostID)
		}
		if h.BaseCommit != in.StartCommit {
			return h, sandboxapi.Errorf(sandboxapi.ErrConflict, "task %s already has a workspace (%s) started from %s, not %s: use a new task id", in.Request.TaskID, h.WorkspaceID, h.BaseCommit, in.StartCommit)
		}
		return h, nil
	})
}

// RunScript runs a task's script (["sh","-c",script], output capped at
// 64 KiB per stream) with an exec update on the task's session and returns
// the exit code and the last TaskOutputTailBytes of each stream. A non-zero
// exit or a timeout is a result. After a worker crash the retried activity
// waits for the previous attempt's exec and returns its result; only when
// that exec failed (its worker died mid-command) is the script run again.
func (f *Fanout) RunScript(ctx context.Context, in wire.RunScriptInput) (wire.RunScriptResult, error) {
	return whileHeartbeating(ctx, func() (wire.RunScriptResult, error) {
		s, err := f.hostSession(in.HostID, in.WorkspaceID)
		if err != nil {
			return wire.RunScriptResult{}, err
		}
		r, err := onceSent(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/exec", func(ctx context.Context, id string) (sandboxapi.ExecResult, error) {
			r, err := s.Exec(ctx, id, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", in.Script}, TimeoutS: in.TimeoutS, MaxOutputBytes: 64 << 10})
			if ctx.Err() != nil {
				return r, err // cancelled: ctx's error, as sandboxclient's Exec
			}
			return r, sandboxclient.FromTemporal(err)
		})
		if err != nil {
			return wire.RunScriptResult{}, err
		}
		return wire.RunScriptResult{ExitCode: r.ExitCode, TimedOut: r.TimedOut, DurationMS: r.DurationMS,
			StdoutTail: tail(r.Stdout, sandboxapi.TaskOutputTailBytes), StderrTail: tail(r.Stderr, sandboxapi.TaskOutputTailBytes)}, nil
	})
}

// FinishTask commits the task's changes when in.Commit (commit update; a
// clean tree is no error) and returns the task branch's HEAD and its diff
// against the start commit, the patch cut at TaskDiffBytes on a file boundary
// (sandbox.TruncatePatch).
func (f *Fanout) FinishTask(ctx context.Context, in wire.FinishTaskInput) (wire.FinishTaskResult, error) {
	return whileHeartbeating(ctx, func() (wire.FinishTaskResult, error) {
		s, err := f.hostSession(in.HostID, in.WorkspaceID)
		if err != nil {
			return wire.FinishTaskResult{}, err
		}
		var out wire.FinishTaskResult
		if in.Commit {
			c, err := once(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/commit", sandboxapi.OpCommit, sandboxapi.CommitRequest{Message: in.Message})
			if err != nil {
				return out, err
			}
			out.Commit = c.Commit
		} else {
			st, err := call(ctx, s, sandboxapi.OpStatus, sandboxapi.None{})
			if err != nil {
				return out, err
			}
			out.Commit = st.Head
		}
		d, err := call(ctx, s, sandboxapi.OpDiff, sandboxapi.None{})
		if err != nil {
			return out, err
		}
		out.Diff = sandboxapi.TaskDiff{Patch: d.Patch, Files: d.Files, Truncated: d.Truncated, TotalBytes: d.TotalBytes}
		// Whole file sections only, so the cut patch still applies for the
		// files it holds (sandbox.TruncatePatch).
		if p, cut := sandbox.TruncatePatch(out.Diff.Patch, sandboxapi.TaskDiffBytes); cut {
			out.Diff.Patch, out.Diff.Truncated = p, true
		}
		return out, nil
	})
}

// Merge previews the merge on the conversation's session first
// (merge_branches with dry_run and order least_conflicts: every branch's
// outcome before any is merged, and the order that conflicts least), then
// sends merge_branches with the branches in that order (the merge runs
// inside that session, serialized with its agent's commands) and returns
// both. A retry after a crash collects the previous attempt's outcomes
// first; the merge itself is idempotent. A preview that fails is no
// failure: the merge runs in the given order without one (Preview nil).
func (f *Fanout) Merge(ctx context.Context, in wire.FanoutMergeInput) (wire.FanoutMergeResult, error) {
	return whileHeartbeating(ctx, func() (wire.FanoutMergeResult, error) {
		s, err := f.session(f.TaskQueue, in.WorkspaceID)
		if err != nil {
			return wire.FanoutMergeResult{}, err
		}
		req := in.Request
		dry := req
		dry.DryRun, dry.Order = true, sandboxapi.MergeOrderLeastConflicts
		var out wire.FanoutMergeResult
		if p, err := once(ctx, f.log(), s, in.OpID+"/merge-preview", sandboxapi.OpMergeBranches, dry); err != nil {
			f.log().Warn("fan-out: the merge preview failed; merging in the given order", "workspace", in.WorkspaceID, "error", err)
		} else if len(p.Branches) == len(req.Branches) {
			out.Preview = &p
			req.Branches = make([]string, len(p.Branches))
			for i, b := range p.Branches {
				req.Branches[i] = b.Branch
			}
		}
		if out.MergeResult, err = once(ctx, f.log(), s, in.OpID+"/merge", sandboxapi.OpMergeBranches, req); err != nil {
			return wire.FanoutMergeResult{}, err
		}
		return out, nil
	})
}

// ForkTask forks task in.TaskID from the conversation (its session's fork
// update, sent once: a retry collects the earlier attempt's outcome) and
// returns the task workspace's handle. Errors: ErrConflict (the task id's
// workspace exists: use a new task id), ErrWorkspaceUnavailable (the fork
// is not on the conversation's host), the fork's errors.
func (f *Fanout) ForkTask(ctx context.Context, in wire.FanoutForkTaskInput) (sandboxapi.Handle, error) {
	return whileHeartbeating(ctx, func() (sandboxapi.Handle, error) {
		fork := sandboxapi.ForkInput{TaskID: in.TaskID}
		if err := fork.Validate(); err != nil {
			return sandboxapi.Handle{}, err
		}
		s, err := f.session(f.TaskQueue, in.WorkspaceID)
		if err != nil {
			return sandboxapi.Handle{}, err
		}
		r, err := once(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/fork", sandboxapi.OpFork, fork)
		if err != nil {
			return sandboxapi.Handle{}, err
		}
		if r.Handle.HostID != in.HostID {
			return r.Handle, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "task workspace %s lives on host %s, the conversation on %s", r.Handle.WorkspaceID, r.Handle.HostID, in.HostID)
		}
		return r.Handle, nil
	})
}

// call sends op with argument in to session s (a random update id) and
// returns its result. Errors: typed (sandboxclient.FromTemporal).
func call[In, Out any](ctx context.Context, s sessionrpc.Session, op sandboxapi.Op[In, Out], in In) (Out, error) {
	out, err := sessionrpc.Call(ctx, s, op, "", in)
	return out, sandboxclient.FromTemporal(err)
}

// once sends op with argument in to session s once per step base across
// the activity's attempts (onceSent).
func once[In, Out any](ctx context.Context, log *slog.Logger, s sessionrpc.Session, base string, op sandboxapi.Op[In, Out], in In) (Out, error) {
	return onceSent(ctx, log, s, base, func(ctx context.Context, id string) (Out, error) {
		out, err := sessionrpc.Call(ctx, s, op, id, in)
		return out, sandboxclient.FromTemporal(err)
	})
}

// onceSent sends one session update with the id "<base>/<activity
// attempt>" by send (sessionrpc.Once): a retry first collects the outcome
// of the earlier attempts' updates and sends nothing when one succeeded.
// Errors: send's (typed), ctx's, or the earlier update's failure typed.
func onceSent[T any](ctx context.Context, log *slog.Logger, s sessionrpc.Session, base string, send func(ctx context.Context, id string) (T, error)) (T, error) {
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	return sessionrpc.Once(ctx, s, base, attempt, log, send)
}

// tail returns the last n bytes of b as valid UTF-8.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
