package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// runEnd is what the Web UI shows of a session's latest run: its status,
// its SandboxState search attribute and, for a failed run, its failure's
// type and message.
type runEnd struct {
	status      enumspb.WorkflowExecutionStatus
	state       string
	failureType string
	failure     string
}

// latestRunEnd reads runEnd of wfID's latest run through the Temporal API
// (DescribeWorkflowExecution and the run's close event).
func latestRunEnd(t *testing.T, wfID string) runEnd {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	d, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
	require.NoError(t, err)
	info := d.GetWorkflowExecutionInfo()
	e := runEnd{status: info.GetStatus()}
	if p := info.GetSearchAttributes().GetIndexedFields()[sandboxapi.SearchAttrState]; p != nil {
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &e.state))
	}
	if e.status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		events := history(t, wfID, info.GetExecution().GetRunId()).GetEvents()
		f := events[len(events)-1].GetWorkflowExecutionFailedEventAttributes().GetFailure()
		e.failureType, e.failure = f.GetApplicationFailureInfo().GetType(), f.GetMessage()
	}
	return e
}

// startWithUpdate sends update name with arg by update-with-start to the
// session of wsID (started with in, a sandboxapi.SessionInput or any
// other JSON), raw, as a client in another language would, and returns the
// update's error.
func startWithUpdate(t *testing.T, h *testHost, wsID string, in any, name string, arg any) error {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	wfID, err := sandboxapi.SessionWorkflowID(wsID)
	require.NoError(t, err)
	op := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: wfID, TaskQueue: h.Config.TaskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(sandboxapi.SessionStartSearchAttributes(wsID, nil)...),
	}, sandboxapi.SessionWorkflowType, in)
	uh, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	if err == nil {
		err = uh.Get(ctx, nil)
	}
	return err
}

// replayRuns replays every run of wfID against the workflow code.
func replayRuns(t *testing.T, wfID string) {
	t.Helper()
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	for _, runID := range runIDs(t, wfID) {
		require.NoError(t, replayer.ReplayWorkflowHistory(nil, history(t, wfID, runID)), "run %s", runID)
	}
}

// TestRefusedFirstUpdateEndsTheRunAtOnce: a session run started by an
// update that is refused for bad input (an acquire naming another key's
// request, a destroy or an exec whose argument does not decode or
// validate) has ended, Failed with the refusal, by the time the caller
// gets the refusal, with SandboxState failed; it never shows in the
// workspace listing (docs/API.md "Listing workspaces"). Before, the run
// stayed open (and listed, as acquiring) for 15 s, then completed.
func TestRefusedFirstUpdateEndsTheRunAtOnce(t *testing.T) {
	h := startHost(t, "refused")
	ctx := ctxFor(t, 2*time.Minute)
	user := uniq(t, "u")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "refused"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)

	other := editRequest(user, "p", "c-other", url)
	cases := []struct {
		name, update string
		start        bool // the start names the request (an acquire's)
		arg          any
	}{
		{"acquire of another key", sandboxapi.UpdateAcquire, true, sandboxapi.AcquireInput{Request: &other}},
		{"destroy that does not decode", sandboxapi.UpdateDestroy, false, map[string]any{"discard": "yes"}},
		{"exec without a command", sandboxapi.UpdateExec, false, sandboxapi.ExecRequest{}},
	}
	for i, c := range cases {
		req := editRequest(user, "p", fmt.Sprintf("c-%d", i), url)
		wsID := sandboxapi.WorkspaceIDForKey(req.Key())
		wfID, _ := sandboxapi.SessionWorkflowID(wsID)
		in := sandboxapi.SessionInput{WorkspaceID: wsID}
		if c.start {
			in.Request = &req
		}
		err := startWithUpdate(t, h, wsID, in, c.update, c.arg)
		require.Error(t, err, c.name)
		require.True(t, sandboxapi.IsInvalidArgument(sandboxapi.FromTemporal(err)), "%s: %v", c.name, err)

		// No wait: the run ended with the refusal.
		e := latestRunEnd(t, wfID)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, e.status, c.name)
		assert.Equal(t, sandboxapi.StateFailed, e.state, c.name)
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, e.failureType, c.name)
		v, qerr := tc.QueryWorkflow(ctx, wfID, "", sandboxapi.QueryDescribe)
		require.NoError(t, qerr)
		var d sandboxapi.SessionDescription
		require.NoError(t, v.Get(&d))
		assert.Equal(t, sandboxapi.StateFailed, d.State, c.name)
		assert.NotEmpty(t, d.LastError, c.name)
		replayRuns(t, wfID)
	}
	filter := fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrWorkspace, "none")
	for i := range cases {
		filter += fmt.Sprintf(" OR %s = '%s'", sandboxapi.SearchAttrWorkspace, sandboxapi.WorkspaceIDForKey(editRequest(user, "p", fmt.Sprintf("c-%d", i), url).Key()))
	}
	require.Eventually(t, func() bool {
		list, err := h.client.ListSessions(ctx, "("+filter+")", 0)
		return err == nil && len(list) == 0
	}, 5*time.Second, 100*time.Millisecond, "a refused session is never listed as a workspace")

	// A run whose argument does not decode fails within a second, its
	// state failed (before: left acquiring).
	wsID := sandboxapi.WorkspaceIDForKey(editRequest(user, "p", "c-undecodable", url).Key())
	wfID, _ := sandboxapi.SessionWorkflowID(wsID)
	err := startWithUpdate(t, h, wsID, map[string]any{"workspace_id": wsID, "requests": nil}, sandboxapi.UpdateAcquire, sandboxapi.AcquireInput{})
	require.True(t, sandboxapi.IsInvalidArgument(sandboxapi.FromTemporal(err)), "%v", err)
	require.Eventually(t, func() bool {
		return latestRunEnd(t, wfID).status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, 10*time.Second, 100*time.Millisecond)
	e := latestRunEnd(t, wfID)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, e.status)
	assert.Equal(t, sandboxapi.StateFailed, e.state)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, e.failureType)
	replayRuns(t, wfID)
}

