// Package sandboxclient is the Go façade agent backends use: Acquire a
// workspace, then call Session methods (Exec, ReadFile, WriteFile, …), each
// one Temporal update on the workspace's SessionWorkflow (docs/API.md).
//
// Errors come back as sandbox typed errors: errors.Is(err,
// sandbox.ErrInvalidWorkspacePath) and friends work across the wire, because
// the workflow fails updates with application errors whose type is the Kind's
// stable type string.
package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// Client talks to sandboxcore through a Temporal client.
type Client struct {
	tc        client.Client
	taskQueue string
	dc        converter.DataConverter
}

// Options configure a Client.
type Options struct {
	// TaskQueue where sessions start; "" means workflows.DefaultTaskQueue.
	TaskQueue string
	// DataConverter decodes what the client reads from Temporal's visibility
	// and describe APIs itself (memo fields, exec heartbeat progress): give the
	// converter tc was dialed with (payloadcodec.Codec.DataConverter() when
	// payloads are encrypted). nil: the SDK's default converter.
	DataConverter converter.DataConverter
}

// New wraps a connected Temporal client (the caller closes it).
func New(tc client.Client, opts Options) *Client {
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	if opts.DataConverter == nil {
		opts.DataConverter = converter.GetDefaultDataConverter()
	}
	return &Client{tc: tc, taskQueue: opts.TaskQueue, dc: opts.DataConverter}
}

// Temporal returns the underlying Temporal client.
func (c *Client) Temporal() client.Client { return c.tc }

// Session is a handle on one workspace's SessionWorkflow.
type Session struct {
	c    *Client
	wsID string
	wfID string
}

// Acquire gets or creates the workspace for req (update-with-start of the
// session workflow, conflict policy USE_EXISTING) and returns its session and
// handle. The request is validated here first (repository URL schemes are
// checked again by the worker under its own policy). Errors: the sandbox
// typed errors, e.g. ErrInvalidArgument, ErrRepoAuthFailed, ErrRefNotFound.
func (c *Client) Acquire(ctx context.Context, req sandbox.WorkspaceRequest) (*Session, workflows.Handle, error) {
	if _, err := req.Validate(sandbox.URLPolicy{AllowFile: true, AllowHTTP: true}); err != nil {
		return nil, workflows.Handle{}, err
	}
	wsID := sandbox.WorkspaceIDForKey(req.Key())
	s, err := c.Session(wsID)
	if err != nil {
		return nil, workflows.Handle{}, err
	}
	h, err := s.acquire(ctx, &req)
	if err != nil {
		return nil, workflows.Handle{}, err
	}
	return s, h, nil
}

// Session returns the session of an existing workspace id (no call is made).
// Operations on a session whose workflow run has completed (idle or released)
// transparently start a new run that finds the workspace. Errors:
// ErrInvalidArgument for a malformed id.
func (c *Client) Session(wsID string) (*Session, error) {
	wfID, err := sandbox.SessionWorkflowID(wsID)
	if err != nil {
		return nil, err
	}
	return &Session{c: c, wsID: wsID, wfID: wfID}, nil
}

// WorkspaceID returns the session's workspace id.
func (s *Session) WorkspaceID() string { return s.wsID }

// WorkflowID returns the session's workflow id.
func (s *Session) WorkflowID() string { return s.wfID }

func (s *Session) acquire(ctx context.Context, req *sandbox.WorkspaceRequest) (workflows.Handle, error) {
	op := s.c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       s.wfID,
		TaskQueue:                s.c.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SessionStartSearchAttributes(s.wsID, req)...),
	}, workflows.SessionWorkflowType, workflows.SessionInput{WorkspaceID: s.wsID, Request: req})
	h, err := s.c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   s.wfID,
			UpdateName:   workflows.UpdateAcquire,
			Args:         []any{workflows.AcquireInput{Request: req}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.Handle{}, FromTemporal(err)
	}
	var out workflows.Handle
	if err := h.Get(ctx, &out); err != nil {
		return workflows.Handle{}, FromTemporal(err)
	}
	return out, nil
}

// Resume re-attaches to the existing workspace (starting a new session run
// when none is running) and returns its handle. Errors: ErrWorkspaceNotFound.
func (s *Session) Resume(ctx context.Context) (workflows.Handle, error) {
	return s.acquire(ctx, nil)
}

