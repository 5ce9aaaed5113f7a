package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// fakeActivities stand in for the worker's activities (which need git and a
// store) so that the workflow's own logic — locking, validators, idle timers,
// continue-as-new — is tested deterministically with a skipping clock.
type fakeActivities struct {
	mode     sandboxapi.WorkspaceMode
	execs    atomic.Int32
	acquires atomic.Int32
	// exists: Locate finds the workspace (a resume by id works).
	exists bool
	// processes, when set, is the settings' RuntimeProcesses (nil: not
	// said, as in runs recorded before it existed).
	processes *bool
	writes    atomic.Int32
	hibernate atomic.Int32
	destroy   atomic.Int32
	// Optional hooks run inside the exec, write_file and read_file activities.
	onExec, onWrite, onRead func()
	// Exec on processes (session_proc_test.go): execStart answers
	// ExecStart (nil: the command ends at once); execWait serves the
	// waiting exec activity (with a process id); execCancel ExecCancel;
	// processList ProcessList. starts and waits count the calls.
	execStart   func(in wire.ExecActivityInput) wire.ExecStartResult
	execWait    func(ctx context.Context, in wire.ExecActivityInput) (sandboxapi.ExecResult, error)
	execCancel  func(in wire.ExecCancelInput)
	processList func() sandboxapi.ProcessListResult
	starts      atomic.Int32
	waits       atomic.Int32
	cancels     atomic.Int32
	procStarts  atomic.Int32
	waitInputs  chan wire.ExecActivityInput
}

const testHost = "h1"

func (f *fakeActivities) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context, wire.WorkspaceActivityInput) (wire.LocateResult, error) {
		if f.exists {
			return wire.LocateResult{HostID: testHost, Exists: true}, nil
		}
		return wire.LocateResult{}, nil
	}, wire.ActivityLocate)
	reg(func(_ context.Context, in wire.AcquireActivityInput) (wire.AcquireActivityResult, error) {
		f.acquires.Add(1)
		ws := sandboxapi.Workspace{ID: in.WorkspaceID, Mode: f.mode, HostID: testHost, BranchName: "agent/edits-c", UserID: "u", ProjectID: "p",
			Capabilities: sandboxapi.CapabilitiesFromMode(f.mode, false), Repo: sandboxapi.RepoIdentity{Host: "example.com", Owner: "o", Name: "r", URL: "https://example.com/o/r.git"}}
		return wire.AcquireActivityResult{Workspace: ws, Created: true,
			Settings: wire.SessionSettings{IdleStop: 20 * time.Minute, IdleClose: 6 * time.Hour, RuntimeKind: "local", RuntimeProcesses: f.processes}}, nil
	}, wire.ActivityAcquire)
	reg(func(ctx context.Context, in wire.ExecActivityInput) (sandboxapi.ExecResult, error) {
		if in.ProcessID != "" {
			f.waits.Add(1)
			if f.waitInputs != nil {
				f.waitInputs <- in
			}
			return f.execWait(ctx, in)
		}
		f.execs.Add(1)
		if f.onExec != nil {
			f.onExec()
		}
		return sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("ok\n")}, nil
	}, wire.ActivityExec)
	reg(func(_ context.Context, in wire.ExecActivityInput) (wire.ExecStartResult, error) {
		f.starts.Add(1)
		if f.execStart != nil {
			return f.execStart(in), nil
		}
		f.execs.Add(1)
		if f.onExec != nil {
			f.onExec()
		}
		return wire.ExecStartResult{Done: true, Result: sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("ok\n")}}, nil
	}, wire.ActivityExecStart)
	reg(func(_ context.Context, in wire.ExecCancelInput) (wire.ExecCancelResult, error) {
		f.cancels.Add(1)
		if f.execCancel != nil {
			f.execCancel(in)
		}
		return wire.ExecCancelResult{Ended: true}, nil
	}, wire.ActivityExecCancel)
	reg(func(_ context.Context, in wire.OpInput[sandboxapi.ProcessStartInput]) (sandboxapi.ProcessStartResult, error) {
		n := f.procStarts.Add(1)
		id := fmt.Sprintf("proc-%d", n)
		return sandboxapi.ProcessStartResult{ProcessID: id, Process: sandboxapi.ProcessInfo{ID: id, Cmd: in.Request.Cmd}}, nil
	}, wire.ActivityProcessStart)
	reg(func(_ context.Context, in wire.ProcessReadActivityInput) (sandboxapi.ProcessReadResult, error) {
		return sandboxapi.ProcessReadResult{ProcessID: in.Request.ProcessID, Data: []byte("out"), Offset: in.Request.Offset, NextOffset: in.Request.Offset + 3,
			Process: sandboxapi.ProcessInfo{ID: in.Request.ProcessID}}, nil
	}, wire.ActivityProcessRead)
	reg(func(_ context.Context, in wire.WorkspaceActivityInput) (sandboxapi.ProcessListResult, error) {
		if f.processList != nil {
			return f.processList(), nil
		}
		return sandboxapi.ProcessListResult{}, nil
	}, wire.ActivityProcessList)
	reg(func(_ context.Context, in wire.FileActivityInput) (sandboxapi.WriteFileResult, error) {
		f.writes.Add(1)
		if f.onWrite != nil {
			f.onWrite()
		}
		return sandboxapi.WriteFileResult{Path: in.Path, Bytes: int64(len(in.Content))}, nil
	}, wire.OpActivity(sandboxapi.UpdateWriteFile))
	reg(func(_ context.Context, in wire.FileActivityInput) (sandboxapi.ReadFileResult, error) {
		if f.onRead != nil {
			f.onRead()
		}
		return sandboxapi.ReadFileResult{Path: in.Path, Content: []byte("x")}, nil
	}, wire.OpActivity(sandboxapi.UpdateReadFile))
	reg(func(_ context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
		f.hibernate.Add(1)
		return sandboxapi.HibernateResult{RuntimeID: sandboxapi.RuntimeIDFor(in.WorkspaceID), Stopped: true}, nil
	}, wire.ActivityHibernate)
	reg(func(_ context.Context, in wire.WorkspaceActivityInput) (sandboxapi.HibernateResult, error) {
		f.destroy.Add(1)
		return sandboxapi.HibernateResult{RuntimeID: sandboxapi.RuntimeIDFor(in.WorkspaceID), Stopped: true}, nil
	}, wire.ActivityDestroyRuntime)
}

