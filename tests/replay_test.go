package tests

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// updateHistoriesEnv, set to 1, rewrites the recorded histories that
// workflows.TestReplayRecordedHistories replays against the workflow code.
const updateHistoriesEnv = "SANDBOXCORE_UPDATE_HISTORIES"

// The prefixes of the files TestSessionHistoriesReplay and
// TestSessionProcessHistoriesReplay write: a new prefix per workflow change
// keeps the histories recorded before it (session-idle-timer-run-* before
// the lifecycle phase and the retired GetVersion branches).
const (
	recordedHistoryPrefix = "session-phase-run"
	recordedProcessPrefix = "session-phase-process-run"
	recordedStreamPrefix  = "stream-phase-run"
)

// TestSessionHistoriesReplay drives a whole session lifecycle (acquire,
// continue-as-new onto the host queue, every update, hibernate, release) and
// replays every run's history against the current workflow code: a
// non-deterministic change fails here.
func TestSessionHistoriesReplay(t *testing.T) {
	h := startHost(t, "replay")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	require.NoError(t, s.WriteFile(ctx, "a.txt", []byte("a\n"), 0))
	_, err := s.ReadFile(ctx, "a.txt")
	require.NoError(t, err)
	_, err = s.ListDir(ctx, "")
	require.NoError(t, err)
	_, err = s.Search(ctx, sandboxapi.SearchRequest{Pattern: "a"})
	require.NoError(t, err)
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo hi"}})
	require.NoError(t, err)
	_, err = s.Status(ctx)
	require.NoError(t, err)
	_, err = s.Diff(ctx)
	require.NoError(t, err)
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "m"})
	require.NoError(t, err)
	_, err = s.ReadFile(ctx, "../escape")
	require.Error(t, err)
	_, err = s.Hibernate(ctx)
	require.NoError(t, err)
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hd.WorkflowID, 30*time.Second)

	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	runs := 0
	for _, runID := range runIDs(t, hd.WorkflowID) {
		hist := history(t, hd.WorkflowID, runID)
		require.NoError(t, replayed(replayer, hist), "run %s", runID)
		runs++
		if os.Getenv(updateHistoriesEnv) == "1" {
			data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
			require.NoError(t, err)
			name := filepath.Join("..", "workflows", "testdata", "histories", fmt.Sprintf("%s-%d.json", recordedHistoryPrefix, runs))
			require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
			require.NoError(t, os.WriteFile(name, data, 0o644))
		}
	}
	require.GreaterOrEqual(t, runs, 2, "the session continued as new onto its host queue")
}

// replayed replays hist with replayer, on a copy: the SDK's replayer keeps
// the started event's search attributes by reference and merges the run's
// upserts into them, so a history replayed in place no longer says what
// its run started with, and a recording of it fails a fresh replay (a
// session run then publishes no SandboxDirty it already "has"). opts, at
// most one, replays it as that execution.
func replayed(replayer worker.WorkflowReplayer, hist *historypb.History, opts ...worker.ReplayWorkflowHistoryOptions) error {
	copied := proto.Clone(hist).(*historypb.History)
	if len(opts) > 0 {
		return replayer.ReplayWorkflowHistoryWithOptions(nil, copied, opts[0])
	}
	return replayer.ReplayWorkflowHistory(nil, copied)
}

// runIDs lists the runs of a workflow id, oldest first.
func runIDs(t *testing.T, wfID string) []string {
	var ids []string
	iter, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: "WorkflowId = '" + wfID + "'"})
	require.NoError(t, err)
	for i := len(iter.Executions) - 1; i >= 0; i-- {
		ids = append(ids, iter.Executions[i].GetExecution().GetRunId())
	}
	return ids
}

func history(t *testing.T, wfID, runID string) *historypb.History {
	iter := tc.GetWorkflowHistory(context.Background(), wfID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

// TestSessionProcessHistoriesReplay drives exec on processes (a short
// command, a long one waited for, a cancelled one, one cancelled by
// hibernate), the process updates and the stream workflow, and replays the
// histories of every run of the session and of its stream workflow
// (recorded with SANDBOXCORE_UPDATE_HISTORIES=1 -run thisTest as
// recordedProcessPrefix-N.json and stream-histories/recordedStreamPrefix-N.json).
func TestSessionProcessHistoriesReplay(t *testing.T) {
	h := startHost(t, "replay-proc")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"echo", "short"}})
	require.NoError(t, err)
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "sleep 1.5; echo long"}})
	require.NoError(t, err)
	p, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: []string{"sh", "-c", "read x; echo got $x; sleep 600"}, Stdin: true, Tag: "t"})
	require.NoError(t, err)
	_, err = s.ProcessWrite(ctx, p.ProcessID, []byte("in\n"), false)
	require.NoError(t, err)
	_, err = s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: p.ProcessID, WaitMS: 5000})
	require.NoError(t, err)
	_, err = s.StreamRead(ctx, sandboxapi.ProcessReadInput{ProcessID: p.ProcessID, WaitMS: 100})
	require.NoError(t, err)
	_, err = s.ProcessList(ctx)
	require.NoError(t, err)
	require.Error(t, s.ProcessResize(ctx, p.ProcessID, 10, 10), "no terminal")
	require.NoError(t, s.ProcessSignal(ctx, p.ProcessID, "KILL"))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = s.Exec(cctx, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
	cancel()
	require.Error(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sleep", "600"}})
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	_, err = s.Hibernate(ctx)
	require.NoError(t, err)
	require.NoError(t, <-done)
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hd.WorkflowID, 30*time.Second)

	record := func(kind, wfID string, wf any, name string) int {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: name})
		runs := 0
		for _, runID := range runIDs(t, wfID) {
			hist := history(t, wfID, runID)
			require.NoError(t, replayed(replayer, hist), "run %s", runID)
			runs++
			if os.Getenv(updateHistoriesEnv) == "1" {
				data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
				require.NoError(t, err)
				file := filepath.Join("..", "workflows", "testdata", kind, fmt.Sprintf("%s-%d.json", map[string]string{"histories": recordedProcessPrefix, "stream-histories": recordedStreamPrefix}[kind], runs))
				require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				require.NoError(t, os.WriteFile(file, data, 0o644))
			}
		}
		return runs
	}
	require.GreaterOrEqual(t, record("histories", hd.WorkflowID, workflows.SessionWorkflow, sandboxapi.SessionWorkflowType), 2)
	streamID, err := sandboxapi.StreamWorkflowID(hd.WorkspaceID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, record("stream-histories", streamID, workflows.ProcessStreamWorkflow, sandboxapi.ProcessStreamWorkflowType), 1)
}

