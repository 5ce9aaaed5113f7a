package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// TestSessionMemoAndSearchAttributes: what operators see in the Web UI — a
// session's search attributes (user, project, repo, mode, host, workspace,
// state) and its memo (the workspace handle) — is set from the workspace, and
// a visibility query by user finds the session.
func TestSessionMemoAndSearchAttributes(t *testing.T) {
	h := startHost(t, "visibility")
	_, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, time.Minute)

	d, err := tc.DescribeWorkflowExecution(ctx, hd.WorkflowID, "")
	require.NoError(t, err)
	info := d.GetWorkflowExecutionInfo()
	var memo sandboxapi.Handle
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(info.GetMemo().GetFields()[sandboxapi.MemoWorkspace], &memo))
	assert.Equal(t, hd.WorkspaceID, memo.WorkspaceID)
	assert.Equal(t, hd.Branch, memo.Branch)
	assert.Equal(t, hd.LocalPath, memo.LocalPath)
	assert.Equal(t, h.Config.HostID, memo.HostID)

	attrs := map[string]string{}
	for k, p := range info.GetSearchAttributes().GetIndexedFields() {
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
			attrs[k] = v
		}
	}
	assert.Equal(t, hd.UserID, attrs[sandboxapi.SearchAttrUser])
	assert.Equal(t, "p", attrs[sandboxapi.SearchAttrProject])
	assert.Equal(t, "edit", attrs[sandboxapi.SearchAttrMode])
	assert.Equal(t, h.Config.HostID, attrs[sandboxapi.SearchAttrHost])
	assert.Equal(t, hd.WorkspaceID, attrs[sandboxapi.SearchAttrWorkspace])
	assert.Equal(t, hd.Repo.Key(), attrs[sandboxapi.SearchAttrRepo])
	assert.Equal(t, sandboxapi.StateActive, attrs[sandboxapi.SearchAttrState])

	require.Eventually(t, func() bool { // visibility is eventually consistent
		list, err := h.client.ListSessions(ctx, fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrUser, hd.UserID), 10)
		return err == nil && len(list) == 1 && list[0].WorkspaceID == hd.WorkspaceID
	}, 10*time.Second, 100*time.Millisecond, "a visibility query by user finds the session")
}
