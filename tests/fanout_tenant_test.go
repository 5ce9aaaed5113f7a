package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// fanoutTenant is one tenant of the fan-out tenant tests: its conversation
// and its fan-out.
type fanoutTenant struct {
	tenant sandboxapi.Tenant
	conv   *sandboxclient.Session
	hd     sandboxapi.Handle
	f      *sandboxclient.Fanout
}

// secrets are the names of t that no other tenant may see: its user id,
// its tenant segment, its conversation's workspace id, workflow id, path
// and branch, and the workspace id of its task t1.
func (ft *fanoutTenant) secrets() []string {
	return []string{ft.tenant.UserID, ft.tenant.Segment(), ft.hd.WorkspaceID, ft.hd.WorkflowID, ft.hd.LocalPath, ft.hd.Branch,
		sandboxapi.WorkspaceIDForKey("task|" + ft.tenant.UserID + "|" + ft.tenant.ProjectID + "|t1")}
}

// assertNoneOf asserts that text names none of the other tenants' secrets.
func assertNoneOf(t *testing.T, text string, others ...*fanoutTenant) {
	t.Helper()
	for _, o := range others {
		for _, s := range o.secrets() {
			assert.NotContains(t, text, s, "names another tenant's id")
		}
	}
}

// TestFanoutTenantsShareAFanoutIDAtOnce (docs/SECURITY.md "Tenant
// isolation"): three tenants — alice and bob in one project, alice in
// another — start fan-outs with the same fan-out id and the same task id
// at the same time; all three start, run at once under three workflow ids,
// and each sees only its own conversation and tasks. Another tenant's
// lookup of that id (describe, signal, cancel, result) finds nothing and
// its error names none of theirs; bob's cancel ends only bob's fan-out;
// alice's task is merged into alice's conversation only. A fan-out started
// as mallory on alice's conversation workspace fails as not found without
// touching it, and a conversation request of another tenant is refused.
func TestFanoutTenantsShareAFanoutIDAtOnce(t *testing.T) {
	h := startHost(t, "fanouttenants")
	ctx := ctxFor(t, 5*time.Minute)
	alice, bob := uniq(t, "alice"), uniq(t, "bob")
	tenants := []*fanoutTenant{
		{tenant: sandboxapi.Tenant{UserID: alice, ProjectID: "p1"}},
		{tenant: sandboxapi.Tenant{UserID: bob, ProjectID: "p1"}},
		{tenant: sandboxapi.Tenant{UserID: alice, ProjectID: "p2"}},
	}
	a, b, a2 := tenants[0], tenants[1], tenants[2]
	others := func(ft *fanoutTenant) []*fanoutTenant {
		var out []*fanoutTenant
		for _, o := range tenants {
			if o != ft {
				out = append(out, o)
			}
		}
		return out
	}
	fid := uniq(t, "f")
	for _, ft := range tenants {
		ft.conv, ft.hd = conversationIn(t, h.client, ft.tenant.UserID, ft.tenant.ProjectID)
	}
	for _, ft := range tenants {
		f, err := h.client.StartFanout(ctx, ft.tenant, fid, sandboxapi.FanoutInput{
			ConversationWorkspaceID: ft.hd.WorkspaceID,
			Tasks:                   []sandboxapi.TaskSpec{{TaskID: "t1"}}, // an agent's: the fan-out waits for it
		})
		require.NoError(t, err, "a fan-out id is per tenant: %s/%s", ft.tenant.UserID, ft.tenant.ProjectID)
		want, err := sandboxapi.FanoutWorkflowID(ft.tenant, fid)
		require.NoError(t, err)
		assert.Equal(t, want, f.WorkflowID())
		ft.f = f
	}

	// All three wait for their agent at once, each on its own task workspace.
	for _, ft := range tenants {
		var p sandboxapi.FanoutReport
		require.Eventually(t, func() bool {
			var err error
			p, err = ft.f.Progress(ctx)
			return err == nil && len(p.Tasks) == 1 && p.Tasks[0].Status == sandboxapi.TaskWaiting
		}, time.Minute, 100*time.Millisecond)
		assert.Equal(t, fid, p.FanoutID)
		assert.Equal(t, ft.hd.WorkspaceID, p.ConversationWorkspaceID)
		assert.Equal(t, sandboxapi.WorkspaceIDForKey("task|"+ft.tenant.UserID+"|"+ft.tenant.ProjectID+"|t1"), p.Tasks[0].WorkspaceID)
		assert.Equal(t, sandboxapi.TaskBranch(ft.tenant.UserID, ft.tenant.ProjectID, "t1"), p.Tasks[0].Branch)
		js, err := json.Marshal(p)
		require.NoError(t, err)
		assertNoneOf(t, string(js), others(ft)...)
	}
	for _, ft := range tenants {
		d, err := tc.DescribeWorkflowExecution(ctx, ft.f.WorkflowID(), "")
		require.NoError(t, err)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "the three run at the same time")
		// Each lookup by the same id finds the tenant's own.
		g, err := h.client.Fanout(ctx, ft.tenant, fid)
		require.NoError(t, err)
		assert.Equal(t, ft.f.WorkflowID(), g.WorkflowID())
	}
	// Visibility lists one fan-out per tenant.
	for _, ft := range tenants {
		require.Eventually(t, func() bool {
			resp, err := tc.ListWorkflow(ctx, listFanouts(ft.tenant))
			return err == nil && len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetWorkflowId() == ft.f.WorkflowID()
		}, 10*time.Second, 100*time.Millisecond, "visibility lists exactly %s/%s's fan-out", ft.tenant.UserID, ft.tenant.ProjectID)
	}

	// Mallory (another user of project p1) and carol's project p1 have no
	// fan-out of that id: every lookup is WorkspaceNotFound, naming none of theirs.
	for _, stranger := range []sandboxapi.Tenant{{UserID: uniq(t, "mallory"), ProjectID: "p1"}, {UserID: alice, ProjectID: "p3"}} {
		_, err := h.client.Fanout(ctx, stranger, fid)
		require.Error(t, err)
		assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
		assert.Contains(t, err.Error(), fid)
		assertNoneOf(t, err.Error(), tenants...)
		t.Logf("lookup by another tenant: %v", err)
	}

	// Bob cancels his fan-out: only his ends.
	require.NoError(t, b.f.Cancel(ctx))
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(ctx, b.f.WorkflowID(), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, 30*time.Second, 100*time.Millisecond)
	for _, ft := range []*fanoutTenant{a, a2} {
		d, err := tc.DescribeWorkflowExecution(ctx, ft.f.WorkflowID(), "")
		require.NoError(t, err)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "bob's cancel left %s/%s's fan-out running", ft.tenant.UserID, ft.tenant.ProjectID)
	}

	// Alice's agent does task t1 in alice's task workspace; alice/p2's gives up.
	p, err := a.f.Progress(ctx)
	require.NoError(t, err)
	ts, err := h.client.Session(p.Tasks[0].WorkspaceID)
	require.NoError(t, err)
	require.NoError(t, ts.WriteFile(ctx, "alice.txt", []byte("alice's task\n"), 0))
	require.NoError(t, a.f.CompleteTask(ctx, "t1", true, "done"))
	require.NoError(t, a2.f.CompleteTask(ctx, "t1", false, "gave up"))
	repA, err := a.f.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.FanoutCompleted, repA.State, repA.Error)
	assert.Equal(t, sandboxapi.TaskMergeMerged, repA.Tasks[0].Merge)
	repA2, err := a2.f.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.TaskFailed, repA2.Tasks[0].Status)
	assert.Equal(t, "gave up", repA2.Tasks[0].Message)
	got, err := a.conv.ReadFile(ctx, "alice.txt")
	require.NoError(t, err)
	assert.Equal(t, "alice's task\n", string(got))
	for _, ft := range []*fanoutTenant{b, a2} {
		_, err := ft.conv.ReadFile(ctx, "alice.txt")
		assert.True(t, sandboxapi.IsFileNotFound(err), "%s/%s's conversation holds alice's task: %v", ft.tenant.UserID, ft.tenant.ProjectID, err)
	}
	for _, r := range []sandboxapi.FanoutReport{repA, repA2} {
		js, err := json.Marshal(r)
		require.NoError(t, err)
		assertNoneOf(t, string(js), b)
	}
	replayFanout(t, a.f.WorkflowID(), "fanout-tenant-workflow-id.json")

	// Mallory starts a fan-out of her own on alice's conversation workspace
	// id: it fails as not found, and alice's uncommitted work stays
	// uncommitted (no checkpoint was made for mallory).
	require.NoError(t, a.conv.WriteFile(ctx, "wip.txt", []byte("alice's wip\n"), 0))
	headA := headOf(t, a.hd.LocalPath)
	mallory := sandboxapi.Tenant{UserID: uniq(t, "mallory"), ProjectID: "p1"}
	mf, err := h.client.StartFanout(ctx, mallory, fid, sandboxapi.FanoutInput{
		ConversationWorkspaceID: a.hd.WorkspaceID,
		Tasks:                   []sandboxapi.TaskSpec{{TaskID: "t9", Script: "echo stolen > stolen.txt"}},
	})
	require.NoError(t, err)
	_, err = mf.Result(ctx)
	require.Error(t, err)
	assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
	assert.Contains(t, err.Error(), a.hd.WorkspaceID, "the id mallory gave")
	t.Logf("mallory's fan-out on alice's conversation: %v", err)
	for _, s := range []string{alice, a.hd.Branch, a.hd.LocalPath, a.tenant.Segment()} {
		assert.NotContains(t, err.Error(), s)
	}
	st, err := a.conv.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty, "alice's work was not committed for mallory's fan-out")
	assert.Equal(t, headA, st.Head)
	_, err = tc.DescribeWorkflowExecution(ctx, mustSessionID(t, sandboxapi.WorkspaceIDForKey("task|"+mallory.UserID+"|p1|t9")), "")
	assert.Error(t, err, "no task workspace was made")
	// A conversation request of another tenant is refused before anything starts.
	req := editRequest(alice, "p1", "conv", gittest.FileURL(t.TempDir()))
	_, err = h.client.StartFanout(ctx, mallory, uniq(t, "f"), sandboxapi.FanoutInput{Conversation: &req, Tasks: []sandboxapi.TaskSpec{{TaskID: "t9"}}})
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	// Sent past the client, the workflow refuses it before any step, naming none of alice's ids.
	mid, err := sandboxapi.FanoutWorkflowID(mallory, uniq(t, "f"))
	require.NoError(t, err)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: mid, TaskQueue: h.Config.TaskQueue}, sandboxapi.TaskFanoutWorkflowType,
		sandboxapi.FanoutInput{Conversation: &req, Tasks: []sandboxapi.TaskSpec{{TaskID: "t9"}}})
	require.NoError(t, err)
	err = sandboxclient.FromTemporal(run.Get(ctx, nil))
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	if err != nil {
		assertNoneOf(t, err.Error(), a)
	}
	replayFanout(t, mid, "fanout-tenant-refused.json")
}