// TestFailedAcquireRunFails: a session whose first acquire fails (no such
// repository) ends Failed with the acquire's error type (the Web UI's
// Failures view counts it) and SandboxState failed; before, it
// completed.
func TestFailedAcquireRunFails(t *testing.T) {
	h := startHost(t, "acqfail")
	ctx := ctxFor(t, 2*time.Minute)
	req := editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(filepath.Join(t.TempDir(), "team", "nothing")))
	_, _, err := h.client.Acquire(ctx, req)
	require.Error(t, err)
	app := sandboxapi.KindOf(err)
	require.NotNil(t, app, "%v", err)
	wfID, _ := sandboxapi.SessionWorkflowID(sandboxapi.WorkspaceIDForKey(req.Key()))
	e := latestRunEnd(t, wfID)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, e.status)
	assert.Equal(t, sandboxapi.StateFailed, e.state)
	assert.Equal(t, app.Type, e.failureType)
	assert.NotEmpty(t, e.failure)
	replayRuns(t, wfID)
}

// TestCallsAfterDestroyKeepItDestroyed: after destroy, a call through the
// client fails WorkspaceNotFound (saying the workspace was destroyed)
// without starting another run, so describe still says destroyed and the
// Web UI gains no row; a client that resumes by id anyway (update-with-
// start acquire with no request, docs/API.md "Session states") of a
// workspace whose destroy kept work gets the same error from a run that
// ends at once with SandboxState destroyed.
// Before, the client's resume left a run whose state was failed.
func TestCallsAfterDestroyKeepItDestroyed(t *testing.T) {
	h := startHost(t, "afterdestroy")
	ctx := ctxFor(t, 2*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "gone"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	user := uniq(t, "u")
	s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	// Uncommitted work: the destroy keeps a backup, and the workspace's
	// row stays as a tombstone that a resume by id finds.
	require.NoError(t, s.WriteFile(ctx, "work.txt", []byte("w\n"), 0))
	_, err = s.Destroy(ctx, false)
	require.NoError(t, err)
	runs := len(runIDs(t, hd.WorkflowID))

	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.Error(t, err)
	assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
	assert.Contains(t, err.Error(), "destroyed")
	_, err = s.ReadFile(ctx, "README.md")
	assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
	assert.Len(t, runIDs(t, hd.WorkflowID), runs, "no run was started for the calls")
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateDestroyed, d.State)
	e := latestRunEnd(t, hd.WorkflowID)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, e.status)
	assert.Equal(t, sandboxapi.StateDestroyed, e.state)

	// A raw resume by id starts a run: it says destroyed, not failed.
	err = startWithUpdate(t, h, hd.WorkspaceID, sandboxapi.SessionInput{WorkspaceID: hd.WorkspaceID}, sandboxapi.UpdateAcquire, sandboxapi.AcquireInput{})
	require.Error(t, err)
	assert.True(t, sandboxapi.IsWorkspaceNotFound(sandboxapi.FromTemporal(err)), "%v", err)
	assert.Contains(t, err.Error(), "destroyed")
	e = latestRunEnd(t, hd.WorkflowID)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, e.status)
	assert.Equal(t, sandboxapi.StateDestroyed, e.state)
	assert.Equal(t, sandboxapi.ErrWorkspaceNotFound.Type, e.failureType)
	d, err = s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateDestroyed, d.State)
	listedSoon(t, h.client, fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrUser, user))
	replayRuns(t, hd.WorkflowID)
}
