package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// blockingExec makes the fakes' exec a long command: ExecStart reports it
// running; the waiting activity returns when ExecCancel killed it (a
// cancelled result, as the real activity builds it) or when release is
// closed (exit 0).
type blockingExec struct {
	once    sync.Once
	killed  chan struct{}
	release chan struct{}
	stuck   bool // the wait ignores the kill (a worker that does not answer)
}

func newBlockingExec(f *fakeActivities) *blockingExec {
	b := &blockingExec{killed: make(chan struct{}), release: make(chan struct{})}
	f.execStart = func(wire.ExecActivityInput) wire.ExecStartResult { return wire.ExecStartResult{} }
	f.execCancel = func(wire.ExecCancelInput) { b.once.Do(func() { close(b.killed) }) }
	f.execWait = func(ctx context.Context, in wire.ExecActivityInput) (sandboxapi.ExecResult, error) {
		killed := b.killed
		if b.stuck {
			killed = nil
		}
		select {
		case <-killed:
			return sandboxapi.ExecResult{ExitCode: 130, Cancelled: true, Stdout: []byte("partial")}, nil
		case <-b.release:
			return sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("finished")}, nil
		case <-ctx.Done():
			return sandboxapi.ExecResult{}, ctx.Err()
		}
	}
	return b
}

// TestExecShortCommandIsOneLocalActivity: on the host queue a command that
// ends within the fast path's wait is answered by ExecStart alone, named by
// its update id's process id.
func TestExecShortCommandIsOneLocalActivity(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	var got wire.ExecActivityInput
	f.execStart = func(i wire.ExecActivityInput) wire.ExecStartResult {
		got = i
		return wire.ExecStartResult{Done: true, Result: sandboxapi.ExecResult{ExitCode: 3, Stdout: []byte("x")}}
	}
	req := *in.Request
	var acq, ex updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "exit 3"}})
	update(env, 2*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, ex.err)
	res := ex.value.(sandboxapi.ExecResult)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, int32(1), f.starts.Load())
	assert.Zero(t, f.waits.Load(), "no waiting activity for a short command")
	assert.Equal(t, execFastWait, got.Wait)
	assert.Regexp(t, `^exec-[0-9a-f]{24}$`, got.ProcessID)
	assert.Equal(t, got.ProcessID, sandboxapi.ExecProcessID(in.WorkspaceID, got.UpdateID))
}

// TestExecLongCommandWaitsForTheSameProcess: a command still running after
// the fast path is waited for by the exec activity with the same process
// id; a failed wait is retried on the same process and the command is never
// started again.
func TestExecLongCommandWaitsForTheSameProcess(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	f.execStart = func(wire.ExecActivityInput) wire.ExecStartResult { return wire.ExecStartResult{} }
	f.waitInputs = make(chan wire.ExecActivityInput, 10)
	var mu sync.Mutex
	attempts := 0
	f.execWait = func(context.Context, wire.ExecActivityInput) (sandboxapi.ExecResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if attempts++; attempts == 1 {
			return sandboxapi.ExecResult{}, temporal.NewApplicationError("the worker died", sandboxapi.ErrRuntimeUnavailable.Type)
		}
		return sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("done")}, nil
	}
	req := *in.Request
	var acq, ex updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"sleep", "5"}})
	update(env, time.Minute, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, ex.err)
	assert.Equal(t, "done", string(ex.value.(sandboxapi.ExecResult).Stdout))
	assert.Equal(t, int32(1), f.starts.Load(), "started once")
	require.Equal(t, int32(2), f.waits.Load(), "the wait was retried")
	a, b := <-f.waitInputs, <-f.waitInputs
	assert.Equal(t, a.ProcessID, b.ProcessID)
	assert.NotEmpty(t, a.ProcessID)
}

// TestCancelRunningExecThenQueuedWorkRuns: cancel names a running exec by
// its update id; its tree is killed, the exec returns cancelled (130) and a
// write queued behind it then runs; a second cancel finds it finished.
func TestCancelRunningExecThenQueuedWorkRuns(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	env.SetTestTimeout(time.Minute)
	newBlockingExec(f)
	req := *in.Request
	var acq, ex, wr, cancel, again, unknown updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	execID := "the-exec"
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(sandboxapi.UpdateExec, execID, &callback{&ex}, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	}, time.Second)
	update(env, 2*time.Second, sandboxapi.UpdateWriteFile, &wr, sandboxapi.WriteFileInput{Path: "after.txt", Content: []byte("x")})
	update(env, 3*time.Second, sandboxapi.UpdateCancel, &cancel, sandboxapi.CancelInput{UpdateID: execID})
	update(env, 30*time.Second, sandboxapi.UpdateCancel, &again, sandboxapi.CancelInput{UpdateID: execID})
	update(env, 31*time.Second, sandboxapi.UpdateCancel, &unknown, sandboxapi.CancelInput{UpdateID: "nope"})
	update(env, time.Minute, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, ex.err)
	res := ex.value.(sandboxapi.ExecResult)
	assert.True(t, res.Cancelled)
	assert.Equal(t, 130, res.ExitCode)
	require.NoError(t, cancel.err)
	c := cancel.value.(sandboxapi.CancelResult)
	assert.Equal(t, sandboxapi.CancelRunning, c.State)
	assert.True(t, c.Cancelled)
	assert.Equal(t, sandboxapi.CancelFinished, again.value.(sandboxapi.CancelResult).State)
	assert.Equal(t, sandboxapi.CancelUnknown, unknown.value.(sandboxapi.CancelResult).State)
	require.NoError(t, wr.err, "the queued write ran after the cancelled exec")
	assert.Equal(t, int32(1), f.writes.Load())
	assert.Equal(t, int32(1), f.cancels.Load())
}

