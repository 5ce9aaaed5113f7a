package sandboxclient

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
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

// ListSessions lists workspaces, one row each, newest first, with their
// session state (sandboxapi.ListWorkspacesQuery, docs/API.md "Listing
// workspaces"): released, closed and evicted ones included, failed acquires
// never. query is an extra visibility filter ANDed in (e.g. "SandboxUser =
// 'alice'"), or "". limit 0 lists all. Errors: as FromTemporal.
func (c *Client) ListSessions(ctx context.Context, query string, limit int) ([]SessionSummary, error) {
	return c.list(ctx, sandboxapi.ListWorkspacesQuery, query, limit)
}

// ListSessionRuns lists the latest run of every session workflow, newest
// first, ended ones included (failed acquires, removed workspaces, sessions
// that completed before dormant runs existed); continued-as-new runs are
// skipped. Arguments and errors as ListSessions.
func (c *Client) ListSessionRuns(ctx context.Context, query string, limit int) ([]SessionSummary, error) {
	return c.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", sandboxapi.SessionWorkflowType), query, limit)
}

func (c *Client) list(ctx context.Context, base, query string, limit int) ([]SessionSummary, error) {
	q := base
	if query != "" {
		q += " AND (" + query + ")"
	}
	seen := map[string]bool{}
	var out []SessionSummary
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: 100})
		if err != nil {
			return nil, FromTemporal(err)
		}
		for _, e := range resp.Executions {
			id := e.GetExecution().GetWorkflowId()
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, c.summaryOf(e))
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out, nil
		}
	}
}
