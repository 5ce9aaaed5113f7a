package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// rawUpdate sends one update with an arbitrary (JSON-encoded) argument, as a
// client in another language would, and returns the application error it
// failed with (nil when it succeeded).
func rawUpdate(t *testing.T, wfID, name string, arg any, out any) *temporal.ApplicationError {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	opts := client.UpdateWorkflowOptions{WorkflowID: wfID, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted}
	if arg != nil {
		opts.Args = []any{arg}
	}
	h, err := tc.UpdateWorkflow(ctx, opts)
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "not an application error: %T %v", err, err)
	return app
}

func details(t *testing.T, app *temporal.ApplicationError) sandboxapi.ErrorDetails {
	t.Helper()
	var d sandboxapi.ErrorDetails
	require.True(t, app.HasDetails(), "no details on %s: %s", app.Type(), app.Message())
	require.NoError(t, app.Details(&d))
	return d
}

// An unknown field, a wrongly typed value or a malformed payload in any
// argument is InvalidArgument naming the field, before anything runs; the
// error carries its family, kind and retryability.
func TestStrictDecodingAndStructuredErrors(t *testing.T) {
	h := startHost(t, "strict")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	assert.Equal(t, sandboxapi.ContractVersion, hd.ContractVersion)
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.ContractVersion, d.ContractVersion)

	// The example of the wire: a misspelt field would have been ignored.
	start := time.Now()
	app := rawUpdate(t, hd.WorkflowID, "exec", map[string]any{"cmd": []string{"sleep", "3"}, "timeoutS": 1}, nil)
	require.NotNil(t, app)
	assert.Less(t, time.Since(start), 3*time.Second, "nothing ran")
	assert.Equal(t, "InvalidArgument", app.Type())
	assert.Contains(t, app.Message(), `"timeoutS"`)
	assert.Equal(t, sandboxapi.ErrorDetails{Family: "workspace", Kind: "InvalidArgument", Field: "timeoutS"}, details(t, app))

	cases := []struct {
		name, update string
		arg          any
		field        string
	}{
		{"case-folded key", "exec", map[string]any{"CMD": []string{"true"}}, "CMD"},
		{"wrong type", "exec", map[string]any{"cmd": []string{"true"}, "timeout_s": "1"}, "timeout_s"},
		{"wrong element type", "exec", map[string]any{"cmd": []any{"true", 3}}, "cmd[1]"},
		{"nested unknown", "acquire", map[string]any{"request": map[string]any{"user_id": "u", "colour": "red"}}, "request.colour"},
		{"bytes not base64 string", "write_file", map[string]any{"path": "a.txt", "content": []int{1, 2}}, "content"},
		{"status takes no fields", "status", map[string]any{"verbose": true}, "verbose"},
		{"not an object", "read_file", []string{"a.txt"}, ""},
	}
	for _, c := range cases {
		app := rawUpdate(t, hd.WorkflowID, c.update, c.arg, nil)
		require.NotNil(t, app, c.name)
		assert.Equal(t, "InvalidArgument", app.Type(), c.name)
		assert.Equal(t, c.field, details(t, app).Field, "%s: %s", c.name, app.Message())
	}
	// Nothing was written: the workspace is as it was.
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty)

	// A typed error's details: a sub-kind names its kind.
	app = rawUpdate(t, hd.WorkflowID, "read_file", map[string]any{"path": "no/such/file"}, nil)
	require.NotNil(t, app)
	assert.Equal(t, "FileNotFound", app.Type())
	assert.Equal(t, sandboxapi.ErrorDetails{Family: "workspace", Kind: "InvalidWorkspacePath", SubKind: "FileNotFound"}, details(t, app))
	_, err = s.ReadFile(ctx, "no/such/file")
	assert.True(t, sandboxapi.IsFileNotFound(err) && errors.Is(err, sandboxapi.ErrInvalidWorkspacePath), "%v", err)
	app = rawUpdate(t, hd.WorkflowID, "read_file", map[string]any{"path": "../../etc/passwd"}, nil)
	require.NotNil(t, app)
	assert.Equal(t, sandboxapi.ErrorDetails{Family: "workspace", Kind: "InvalidWorkspacePath"}, details(t, app))

	// Updates without an argument accept none, null or {}.
	for _, arg := range []any{nil, map[string]any{}} {
		var ds sandboxapi.Diff
		assert.Nil(t, rawUpdate(t, hd.WorkflowID, "diff", arg, &ds))
	}

	// A malformed workflow argument fails the run, and the update that came
	// with it, with InvalidArgument.
	wsID := sandboxapi.WorkspaceIDForKey("edit|u|p|bad-input")
	wfID, _ := sandboxapi.SessionWorkflowID(wsID)
	op := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: wfID, TaskQueue: h.Config.TaskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, sandboxapi.SessionWorkflowType, map[string]any{"workspace_id": wsID, "requestt": map[string]any{}})
	uh, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "acquire", Args: []any{map[string]any{}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	if err == nil {
		err = uh.Get(ctx, nil)
	}
	var uapp *temporal.ApplicationError
	require.True(t, errors.As(err, &uapp), "%v", err)
	assert.Equal(t, "InvalidArgument", uapp.Type())
	assert.Contains(t, uapp.Message(), "requestt")
}