// TestCancelQueuedExecNeverRuns: an exec waiting behind another is cancelled
// without starting; a cancel of an exec that does not answer gives up on its
// wait after cancelGrace.
func TestCancelQueuedExecNeverRuns(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	env.SetTestTimeout(time.Minute)
	b := newBlockingExec(f)
	b.stuck = true
	req := *in.Request
	var acq, first, second, cancelSecond, cancelFirst updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(sandboxapi.UpdateExec, "first", &callback{&first}, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(sandboxapi.UpdateExec, "second", &callback{&second}, sandboxapi.ExecRequest{Cmd: []string{"echo", "never"}})
	}, 2*time.Second)
	update(env, 3*time.Second, sandboxapi.UpdateCancel, &cancelSecond, sandboxapi.CancelInput{UpdateID: "second"})
	update(env, 4*time.Second, sandboxapi.UpdateCancel, &cancelFirst, sandboxapi.CancelInput{UpdateID: "first"})
	update(env, 12*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, second.err)
	assert.True(t, second.value.(sandboxapi.ExecResult).Cancelled)
	assert.Equal(t, sandboxapi.CancelQueued, cancelSecond.value.(sandboxapi.CancelResult).State)
	require.NoError(t, first.err)
	assert.True(t, first.value.(sandboxapi.ExecResult).Cancelled, "abandoned after the grace period")
	assert.Equal(t, sandboxapi.CancelRunning, cancelFirst.value.(sandboxapi.CancelResult).State)
	assert.Equal(t, int32(1), f.starts.Load(), "the queued exec never started")
}

// TestHibernateCancelsTheRunningExec: hibernate does not wait for a
// command: it cancels it, then stops the runtime.
func TestHibernateCancelsTheRunningExec(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	env.SetTestTimeout(time.Minute)
	newBlockingExec(f)
	req := *in.Request
	var acq, ex, hib updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	update(env, 2*time.Second, sandboxapi.UpdateHibernate, &hib)
	update(env, time.Minute, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, ex.err)
	assert.True(t, ex.value.(sandboxapi.ExecResult).Cancelled)
	require.NoError(t, hib.err)
	assert.Equal(t, int32(1), f.cancels.Load())
	assert.GreaterOrEqual(t, f.hibernate.Load(), int32(1))
}

// TestProcessReadDoesNotWaitForARunningExec: the process updates are
// immediate: a read is answered while an exec holds the lock.
func TestProcessReadDoesNotWaitForARunningExec(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	env.SetTestTimeout(time.Minute)
	b := newBlockingExec(f)
	req := *in.Request
	var acq, ex, read updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	update(env, 2*time.Second, sandboxapi.UpdateProcessRead, &read, sandboxapi.ProcessReadInput{ProcessID: "exec-0123"})
	env.RegisterDelayedCallback(func() {
		assert.NoError(t, read.err)
		assert.NotNil(t, read.value, "the read was answered while the exec ran")
		close(b.release)
	}, 3*time.Second)
	update(env, time.Minute, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, ex.err)
	assert.Equal(t, "finished", string(ex.value.(sandboxapi.ExecResult).Stdout))
	assert.Equal(t, "out", string(read.value.(sandboxapi.ProcessReadResult).Data))
}

// TestLiveProcessDefersHibernation: a background process the session
// started keeps the runtime up to SANDBOX_PROCESS_MAX_IDLE (2 h) after its
// last use, whatever SANDBOX_IDLE_STOP (20 min) says; the session learns
// it still runs from one process_list per idle period, not per tick.
func TestLiveProcessDefersHibernation(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	var lists int
	f.processList = func() sandboxapi.ProcessListResult {
		lists++
		return sandboxapi.ProcessListResult{Processes: []sandboxapi.ProcessInfo{{ID: "proc-1"}}}
	}
	req := *in.Request
	var acq, start updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateProcessStart, &start, sandboxapi.ProcessStartInput{Cmd: []string{"server"}})
	var at90m, at2h5m int32
	var d sandboxapi.SessionDescription
	env.RegisterDelayedCallback(func() {
		at90m = f.hibernate.Load()
		v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
		require.NoError(t, err)
		require.NoError(t, v.Get(&d))
	}, 90*time.Minute)
	env.RegisterDelayedCallback(func() { at2h5m = f.hibernate.Load() }, 2*time.Hour+5*time.Minute)
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateClosed)
	require.NoError(t, start.err)
	assert.Equal(t, "proc-1", start.value.(sandboxapi.ProcessStartResult).ProcessID)
	assert.Zero(t, at90m, "not hibernated while the process is live and within its max idle")
	assert.Equal(t, 1, d.LiveProcesses)
	require.NotNil(t, d.IdleStopAt)
	assert.WithinDuration(t, d.LastActivity.Add(2*time.Hour), *d.IdleStopAt, time.Second, "the process's max idle, not the idle stop")
	assert.Equal(t, int32(1), at2h5m, "hibernated once the max idle passed")
	assert.LessOrEqual(t, lists, 6, "liveness is checked once per idle period")
	assert.Positive(t, lists)
}

