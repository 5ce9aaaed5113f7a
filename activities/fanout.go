package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
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

// sessions returns a session client whose new runs start on queue.
func (f *Fanout) sessions(queue string) *sandboxclient.Client {
	return sandboxclient.New(f.Client, sandboxclient.Options{TaskQueue: queue})
}

// hostSession returns the session of a workspace living on hostID: if its
// run has completed, the next operation resumes it on that host's queue.
func (f *Fanout) hostSession(hostID, wsID string) (*sandboxclient.Session, error) {
	return f.sessions(wire.HostTaskQueue(hostID)).Session(wsID)
}

// Prepare resumes (or acquires) the conversation's session, checks that it
// is an edit workspace, and sends it a commit update (checkpoint: nothing to
// commit on a clean workspace); the resulting HEAD is the fan-out's start
// commit. With in.Fork nothing is committed: the start commit is HEAD. Errors: ErrInvalidArgument (not an edit workspace), ErrWorkspaceNotFound
// (unknown workspace id), the acquire and commit errors.
func (f *Fanout) Prepare(ctx context.Context, in wire.FanoutPrepareInput) (wire.FanoutPrepareResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.FanoutPrepareResult, error) {
		sc := f.sessions(f.TaskQueue)
		var s *sandboxclient.Session
		var h sandboxapi.Handle
		var err error
		if in.Request != nil {
			s, h, err = sc.Acquire(ctx, *in.Request)
		} else if s, err = sc.Session(in.WorkspaceID); err == nil {
			h, err = s.Resume(ctx)
		}
		if err != nil {
			return wire.FanoutPrepareResult{}, err
		}
		if h.Mode != sandbox.ModeEdit {
			return wire.FanoutPrepareResult{}, sandbox.Errorf(sandbox.ErrInvalidArgument, "workspace %s is a %s workspace; a fan-out needs a conversation's edit workspace", h.WorkspaceID, h.Mode)
		}
		if in.Fork {
			// The tasks are forks: nothing is committed, they start at HEAD.
			st, err := s.Status(ctx)
			if err != nil {
				return wire.FanoutPrepareResult{}, err
			}
			return wire.FanoutPrepareResult{Handle: h, StartCommit: st.Head}, nil
		}
		c, err := once(ctx, f.log(), s, in.OpID+"/checkpoint", func(ctx context.Context) (sandbox.CommitResult, error) {
			return s.Commit(ctx, sandbox.CommitRequest{Message: in.CheckpointMessage})
		})
		if err != nil {
			return wire.FanoutPrepareResult{}, err
		}
		return wire.FanoutPrepareResult{Handle: h, StartCommit: c.Commit, Checkpointed: !c.NothingToCommit}, nil
	})
	return res, ToApplicationError(err)
}

// AcquireTask gets or creates a task's workspace by update-with-start of its
// session on the conversation host's task queue (so the task branch lives in
// the same repo cache as the conversation's), starting branch
// agent/task-<task_id> at in.StartCommit. Errors: ErrWorkspaceUnavailable
// (the task workspace already lives on another host), ErrConflict (the task
// id's workspace exists and started from another commit: use a new task id),
// the acquire errors.
func (f *Fanout) AcquireTask(ctx context.Context, in wire.AcquireTaskInput) (sandboxapi.Handle, error) {
	h, err := whileHeartbeating(ctx, func() (sandboxapi.Handle, error) {
		_, h, err := f.sessions(wire.HostTaskQueue(in.HostID)).Acquire(ctx, in.Request)
		if err != nil {
			return h, err
		}
		if h.HostID != in.HostID {
			return h, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "task workspace %s lives on host %s, the conversation on %s: they must share a repo cache to be merged", h.WorkspaceID, h.HostID, in.HostID)
		}
		if h.BaseCommit != in.StartCommit {
			return h, sandbox.Errorf(sandbox.ErrConflict, "task %s already has a workspace (%s) started from %s, not %s: use a new task id", in.Request.TaskID, h.WorkspaceID, h.BaseCommit, in.StartCommit)
		}
		return h, nil
	})
	return h, ToApplicationError(err)
}

// RunScript runs a task's script (["sh","-c",script], output capped at
// 64 KiB per stream) with an exec update on the task's session and returns
// the exit code and the last TaskOutputTailBytes of each stream. A non-zero
// exit or a timeout is a result. After a worker crash the retried activity
// waits for the previous attempt's exec and returns its result; only when
// that exec failed (its worker died mid-command) is the script run again.
func (f *Fanout) RunScript(ctx context.Context, in wire.RunScriptInput) (wire.RunScriptResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.RunScriptResult, error) {
		s, err := f.hostSession(in.HostID, in.WorkspaceID)
		if err != nil {
			return wire.RunScriptResult{}, err
		}
		r, err := once(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/exec", func(ctx context.Context) (sandbox.ExecResult, error) {
			return s.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", in.Script}, TimeoutS: in.TimeoutS, MaxOutputBytes: 64 << 10})
		})
		if err != nil {
			return wire.RunScriptResult{}, err
		}
		return wire.RunScriptResult{ExitCode: r.ExitCode, TimedOut: r.TimedOut, DurationMS: r.DurationMS,
			StdoutTail: tail(r.Stdout, sandboxapi.TaskOutputTailBytes), StderrTail: tail(r.Stderr, sandboxapi.TaskOutputTailBytes)}, nil
	})
	return res, ToApplicationError(err)
}