func testRequest(mode sandboxapi.WorkspaceMode) sandboxapi.WorkspaceRequest {
	r := sandboxapi.WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "https://example.com/o/r.git", Mode: mode}
	if mode == sandboxapi.ModeEdit {
		r.ConversationID = "c"
	}
	return r
}

type updateResult struct {
	rejected error
	err      error
	value    any
}

// updateSeq makes every update id unique (an update id seen before is deduplicated).
var updateSeq atomic.Int64

// update sends an update at the given offset and records its outcome.
func update(env *testsuite.TestWorkflowEnvironment, at time.Duration, name string, out *updateResult, args ...any) {
	id := fmt.Sprintf("%s-%s-%d", name, at, updateSeq.Add(1))
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { out.rejected = err },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { out.value, out.err = v, err },
		}, args...)
	}, at)
}

func newEnv(t *testing.T, mode sandboxapi.WorkspaceMode, taskQueue string) (*testsuite.TestWorkflowEnvironment, *fakeActivities, sandboxapi.SessionInput) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	f := &fakeActivities{mode: mode}
	f.register(env)
	req := testRequest(mode)
	wsID := sandboxapi.WorkspaceIDForKey(req.Key())
	// The session's own workflow id: a run under any other is refused
	// (checkBinding).
	wfID, _ := sandboxapi.SessionWorkflowID(wsID)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wfID, TaskQueue: taskQueue})
	return env, f, sandboxapi.SessionInput{WorkspaceID: wsID, Request: &req}
}