// TestEndedProcessDoesNotDeferHibernation: once the session learns the
// process ended, the usual idle stop applies.
func TestEndedProcessDoesNotDeferHibernation(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	f.processList = func() sandboxapi.ProcessListResult {
		return sandboxapi.ProcessListResult{Processes: []sandboxapi.ProcessInfo{{ID: "proc-1", Exited: true}}}
	}
	req := *in.Request
	var acq, start updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateProcessStart, &start, sandboxapi.ProcessStartInput{Cmd: []string{"true"}})
	var at25m int32
	env.RegisterDelayedCallback(func() { at25m = f.hibernate.Load() }, 25*time.Minute)
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateClosed)
	assert.Equal(t, int32(1), at25m, "hibernated at the idle stop once the process was seen ended")
}

// TestProcessUpdatesValidate: bad arguments are rejected before anything runs.
func TestProcessUpdatesValidate(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	req := *in.Request
	var acq updateResult
	bad := make([]updateResult, 7)
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateProcessStart, &bad[0], sandboxapi.ProcessStartInput{})
	update(env, time.Second, sandboxapi.UpdateProcessStart, &bad[1], sandboxapi.ProcessStartInput{Cmd: []string{"x"}, PTY: &sandboxapi.TerminalSize{Rows: 0, Cols: 80}})
	update(env, time.Second, sandboxapi.UpdateProcessRead, &bad[2], sandboxapi.ProcessReadInput{ProcessID: "../x"})
	update(env, time.Second, sandboxapi.UpdateProcessRead, &bad[3], sandboxapi.ProcessReadInput{ProcessID: "p", WaitMS: 30_001})
	update(env, time.Second, sandboxapi.UpdateProcessSignal, &bad[4], sandboxapi.ProcessSignalInput{ProcessID: "p", Signal: "BOOM"})
	update(env, time.Second, sandboxapi.UpdateProcessResize, &bad[5], sandboxapi.ProcessResizeInput{ProcessID: "p", Rows: 5000, Cols: 1})
	update(env, time.Second, sandboxapi.UpdateCancel, &bad[6], sandboxapi.CancelInput{})
	update(env, 2*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	for i, b := range bad {
		var app *temporal.ApplicationError
		require.True(t, errors.As(b.rejected, &app), "update %d: want a rejection, got %v", i, b.rejected)
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type(), "update %d", i)
	}
	assert.Zero(t, f.procStarts.Load())
}

// callback records an update's outcome (for updates sent with a chosen id).
type callback struct{ out *updateResult }

func (c *callback) Accept()                   {}
func (c *callback) Reject(err error)          { c.out.rejected = err }
func (c *callback) Complete(v any, err error) { c.out.value, c.out.err = v, err }

// TestExecSkipsTheStartWhereTheSettingsSayNoProcesses: on a runtime the
// settings say runs no processes (remote runtimes) the exec activity runs
// the command at once; nothing asks ExecStart first. Where they say it
// does, the start comes first, as it does when they say nothing; and when
// they say nothing and ExecStart answers that the runtime has no
// processes, the exec activity runs the command (the way before).
func TestExecSkipsTheStartWhereTheSettingsSayNoProcesses(t *testing.T) {
	for _, c := range []struct {
		name        string
		processes   *bool
		unsupported bool
		starts      int32
	}{{"no processes", new(false), false, 0}, {"processes", new(true), false, 1}, {"not said", nil, false, 1},
		{"not said, none there", nil, true, 1}} {
		t.Run(c.name, func(t *testing.T) {
			env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
			f.processes = c.processes
			if c.unsupported {
				f.execStart = func(wire.ExecActivityInput) wire.ExecStartResult { return wire.ExecStartResult{Unsupported: true} }
			}
			req := *in.Request
			var acq, ex updateResult
			update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
			update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"true"}})
			update(env, time.Minute, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
			env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
			requireDormant(t, env, sandboxapi.StateReleased)
			require.NoError(t, ex.err)
			assert.Equal(t, "ok\n", string(ex.value.(sandboxapi.ExecResult).Stdout))
			assert.Equal(t, c.starts, f.starts.Load(), "ExecStart calls")
			assert.Equal(t, int32(1), f.execs.Load(), "the command ran once")
			assert.Zero(t, f.waits.Load())
		})
	}
}