// FinishTask commits the task's changes when in.Commit (commit update; a
// clean tree is no error) and returns the task branch's HEAD and its diff
// against the start commit, the patch cut at TaskDiffBytes on a file boundary
// (sandbox.TruncatePatch).
func (f *Fanout) FinishTask(ctx context.Context, in wire.FinishTaskInput) (wire.FinishTaskResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.FinishTaskResult, error) {
		s, err := f.hostSession(in.HostID, in.WorkspaceID)
		if err != nil {
			return wire.FinishTaskResult{}, err
		}
		var out wire.FinishTaskResult
		if in.Commit {
			c, err := once(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/commit", func(ctx context.Context) (sandbox.CommitResult, error) {
				return s.Commit(ctx, sandbox.CommitRequest{Message: in.Message})
			})
			if err != nil {
				return out, err
			}
			out.Commit = c.Commit
		} else {
			st, err := s.Status(ctx)
			if err != nil {
				return out, err
			}
			out.Commit = st.Head
		}
		d, err := s.Diff(ctx)
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
	return res, ToApplicationError(err)
}

// Merge sends merge_branches to the conversation's session (the merge runs
// inside that session, serialized with its agent's commands) and returns
// its result. A retry after a crash collects the previous attempt's outcome
// first; the merge itself is idempotent.
func (f *Fanout) Merge(ctx context.Context, in wire.FanoutMergeInput) (sandbox.MergeResult, error) {
	res, err := whileHeartbeating(ctx, func() (sandbox.MergeResult, error) {
		s, err := f.sessions(f.TaskQueue).Session(in.WorkspaceID)
		if err != nil {
			return sandbox.MergeResult{}, err
		}
		return once(ctx, f.log(), s, in.OpID+"/merge", func(ctx context.Context) (sandbox.MergeResult, error) {
			return s.MergeBranches(ctx, in.Request)
		})
	})
	return res, ToApplicationError(err)
}

// ForkTask forks task in.TaskID from the conversation (its session's fork
// update, sent once: a retry collects the earlier attempt's outcome) and
// returns the task workspace's handle. Errors: ErrConflict (the task id's
// workspace exists: use a new task id), ErrWorkspaceUnavailable (the fork
// is not on the conversation's host), the fork's errors.
func (f *Fanout) ForkTask(ctx context.Context, in wire.FanoutForkTaskInput) (sandboxapi.Handle, error) {
	h, err := whileHeartbeating(ctx, func() (sandboxapi.Handle, error) {
		s, err := f.sessions(f.TaskQueue).Session(in.WorkspaceID)
		if err != nil {
			return sandboxapi.Handle{}, err
		}
		r, err := once(ctx, f.log(), s, in.OpID+"/"+in.TaskID+"/fork", func(ctx context.Context) (sandboxapi.ForkResult, error) {
			return s.Fork(ctx, sandboxapi.ForkInput{TaskID: in.TaskID})
		})
		if err != nil {
			return sandboxapi.Handle{}, err
		}
		if r.Handle.HostID != in.HostID {
			return r.Handle, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "task workspace %s lives on host %s, the conversation on %s", r.Handle.WorkspaceID, r.Handle.HostID, in.HostID)
		}
		return r.Handle, nil
	})
	return h, ToApplicationError(err)
}

// once sends one session update with the id "<base>/<activity attempt>".
// On a retry it first looks for the updates of the earlier attempts, newest
// first, waiting for one still running: the first that succeeded is the
// result and nothing is sent again. An earlier update that failed (its
// worker died), or that the session's current run does not know, is
// superseded by a new one.
func once[T any](ctx context.Context, log *slog.Logger, s *sandboxclient.Session, base string, send func(context.Context) (T, error)) (T, error) {
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	for a := attempt - 1; a >= 1; a-- {
		var out T
		err := s.UpdateOutcome(ctx, fmt.Sprintf("%s/%d", base, a), &out)
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if !errors.Is(err, sandbox.ErrWorkspaceNotFound) {
			log.Info("fanout: earlier attempt failed; sending again", "update", base, "attempt", a, "err", err)
		}
	}
	return send(sandboxclient.WithUpdateID(ctx, fmt.Sprintf("%s/%d", base, attempt)))
}

// tail returns the last n bytes of b as valid UTF-8.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
