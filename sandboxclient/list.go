package sandboxclient

import (
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
)

// SessionSummary is one session as seen in Temporal's visibility store.
type SessionSummary struct {
	WorkspaceID string    `json:"workspace_id"`
	WorkflowID  string    `json:"workflow_id"`
	RunID       string    `json:"run_id"`
	Status      string    `json:"status"` // Temporal execution status, e.g. "Running", "Completed"
	State       string    `json:"state"`  // SandboxState search attribute
	User        string    `json:"user"`
	Project     string    `json:"project"`
	Mode        string    `json:"mode"`
	Repo        string    `json:"repo"`
	Host        string    `json:"host"`
	StartTime   time.Time `json:"start_time"`
	// Handle is the workspace handle from the memo (zero until the first acquire succeeded).
	Handle sandboxapi.Handle `json:"handle"`
}

func (c *Client) summaryOf(e *workflowpb.WorkflowExecutionInfo) SessionSummary {
	kw := func(name string) string {
		p := e.GetSearchAttributes().GetIndexedFields()[name]
		if p == nil {
			return ""
		}
		var v string
		_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
		return v
	}
	s := SessionSummary{
		WorkflowID: e.GetExecution().GetWorkflowId(),
		RunID:      e.GetExecution().GetRunId(),
		Status:     e.GetStatus().String(),
		State:      kw(sandboxapi.SearchAttrState),
		User:       kw(sandboxapi.SearchAttrUser),
		Project:    kw(sandboxapi.SearchAttrProject),
		Mode:       kw(sandboxapi.SearchAttrMode),
		Repo:       kw(sandboxapi.SearchAttrRepo),
		Host:       kw(sandboxapi.SearchAttrHost),
		StartTime:  e.GetStartTime().AsTime(),
	}
	s.WorkspaceID = kw(sandboxapi.SearchAttrWorkspace)
	if p := memoField(e.GetMemo(), sandboxapi.MemoWorkspace); p != nil {
		// The memo is encoded with the client's data converter (encrypted
		// when payloads are: the SDK encodes memos like any payload).
		_ = c.dc.FromPayload(p, &s.Handle)
	}
	return s
}

func memoField(m *commonpb.Memo, name string) *commonpb.Payload {
	if m == nil {
		return nil
	}
	return m.GetFields()[name]
}