// update sends one update; when the session's run has completed it resumes
// the workspace in a new run and sends the update once more.
func (s *Session) update(ctx context.Context, name string, arg, out any) error {
	for attempt := 0; ; attempt++ {
		opts := client.UpdateWorkflowOptions{WorkflowID: s.wfID, UpdateName: name, UpdateID: updateIDFrom(ctx), WaitForStage: client.WorkflowUpdateStageCompleted}
		if arg != nil {
			opts.Args = []any{arg}
		}
		h, err := s.c.tc.UpdateWorkflow(ctx, opts)
		if err == nil {
			err = h.Get(ctx, out)
		}
		if err == nil {
			return nil
		}
		if attempt < 2 && closedRun(err) {
			if _, rerr := s.acquire(ctx, nil); rerr != nil {
				return rerr
			}
			continue
		}
		return FromTemporal(err)
	}
}

// closedRun reports whether err says the workflow has no running execution
// (completed, released, continued-as-new in between) or the session was released.
func closedRun(err error) bool {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return true
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == sandbox.ErrWorkspaceUnavailable.Type && strings.Contains(app.Message(), "was released") {
		// Released but not yet closed: give the run a moment to complete.
		time.Sleep(200 * time.Millisecond)
		return true
	}
	return false
}

// Exec runs a command; a non-zero exit is in the result, not an error.
func (s *Session) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := checkExecPayload(req); err != nil {
		return sandbox.ExecResult{}, err
	}
	var out sandbox.ExecResult
	return out, s.update(ctx, workflows.UpdateExec, req, &out)
}

// ReadFile returns a workspace file's bytes. A path that is not valid UTF-8
// is refused before sending (ErrInvalidWorkspacePath: JSON would change it).
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	var out workflows.ReadFileResult
	err := s.update(ctx, workflows.UpdateReadFile, workflows.ReadFileInput{Path: path}, &out)
	return out.Content, err
}

// WriteFile creates or replaces a workspace file (mode 0 = 0644). Refused
// before sending: content over sandbox.MaxFileBytes (ErrResourceLimit), a
// path that is not valid UTF-8 (ErrInvalidWorkspacePath).
func (s *Session) WriteFile(ctx context.Context, path string, content []byte, mode uint32) error {
	if len(content) > sandbox.MaxFileBytes {
		return sandbox.Errorf(sandbox.ErrResourceLimit, "content is larger than %d bytes", sandbox.MaxFileBytes)
	}
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", path); err != nil {
		return err
	}
	var out workflows.WriteFileResult
	return s.update(ctx, workflows.UpdateWriteFile, workflows.WriteFileInput{Path: path, Content: content, Mode: mode}, &out)
}

// ListDir lists a directory ("" = root); a path that is not valid UTF-8 is
// ErrInvalidWorkspacePath before sending.
func (s *Session) ListDir(ctx context.Context, path string) ([]sandbox.FileEntry, error) {
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	var out workflows.ListDirResult
	err := s.update(ctx, workflows.UpdateListDir, workflows.ListDirInput{Path: path}, &out)
	return out.Entries, err
}

// Search finds matching lines; a pattern or path that is not valid UTF-8 is
// refused before sending (ErrInvalidArgument, ErrInvalidWorkspacePath).
func (s *Session) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	if err := requireUTF8(sandbox.ErrInvalidArgument, "search pattern", req.Pattern); err != nil {
		return sandbox.SearchResult{}, err
	}
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", req.Path); err != nil {
		return sandbox.SearchResult{}, err
	}
	var out sandbox.SearchResult
	return out, s.update(ctx, workflows.UpdateSearch, req, &out)
}

// Status returns the workspace's git state.
func (s *Session) Status(ctx context.Context) (sandbox.WorkspaceStatus, error) {
	var out sandbox.WorkspaceStatus
	return out, s.update(ctx, workflows.UpdateStatus, nil, &out)
}

// Diff returns the agent's change against the recorded base commit.
func (s *Session) Diff(ctx context.Context) (sandbox.Diff, error) {
	var out sandbox.Diff
	return out, s.update(ctx, workflows.UpdateDiff, nil, &out)
}

// Commit commits the workspace's changes onto its branch.
func (s *Session) Commit(ctx context.Context, req sandbox.CommitRequest) (sandbox.CommitResult, error) {
	if err := requireUTF8(sandbox.ErrInvalidWorkspacePath, "path", req.Paths...); err != nil {
		return sandbox.CommitResult{}, err
	}
	if err := requireUTF8(sandbox.ErrInvalidArgument, "commit message", req.Message, req.AuthorName, req.AuthorEmail); err != nil {
		return sandbox.CommitResult{}, err
	}
	var out sandbox.CommitResult
	return out, s.update(ctx, workflows.UpdateCommit, req, &out)
}