func TestSessionIdleHibernatesThenCloses(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	var acq, ex updateResult
	req := *in.Request
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateExec, &ex, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)

	require.True(t, env.IsWorkflowCompleted())
	requireDormant(t, env, sandboxapi.StateClosed)
	require.NoError(t, acq.err)
	require.NoError(t, ex.err)
	assert.Equal(t, int32(1), f.execs.Load())
	assert.Equal(t, int32(1), f.hibernate.Load(), "hibernated once after the idle-stop period")
	assert.Equal(t, int32(1), f.destroy.Load(), "destroyed once after the idle-close period")
	var d sandboxapi.SessionDescription
	v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateClosed, d.State)
	assert.False(t, d.RuntimeRunning)
}

func TestSessionMovesToItsHostQueueAfterAcquire(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, sandboxapi.DefaultTaskQueue)
	var acq updateResult
	req := *in.Request
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, acq.err)
	h, ok := acq.value.(sandboxapi.Handle)
	require.True(t, ok, "%T", acq.value)
	assert.Equal(t, testHost, h.HostID)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	assert.Equal(t, wire.HostTaskQueue(testHost), can.TaskQueueName)
}

func TestSessionValidatorsRejectWithoutRunningActivities(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeAnalysis, wire.HostTaskQueue(testHost))
	in.Request.ConversationID = ""
	req := *in.Request
	var acq, write, escape, empty, ok updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	update(env, time.Second, sandboxapi.UpdateWriteFile, &write, sandboxapi.WriteFileInput{Path: "a.txt", Content: []byte("x")})
	update(env, 2*time.Second, sandboxapi.UpdateReadFile, &escape, sandboxapi.ReadFileInput{Path: "../etc/passwd"})
	update(env, 3*time.Second, sandboxapi.UpdateExec, &empty, sandboxapi.ExecRequest{})
	update(env, 4*time.Second, sandboxapi.UpdateReadFile, &ok, sandboxapi.ReadFileInput{Path: "a.txt"})
	update(env, 5*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)

	assertType := func(err error, kind *sandboxapi.Kind) {
		t.Helper()
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "want an application error, got %v", err)
		assert.Equal(t, kind.Type, app.Type())
	}
	assertType(write.rejected, sandboxapi.ErrCommandRejected)
	assertType(escape.rejected, sandboxapi.ErrInvalidWorkspacePath)
	assertType(empty.rejected, sandboxapi.ErrInvalidArgument)
	assert.Equal(t, int32(0), f.writes.Load())
	assert.Equal(t, int32(0), f.execs.Load())
	assert.NoError(t, ok.rejected)
	assert.NoError(t, ok.err)
}

func TestSessionRejectsAnotherKeysRequest(t *testing.T) {
	env, _, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	other := testRequest(sandboxapi.ModeEdit)
	other.ConversationID = "someone-else"
	var acq updateResult
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &other})
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Minute)
	start := env.Now()
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	// The run's first update: accepted, refused by its handler, and the
	// run fails with the refusal at once (changeFailedRun).
	require.NoError(t, acq.rejected)
	var app *temporal.ApplicationError
	require.True(t, errors.As(acq.err, &app), "%v", acq.err)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
	require.True(t, env.IsWorkflowCompleted())
	require.True(t, errors.As(env.GetWorkflowError(), &app), "%v", env.GetWorkflowError())
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
	assert.Less(t, env.Now().Sub(start), time.Second, "no wait for another acquire")
	v, err := env.QueryWorkflow(sandboxapi.QueryDescribe)
	require.NoError(t, err)
	var d sandboxapi.SessionDescription
	require.NoError(t, v.Get(&d))
	assert.Equal(t, sandboxapi.StateFailed, d.State)
}