// listFanouts is the visibility query of tenant's fan-outs (docs/OPERATIONS.md).
func listFanouts(tenant sandboxapi.Tenant) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: "WorkflowType = '" + sandboxapi.TaskFanoutWorkflowType + "' AND " +
		sandboxapi.SearchAttrUser + " = '" + tenant.UserID + "' AND " + sandboxapi.SearchAttrProject + " = '" + tenant.ProjectID + "'"}
}

func mustSessionID(t *testing.T, wsID string) string {
	t.Helper()
	id, err := sandboxapi.SessionWorkflowID(wsID)
	require.NoError(t, err)
	return id
}

// TestFanoutLegacyIDReachableOnlyByItsTenant: a fan-out started under the
// legacy id sandbox-fanout/<fanout_id> (as a client from before tenant
// ids did: no search attributes) runs on a current worker, and its
// conversation's tenant reaches it by fan-out id — progress, complete_task
// through sandboxctl, watch, result — while another user, or the same
// user's other project, finds nothing and learns nothing of it; another
// tenant may start a fan-out with that id meanwhile and finds only its own.
// The same holds for a legacy fan-out given a conversation request.
func TestFanoutLegacyIDReachableOnlyByItsTenant(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "fanoutlegacy")
	ctx := ctxFor(t, 5*time.Minute)
	a := &fanoutTenant{tenant: sandboxapi.Tenant{UserID: uniq(t, "alice"), ProjectID: "p1"}}
	b := &fanoutTenant{tenant: sandboxapi.Tenant{UserID: uniq(t, "bob"), ProjectID: "p1"}}
	a.conv, a.hd = conversationIn(t, h.client, a.tenant.UserID, a.tenant.ProjectID)
	b.conv, b.hd = conversationIn(t, h.client, b.tenant.UserID, b.tenant.ProjectID)
	fid := uniq(t, "f")
	legacy, err := sandboxapi.LegacyFanoutWorkflowID(fid)
	require.NoError(t, err)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: legacy, TaskQueue: h.Config.TaskQueue},
		sandboxapi.TaskFanoutWorkflowType, sandboxapi.FanoutInput{ConversationWorkspaceID: a.hd.WorkspaceID, Tasks: []sandboxapi.TaskSpec{{TaskID: "t1"}}})
	require.NoError(t, err)

	af, err := h.client.Fanout(ctx, a.tenant, fid)
	require.NoError(t, err)
	assert.Equal(t, legacy, af.WorkflowID(), "the legacy run, found for its conversation's tenant")
	require.Eventually(t, func() bool {
		p, err := af.Progress(ctx)
		return err == nil && len(p.Tasks) == 1 && p.Tasks[0].Status == sandboxapi.TaskWaiting && p.FanoutID == fid
	}, time.Minute, 100*time.Millisecond)

	strangers := []sandboxapi.Tenant{b.tenant, {UserID: a.tenant.UserID, ProjectID: "p2"}}
	for _, s := range strangers {
		_, err := h.client.Fanout(ctx, s, fid)
		require.Error(t, err)
		assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
		assertNoneOf(t, err.Error(), a)
		assert.NotContains(t, err.Error(), run.GetRunID())
		r := runCLI(t, bin, h.Config.TaskQueue, "", "fanout", "complete", fid, "t1", "--user", s.UserID, "--project", s.ProjectID)
		assert.Equal(t, 1, r.code, r.stderr)
		assert.Contains(t, r.stderr, "WorkspaceNotFound")
		assertNoneOf(t, r.stderr+r.stdout, a)
		r = runCLI(t, bin, h.Config.TaskQueue, "", "fanout", "cancel", fid, "--user", s.UserID, "--project", s.ProjectID)
		assert.Equal(t, 1, r.code, r.stderr)
		assertNoneOf(t, r.stderr+r.stdout, a)
	}
	// Bob may use the same fan-out id meanwhile; his lookups find his own.
	bf, err := h.client.StartFanout(ctx, b.tenant, fid, sandboxapi.FanoutInput{ConversationWorkspaceID: b.hd.WorkspaceID, Tasks: []sandboxapi.TaskSpec{{TaskID: "t1"}}})
	require.NoError(t, err)
	bf2, err := h.client.Fanout(ctx, b.tenant, fid)
	require.NoError(t, err)
	assert.Equal(t, bf.WorkflowID(), bf2.WorkflowID())
	require.NoError(t, bf.Cancel(ctx))

	// Alice drives her legacy fan-out with sandboxctl.
	who := []string{"--user", a.tenant.UserID, "--project", a.tenant.ProjectID}
	r := runCLI(t, bin, h.Config.TaskQueue, "", append([]string{"fanout", "complete", fid, "t1", "--failed", "-m", "not today"}, who...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, h.Config.TaskQueue, "", append([]string{"fanout", "watch", fid, "--json", "--interval", "200ms"}, who...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var rep sandboxapi.FanoutReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, sandboxapi.FanoutCompleted, rep.State)
	assert.Equal(t, fid, rep.FanoutID)
	assert.Equal(t, a.hd.WorkspaceID, rep.ConversationWorkspaceID)
	assert.Equal(t, "not today", rep.Tasks[0].Message)
	// Closed, it is still alice's only: bob's lookup finds his own.
	bf3, err := h.client.Fanout(ctx, b.tenant, fid)
	require.NoError(t, err)
	assert.Equal(t, bf.WorkflowID(), bf3.WorkflowID())
	res, err := af.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.FanoutCompleted, res.State)
	replayFanout(t, legacy, "fanout-legacy-workflow-id.json")

	// A legacy fan-out given the conversation's request: its request names the tenant.
	fid2 := uniq(t, "f")
	legacy2, err := sandboxapi.LegacyFanoutWorkflowID(fid2)
	require.NoError(t, err)
	req := editRequest(a.tenant.UserID, a.tenant.ProjectID, "conv", a.hd.Repo.URL)
	_, err = tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: legacy2, TaskQueue: h.Config.TaskQueue},
		sandboxapi.TaskFanoutWorkflowType, sandboxapi.FanoutInput{Conversation: &req, Tasks: []sandboxapi.TaskSpec{{TaskID: "t2"}}})
	require.NoError(t, err)
	af2, err := h.client.Fanout(ctx, a.tenant, fid2)
	require.NoError(t, err)
	assert.Equal(t, legacy2, af2.WorkflowID())
	for _, s := range strangers {
		_, err := h.client.Fanout(ctx, s, fid2)
		assert.True(t, sandboxapi.IsWorkspaceNotFound(err), "%v", err)
		if err != nil {
			assertNoneOf(t, err.Error(), a)
		}
	}
	require.NoError(t, af2.Cancel(ctx))
	assert.False(t, strings.Contains(af2.WorkflowID(), a.tenant.Segment()), "a legacy id holds no segment")
}