// Hibernate stops the runtime; the workspace stays.
func (s *Session) Hibernate(ctx context.Context) (workflows.HibernateResult, error) {
	var out workflows.HibernateResult
	return out, s.update(ctx, workflows.UpdateHibernate, nil, &out)
}

// Release ends the session run (runtime stopped, or destroyed when asked);
// the workspace stays and the next operation resumes it.
func (s *Session) Release(ctx context.Context, destroyRuntime bool) (workflows.ReleaseResult, error) {
	var out workflows.ReleaseResult
	h, err := s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: s.wfID, UpdateName: workflows.UpdateRelease, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.ReleaseInput{DestroyRuntime: destroyRuntime}},
	})
	if err == nil {
		err = h.Get(ctx, &out)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return workflows.ReleaseResult{WorkspaceID: s.wsID, Runtime: "not running"}, nil
		}
		return out, FromTemporal(err)
	}
	return out, nil
}

// Describe queries the running session; when no run is open it returns the
// last run's state from its memo (State "closed").
func (s *Session) Describe(ctx context.Context) (workflows.SessionDescription, error) {
	var out workflows.SessionDescription
	v, err := s.c.tc.QueryWorkflow(ctx, s.wfID, "", workflows.QueryDescribe)
	if err == nil {
		err = v.Get(&out)
	}
	if err != nil {
		return out, FromTemporal(err)
	}
	return out, nil
}

// checkExecPayload refuses, before anything is sent, a request the workflow's
// validator would refuse anyway: a stdin over sandbox.MaxStdinBytes could
// otherwise exceed Temporal's payload limit and stall the session's workflow
// task instead of failing cleanly. Returns ErrInvalidArgument.
func checkExecPayload(req sandbox.ExecRequest) error {
	if len(req.Stdin) > sandbox.MaxStdinBytes {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "stdin is larger than %d bytes", sandbox.MaxStdinBytes)
	}
	size := 0
	for k, v := range req.Env {
		size += len(k) + len(v)
	}
	for _, a := range req.Cmd {
		size += len(a)
	}
	if size > sandbox.MaxStdinBytes {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "command and environment are larger than %d bytes", sandbox.MaxStdinBytes)
	}
	for k, v := range req.Env {
		if err := requireUTF8(sandbox.ErrInvalidArgument, "environment variable", k, v); err != nil {
			return err
		}
	}
	if err := requireUTF8(sandbox.ErrInvalidArgument, "command argument", req.Cmd...); err != nil {
		return err
	}
	return requireUTF8(sandbox.ErrInvalidWorkspacePath, "cwd", req.Cwd)
}

// requireUTF8 refuses a string that is not valid UTF-8 before it is sent:
// the JSON payload would silently turn each bad byte into U+FFFD, so another
// file would be written or another argument run. Errors wrap kind.
func requireUTF8(kind *sandbox.Kind, what string, vals ...string) error {
	for _, v := range vals {
		if !utf8.ValidString(v) {
			return sandbox.Errorf(kind, "%s %q is not valid UTF-8 (the wire format carries text only)", what, sandbox.Clip(v, 200))
		}
	}
	return nil
}

// FromTemporal converts an error from the Temporal client into a sandbox typed
// error: an application error's Type selects the Kind (docs/API.md "Errors");
// a missing workflow is ErrWorkspaceNotFound; anything else wraps
// ErrRuntimeUnavailable (the service could not be reached).
func FromTemporal(err error) error {
	if err == nil {
		return nil
	}
	if sandbox.KindOf(err) != nil {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if k := sandbox.KindByType(app.Type()); k != nil {
			return sandbox.Errorf(k, "%s", app.Message())
		}
		return sandbox.Errorf(sandbox.ErrSandbox, "%s", app.Message())
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "no such workflow (a workspace's session: never acquired, or its history is gone — acquire it with a full request): %s", nf.Message)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return sandbox.Errorf(sandbox.ErrTimeout, "%v", err)
	}
	return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "temporal: %v%s", err, payloadHint(err))
}

// ListSessions lists session workflows known to Temporal's visibility store,
// newest first, one per workspace (the latest run). query is an extra
// visibility filter ANDed in (e.g. "SandboxUser = 'alice'"), or "".
func (c *Client) ListSessions(ctx context.Context, query string, limit int) ([]SessionSummary, error) {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.SessionWorkflowType)
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
