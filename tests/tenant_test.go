package tests

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestTenantsWithTheSameConversationIDShareNothing (docs/SECURITY.md
// "Tenant isolation"): alice and bob, each with conversation c1 on one
// repository, get different branches (agent/<tenant>/edits-c1) and
// worktrees; alice's commit is not on bob's branch; bob cannot take
// alice's branch as his branch_name, and the refusal names neither alice
// nor her path.
func TestTenantsWithTheSameConversationIDShareNothing(t *testing.T) {
	h := startHost(t, "tenants")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "shared"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 3*time.Minute)
	alice, bob := uniq(t, "alice"), uniq(t, "bob")

	sA, hA, err := h.client.Acquire(ctx, editRequest(alice, "p1", "c1", url))
	require.NoError(t, err)
	sB, hB, err := h.client.Acquire(ctx, editRequest(bob, "p1", "c1", url))
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.EditBranch(alice, "p1", "c1"), hA.Branch)
	assert.Equal(t, sandboxapi.EditBranch(bob, "p1", "c1"), hB.Branch)
	assert.NotEqual(t, hA.Branch, hB.Branch)
	assert.NotEqual(t, hA.LocalPath, hB.LocalPath)
	// Another project of the same user is another tenant too.
	_, hA2, err := h.client.Acquire(ctx, editRequest(alice, "p2", "c1", url))
	require.NoError(t, err)
	assert.NotEqual(t, hA.Branch, hA2.Branch)

	require.NoError(t, sA.WriteFile(ctx, "secret.txt", []byte("alice's unpushed work\n"), 0))
	cA, err := sA.Commit(ctx, sandboxapi.CommitRequest{Message: "alice: private"})
	require.NoError(t, err)
	res, err := sB.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "git log --format=%H HEAD; ls"}})
	require.NoError(t, err)
	assert.NotContains(t, string(res.Stdout), cA.Commit, "bob's branch does not hold alice's commit")
	assert.NotContains(t, string(res.Stdout), "secret.txt")

	steal := editRequest(bob, "p1", "c2", url)
	steal.BranchName = hA.Branch
	_, _, err = h.client.Acquire(ctx, steal)
	require.Error(t, err)
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	legacyLike := editRequest(bob, "p1", "c3", url)
	legacyLike.BranchName = "agent/shared-" + strconv.Itoa(int(time.Now().UnixNano()%1000))
	own := editRequest(alice, "p1", "c4", url)
	own.BranchName = legacyLike.BranchName
	_, hOwn, err := h.client.Acquire(ctx, own)
	require.NoError(t, err)
	_, _, err = h.client.Acquire(ctx, legacyLike)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrConflict), "%v", err)
	for _, leak := range []string{alice, hOwn.LocalPath, hOwn.WorkspaceID} {
		assert.NotContains(t, err.Error(), leak)
	}
}

// TestSessionBindingAndOneExecAtATime: an update-with-start acquire under a
// workflow id other than the one Identity derives, naming an existing
// workspace, is refused with SandboxConflict and changes nothing; and two
// execs of one workspace sent at once never run at the same time.
func TestSessionBindingAndOneExecAtATime(t *testing.T) {
	h := startHost(t, "binding")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "bound"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")
	req := editRequest(user, "p1", "c1", url)
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)

	for _, id := range []string{"evil-" + uniq(t, "w"), sandboxapi.WorkflowIDPrefix + "000000000000000000000000"} {
		op := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: id, TaskQueue: h.Config.TaskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: hd.WorkspaceID, Request: &req})
		uh, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateName: sandboxapi.UpdateAcquire, Args: []any{sandboxapi.AcquireInput{Request: &req}},
				WaitForStage: client.WorkflowUpdateStageCompleted}})
		if err == nil {
			err = uh.Get(ctx, nil)
		}
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%s: %v", id, err)
		assert.Equal(t, sandboxapi.ErrConflict.Type, app.Type(), "%s: %v", id, err)
		assert.NotContains(t, app.Message(), hd.WorkspaceID)
		// And an exec sent to it is refused too, while its run lasts.
		if uh, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: sandboxapi.UpdateExec,
			Args: []any{sandboxapi.ExecRequest{Cmd: []string{"touch", "foreign"}}}, WaitForStage: client.WorkflowUpdateStageCompleted}); err == nil {
			err = uh.Get(ctx, nil)
			require.Error(t, err)
		}
		require.Eventually(t, func() bool {
			d, err := tc.DescribeWorkflowExecution(ctx, id, "")
			return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		}, 30*time.Second, 200*time.Millisecond, "the foreign run ends")
	}
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "nothing changed in the workspace: %+v", st)

	// Two execs at once: each notes its start and end (nanoseconds); the
	// intervals never overlap.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "date +%s%N; sleep 1; date +%s%N"}})
			outs[i], errs[i] = string(r.Stdout), err
		}()
	}
	wg.Wait()
	var spans [2][2]int64
	for i, o := range outs {
		require.NoError(t, errs[i])
		f := strings.Fields(o)
		require.Len(t, f, 2, o)
		for j := range 2 {
			spans[i][j], err = strconv.ParseInt(f[j], 10, 64)
			require.NoError(t, err)
		}
	}
	overlap := spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1]
	assert.False(t, overlap, "two execs of one workspace ran at once: %v", spans)
}