// TestCheckReplayFindsRunsThisBuildCannotReplay: sandbox-worker
// check-replay (hostworker.CheckReplay) lists the open runs through
// visibility and replays each against this build. A live session replays;
// a run recorded by other code under the session's workflow type (a
// stand-in for a run older than a retired change: it scheduled an activity
// and never recorded the retired changes' markers) is reported.
func TestCheckReplayFindsRunsThisBuildCannotReplay(t *testing.T) {
	h := startHost(t, "replaycheck")
	_, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)

	queue := uniq(t, "older-code")
	older := worker.New(tc, queue, worker.Options{})
	older.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ converter.RawValue) error {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Hour})
		return workflow.ExecuteActivity(actx, "sandbox.Older").Get(ctx, nil)
	}, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	require.NoError(t, older.Start())
	t.Cleanup(older.Stop)
	olderID := uniq(t, "session-older")
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: olderID, TaskQueue: queue}, sandboxapi.SessionWorkflowType,
		wire.SessionRunInput{WorkspaceID: hd.WorkspaceID})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), olderID, run.GetRunID(), "test over") })

	// A session run whose worker went away with a task scheduled (a run
	// of a stopped host): what its last completed task recorded (its
	// version markers follow that task's completion) replays; the task in
	// flight is not replayed.
	pendingQueue := uniq(t, "gone-worker")
	gone := worker.New(tc, pendingQueue, worker.Options{})
	gone.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	require.NoError(t, gone.Start())
	pendingWS := sandboxapi.WorkspaceIDForKey(uniq(t, "pending"))
	pendingID, err := sandboxapi.SessionWorkflowID(pendingWS)
	require.NoError(t, err)
	pending, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pendingID, TaskQueue: pendingQueue}, sandboxapi.SessionWorkflowType,
		wire.SessionRunInput{WorkspaceID: pendingWS})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), pendingID, pending.GetRunID(), "test over") })
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(history(t, pendingID, pending.GetRunID()).GetEvents(), func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enums.EVENT_TYPE_TIMER_STARTED // its first task completed: it waits for an acquire
		})
	}, 30*time.Second, 100*time.Millisecond)
	gone.Stop()
	require.NoError(t, tc.SignalWorkflow(ctx, pendingID, pending.GetRunID(), "nudge", nil))

	var res hostworker.ReplayCheck
	require.Eventually(t, func() bool {
		res, err = hostworker.CheckReplay(ctx, h.Config, slog.Default())
		require.NoError(t, err)
		return slices.ContainsFunc(res.Failures, func(f hostworker.ReplayFailure) bool { return f.WorkflowID == olderID })
	}, 30*time.Second, 500*time.Millisecond, "the older run is listed (visibility) and fails its replay: %+v", res)
	i := slices.IndexFunc(res.Failures, func(f hostworker.ReplayFailure) bool { return f.WorkflowID == olderID })
	assert.Equal(t, run.GetRunID(), res.Failures[i].RunID)
	// The older run never asked for session-idle-timer, a retired change:
	// exactly how a run older than a retirement fails.
	assert.Contains(t, res.Failures[i].Reason, "TMPRL1100")
	assert.False(t, slices.ContainsFunc(res.Failures, func(f hostworker.ReplayFailure) bool { return f.WorkflowID == hd.WorkflowID }),
		"the live session replays with this build: %+v", res.Failures)
	assert.False(t, slices.ContainsFunc(res.Failures, func(f hostworker.ReplayFailure) bool { return f.WorkflowID == pendingID }),
		"a run with a task in flight replays as far as its last completed task: %+v", res.Failures)
	assert.GreaterOrEqual(t, res.Replayed, 3)

	// Without an address there is no service to read: a clear refusal.
	cfg := h.Config
	cfg.TemporalAddress = ""
	_, err = hostworker.CheckReplay(ctx, cfg, slog.Default())
	require.ErrorContains(t, err, "set TEMPORAL_ADDRESS")
}