// TestMutatingUpdatesAreSerializedAndReadsConcurrent: exec and write_file
// never run at the same time as each other or as a read, while two reads
// sent together do run at the same time (each read waits, up to 2 s of real
// time, to see the other inside; serialized reads would never see it).
func TestMutatingUpdatesAreSerializedAndReadsConcurrent(t *testing.T) {
	env, f, in := newEnv(t, sandboxapi.ModeEdit, wire.HostTaskQueue(testHost))
	env.SetTestTimeout(time.Minute)
	var mutating, maxMutating, reading, readOverlapsWriter, readsSawTwo atomic.Int32
	mutate := func() {
		n := mutating.Add(1)
		for m := maxMutating.Load(); n > m && !maxMutating.CompareAndSwap(m, n); m = maxMutating.Load() {
		}
		if reading.Load() > 0 {
			readOverlapsWriter.Add(1)
		}
		time.Sleep(30 * time.Millisecond)
		mutating.Add(-1)
	}
	f.onExec, f.onWrite = mutate, mutate
	var phase2 atomic.Bool
	f.onRead = func() {
		reading.Add(1)
		defer reading.Add(-1)
		if mutating.Load() > 0 {
			readOverlapsWriter.Add(1)
		}
		if !phase2.Load() {
			time.Sleep(30 * time.Millisecond)
			return
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if reading.Load() == 2 {
				readsSawTwo.Add(1)
				time.Sleep(50 * time.Millisecond) // let the other read see two as well
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	req := *in.Request
	var acq updateResult
	ops := make([]updateResult, 7)
	update(env, 0, sandboxapi.UpdateAcquire, &acq, sandboxapi.AcquireInput{Request: &req})
	// Phase 1: three mutating updates and a read, all at once.
	update(env, time.Second, sandboxapi.UpdateExec, &ops[0], sandboxapi.ExecRequest{Cmd: []string{"a"}})
	update(env, time.Second, sandboxapi.UpdateWriteFile, &ops[1], sandboxapi.WriteFileInput{Path: "w.txt", Content: []byte("x")})
	update(env, time.Second, sandboxapi.UpdateExec, &ops[2], sandboxapi.ExecRequest{Cmd: []string{"b"}})
	update(env, time.Second, sandboxapi.UpdateReadFile, &ops[3], sandboxapi.ReadFileInput{Path: "r.txt"})
	update(env, time.Second, sandboxapi.UpdateWriteFile, &ops[4], sandboxapi.WriteFileInput{Path: "v.txt", Content: []byte("y")})
	// Phase 2: two reads at once.
	env.RegisterDelayedCallback(func() { phase2.Store(true) }, 9*time.Second)
	update(env, 10*time.Second, sandboxapi.UpdateReadFile, &ops[5], sandboxapi.ReadFileInput{Path: "r1.txt"})
	update(env, 10*time.Second, sandboxapi.UpdateReadFile, &ops[6], sandboxapi.ReadFileInput{Path: "r2.txt"})
	update(env, 20*time.Second, sandboxapi.UpdateRelease, &updateResult{}, sandboxapi.ReleaseInput{})
	env.ExecuteWorkflow(sandboxapi.SessionWorkflowType, in)
	requireDormant(t, env, sandboxapi.StateReleased)
	require.NoError(t, acq.err)
	for i, op := range ops {
		require.NoError(t, op.rejected, "op %d", i)
		require.NoError(t, op.err, "op %d", i)
	}
	assert.Equal(t, int32(2), f.execs.Load())
	assert.Equal(t, int32(2), f.writes.Load())
	assert.Equal(t, int32(1), maxMutating.Load(), "two mutating updates ran at the same time")
	assert.Zero(t, readOverlapsWriter.Load(), "a read ran while a mutating update did")
	assert.Equal(t, int32(2), readsSawTwo.Load(), "the two reads did not run at the same time")
}

// requireDormant asserts that the run ended by continuing as new into a
// dormant run of the same workspace in state (docs/API.md "Session
// states"), on the same task queue, with no runtime running.
func requireDormant(t *testing.T, env *testsuite.TestWorkflowEnvironment, state string) wire.SessionCarry {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new into a dormant run, got %v", env.GetWorkflowError())
	var in wire.SessionRunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	require.NotNil(t, in.Carry)
	assert.True(t, in.Carry.Dormant, "dormant")
	assert.Equal(t, state, in.Carry.State)
	assert.False(t, in.Carry.RuntimeRunning)
	return *in.Carry
}