// A rejected or failed update-with-start acquire leaves no session behind:
// its run ends within seconds and is never listed; the listing query gives
// one row per workspace, released ones included, with their state.
func TestRejectedAcquireEndsAndWorkspacesListOneRowEach(t *testing.T) {
	h := startHost(t, "listing")
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "listed"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)

	// Rejected by the acquire's validator (a request whose key is another
	// workspace's), sent raw so that the client's own checks do not stop it.
	req := editRequest(user, "p", "c-other", url)
	wsID := sandboxapi.WorkspaceIDForKey(editRequest(user, "p", "c-rejected", url).Key())
	wfID, _ := sandboxapi.SessionWorkflowID(wsID)
	op := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: wfID, TaskQueue: h.Config.TaskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(sandboxapi.SessionStartSearchAttributes(wsID, &req)...),
	}, sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: wsID, Request: &req})
	uh, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "acquire", Args: []any{sandboxapi.AcquireInput{Request: &req}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	if err == nil {
		err = uh.Get(ctx, nil)
	}
	require.Error(t, err)
	assert.True(t, sandboxapi.IsInvalidArgument(sandboxapi.FromTemporal(err)), "%v", err)
	ended := time.Now()
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, 40*time.Second, 200*time.Millisecond, "the rejected session's run still runs")
	assert.Less(t, time.Since(ended), 30*time.Second)

	// Failed by the acquire activity (no such repository).
	_, _, err = h.client.Acquire(ctx, editRequest(user, "p", "c-missing", gittest.FileURL(filepath.Join(t.TempDir(), "team", "nothing"))))
	require.Error(t, err)

	// Three workspaces: one active, one released, one hibernated; each
	// continued as new at least once (onto the host queue).
	sA, hA, err := h.client.Acquire(ctx, editRequest(user, "p", "c-a", url))
	require.NoError(t, err)
	_, err = sA.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	sB, hB, err := h.client.Acquire(ctx, editRequest(user, "p", "c-b", url))
	require.NoError(t, err)
	_, err = sB.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hB.WorkflowID, 30*time.Second)
	sC, hC, err := h.client.Acquire(ctx, sandboxapi.WorkspaceRequest{UserID: user, ProjectID: "p", RepoURL: url, Mode: sandboxapi.ModeAnalysis})
	require.NoError(t, err)
	_, err = sC.Hibernate(ctx)
	require.NoError(t, err)

	want := map[string]string{hA.WorkspaceID: sandboxapi.StateActive, hB.WorkspaceID: sandboxapi.StateReleased, hC.WorkspaceID: sandboxapi.StateIdle}
	filter := fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrUser, user)
	require.Eventually(t, func() bool {
		list, err := h.client.ListSessions(ctx, filter, 0)
		if err != nil || len(list) != len(want) {
			return false
		}
		for _, row := range list {
			if want[row.WorkspaceID] != row.State {
				return false
			}
		}
		return true
	}, 30*time.Second, 300*time.Millisecond, "one row per workspace with its state")

	// The raw query of docs/API.md gives the same rows, one each.
	resp, err := tc.ListWorkflow(ctx, listRequest(sandboxapi.ListWorkspacesQuery+" AND "+filter))
	require.NoError(t, err)
	ids := map[string]int{}
	for _, e := range resp.Executions {
		ids[e.GetExecution().GetWorkflowId()]++
	}
	assert.Len(t, ids, 3)
	for id, n := range ids {
		assert.Equal(t, 1, n, id)
	}

	// The released workspace resumes on the next operation, in its dormant run.
	res, err := sB.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "README.md"}})
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(res.Stdout))
	d, err := sB.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateActive, d.State)
}

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000}
}
