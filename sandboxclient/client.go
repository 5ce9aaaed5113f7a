// Package sandboxclient is the Go façade agent backends use: Acquire a
// workspace, then call Session methods (Exec, ReadFile, WriteFile, …), each
// one Temporal update on the workspace's SessionWorkflow (docs/API.md). Its
// signatures speak only package sandboxapi, the public contract; Call sends
// any operation of the table (sandboxapi.Op) by its declaration.
//
// Errors come back as typed errors: errors.Is(err,
// sandboxapi.ErrInvalidWorkspacePath), sandboxapi.IsInvalidArgument(err) and
// friends work across the wire, because the workflow fails updates with
// application errors whose type is the Kind's stable type string.
package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Client talks to sandboxcore through a Temporal client.
type Client struct {
	tc        client.Client
	taskQueue string
	dc        converter.DataConverter
}

// Options configure a Client.
type Options struct {
	// TaskQueue where sessions start; "" means sandboxapi.DefaultTaskQueue.
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
		opts.TaskQueue = sandboxapi.DefaultTaskQueue
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
	// rpc is the call path (internal/sessionrpc) with the client's
	// policies: a run that is ending is waited out briefly, a gone one is
	// resumed.
	rpc sessionrpc.Session
}

// Acquire gets or creates the workspace for req (update-with-start of the
// session workflow, conflict policy USE_EXISTING) and returns its session and
// handle. The request is validated here first (repository URL schemes are
// checked again by the worker under its own policy). Errors: the sandbox
// typed errors, e.g. ErrInvalidArgument, ErrRepoAuthFailed, ErrRefNotFound.
func (c *Client) Acquire(ctx context.Context, req sandboxapi.WorkspaceRequest) (*Session, sandboxapi.Handle, error) {
	if _, err := req.Validate(sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true}); err != nil {
		return nil, sandboxapi.Handle{}, err
	}
	wsID := sandboxapi.WorkspaceIDForKey(req.Key())
	s, err := c.Session(wsID)
	if err != nil {
		return nil, sandboxapi.Handle{}, err
	}
	h, err := s.rpc.Acquire(ctx, &req)
	if err != nil {
		return nil, sandboxapi.Handle{}, FromTemporal(err)
	}
	return s, h, nil
}

// Session returns the session of an existing workspace id (no call is made).
// Operations on a session whose workflow run has completed (idle or released)
// transparently start a new run that finds the workspace. Errors:
// ErrInvalidArgument for a malformed id.
func (c *Client) Session(wsID string) (*Session, error) {
	rpc, err := sessionrpc.Open(c.tc, c.taskQueue, wsID, sessionrpc.ClientPolicy)
	if err != nil {
		return nil, err
	}
	rpc.StartPolicy = sessionrpc.ClientStartPolicy
	return &Session{c: c, wsID: wsID, wfID: rpc.WorkflowID, rpc: rpc}, nil
}

// WorkspaceID returns the session's workspace id.
func (s *Session) WorkspaceID() string { return s.wsID }

// WorkflowID returns the session's workflow id.
func (s *Session) WorkflowID() string { return s.wfID }

// Resume re-attaches to the existing workspace (starting a new session run
// when none is running) and returns its handle. Errors: ErrWorkspaceNotFound.
func (s *Session) Resume(ctx context.Context) (sandboxapi.Handle, error) {
	h, err := s.rpc.Acquire(ctx, nil)
	return h, FromTemporal(err)
}

// Call sends the update op with argument in to the session and returns its
// result (docs/API.md "Updates"): the session's run answers it, a dormant
// session resumes its workspace first, and a session whose run is ending
// (SessionReleased) or gone (completed, e.g. before this contract) is
// resumed here and the update sent once more. The update id is
// WithUpdateID's, else random. Errors: the typed errors of FromTemporal.
func Call[In, Out any](ctx context.Context, s *Session, op sandboxapi.Op[In, Out], in In) (Out, error) {
	out, err := sessionrpc.Call(ctx, s.rpc, op, updateIDFrom(ctx), in)
	return out, FromTemporal(err)
}

// update sends update name (arg nil: none) as Call does.
func (s *Session) update(ctx context.Context, name string, arg, out any) error {
	return FromTemporal(s.rpc.Update(ctx, name, updateIDFrom(ctx), arg, out))
}

// Exec runs a command; a non-zero exit is in the result, not an error.
// When ctx ends before the command, the command is cancelled (the cancel
// update names the exec's update id: WithUpdateID's, else a random one):
// its whole process tree is killed, and its cancelled result (Cancelled,
// exit 130) is returned with ctx's error (docs/API.md "Cancelling a
// command"; Temporal itself cannot cancel an update).
func (s *Session) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	if err := checkExecPayload(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	res, err := s.rpc.Exec(ctx, execUpdateID(ctx), req)
	return res, execError(ctx, err)
}

// ReadFile returns a workspace file's bytes. A path that is not valid UTF-8
// is refused before sending (ErrInvalidWorkspacePath: JSON would change it).
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	out, err := Call(ctx, s, sandboxapi.OpReadFile, sandboxapi.ReadFileInput{Path: path})
	return out.Content, err
}

// WriteFile creates or replaces a workspace file (mode 0 = 0644). Refused
// before sending: content over sandboxapi.MaxFileBytes (ErrResourceLimit), a
// path that is not valid UTF-8 (ErrInvalidWorkspacePath).
func (s *Session) WriteFile(ctx context.Context, path string, content []byte, mode uint32) error {
	_, err := s.WriteFileIfMatch(ctx, path, content, mode, "")
	return err
}

// WriteFileIfMatch is WriteFile with a precondition (docs/API.md
// "Optimistic concurrency"): with ifMatch set (the ContentHash a read
// returned, sandboxapi.ContentHash of the bytes read) the write happens only
// while the file still has that content, else it fails with ErrConflict and
// changes nothing; "" writes unconditionally. Returns the written content's
// hash, for the next write. Errors: those of WriteFile, ErrInvalidArgument
// (a malformed ifMatch, before sending), ErrConflict.
func (s *Session) WriteFileIfMatch(ctx context.Context, path string, content []byte, mode uint32, ifMatch string) (sandboxapi.WriteFileResult, error) {
	if len(content) > sandboxapi.MaxFileBytes {
		return sandboxapi.WriteFileResult{}, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "content is larger than %d bytes", sandboxapi.MaxFileBytes)
	}
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	if err := sandboxapi.ValidateIfMatch(ifMatch); err != nil {
		return sandboxapi.WriteFileResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpWriteFile, sandboxapi.WriteFileInput{Path: path, Content: content, Mode: mode, IfMatch: ifMatch})
}

// ListDir lists a directory ("" = root); a path that is not valid UTF-8 is
// ErrInvalidWorkspacePath before sending.
func (s *Session) ListDir(ctx context.Context, path string) ([]sandboxapi.FileEntry, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", path); err != nil {
		return nil, err
	}
	out, err := Call(ctx, s, sandboxapi.OpListDir, sandboxapi.ListDirInput{Path: path})
	return out.Entries, err
}

// Search finds matching lines; a pattern or path that is not valid UTF-8 is
// refused before sending (ErrInvalidArgument, ErrInvalidWorkspacePath).
func (s *Session) Search(ctx context.Context, req sandboxapi.SearchRequest) (sandboxapi.SearchResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "search pattern", req.Pattern); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", req.Path); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpSearch, req)
}

// Status returns the workspace's git state.
func (s *Session) Status(ctx context.Context) (sandboxapi.WorkspaceStatus, error) {
	return Call(ctx, s, sandboxapi.OpStatus, sandboxapi.None{})
}

// Diff returns the agent's change against the recorded base commit.
func (s *Session) Diff(ctx context.Context) (sandboxapi.Diff, error) {
	return Call(ctx, s, sandboxapi.OpDiff, sandboxapi.None{})
}

// Commit commits the workspace's changes onto its branch.
func (s *Session) Commit(ctx context.Context, req sandboxapi.CommitRequest) (sandboxapi.CommitResult, error) {
	if err := requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "path", req.Paths...); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "commit message", req.Message, req.AuthorName, req.AuthorEmail); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpCommit, req)
}

// PreviewURL returns a URL that reaches port (1–65535) of the workspace's
// running runtime (docs/API.md "Preview URLs"): Daytona's signed preview URL,
// or on Docker a loopback port of the worker's machine. Errors:
// sandboxapi.ErrInvalidArgument (port), ErrCommandRejected (the runtime
// cannot expose ports, or is not running), ErrNotFound (no runtime yet:
// run a command first).
func (s *Session) PreviewURL(ctx context.Context, port int) (sandboxapi.PreviewURL, error) {
	return Call(ctx, s, sandboxapi.OpPreviewURL, sandboxapi.PreviewURLInput{Port: port})
}

// Hibernate stops the runtime; the workspace stays.
func (s *Session) Hibernate(ctx context.Context) (sandboxapi.HibernateResult, error) {
	return Call(ctx, s, sandboxapi.OpHibernate, sandboxapi.None{})
}

// Release releases the session (runtime stopped, or destroyed when asked):
// its run ends and the session waits, dormant, for the next operation, which
// resumes the workspace. The workspace stays.
func (s *Session) Release(ctx context.Context, destroyRuntime bool) (sandboxapi.ReleaseResult, error) {
	// Sent once: a run that is gone or ending is being released already.
	rpc := s.rpc
	rpc.Policy = sessionrpc.Policy{}
	out, err := sessionrpc.Call(ctx, rpc, sandboxapi.OpRelease, "", sandboxapi.ReleaseInput{DestroyRuntime: destroyRuntime})
	if sessionrpc.RunGone(err) {
		return sandboxapi.ReleaseResult{WorkspaceID: s.wsID, Runtime: "not running"}, nil
	}
	return out, FromTemporal(err)
}

// Describe queries the session's run (released, closed and evicted sessions
// answer from their dormant run). Errors: ErrWorkspaceNotFound when no run
// exists, as FromTemporal otherwise.
func (s *Session) Describe(ctx context.Context) (sandboxapi.SessionDescription, error) {
	return query[sandboxapi.SessionDescription](ctx, s.c.tc, s.wfID, sandboxapi.QueryDescribe)
}

// query sends query name to workflow wfID's current run and decodes its
// answer. Errors: as FromTemporal.
func query[T any](ctx context.Context, tc client.Client, wfID, name string) (T, error) {
	var out T
	v, err := tc.QueryWorkflow(ctx, wfID, "", name)
	if err == nil {
		err = v.Get(&out)
	}
	return out, FromTemporal(err)
}

// workflowResult waits for workflow wfID's run to close and decodes its
// result. Errors: the workflow's failure, as FromTemporal.
func workflowResult[T any](ctx context.Context, tc client.Client, wfID string) (T, error) {
	var out T
	err := tc.GetWorkflow(ctx, wfID, "").Get(ctx, &out)
	return out, FromTemporal(err)
}

// checkExecPayload refuses, before anything is sent, a request the workflow's
// validator would refuse anyway: a stdin over sandboxapi.MaxStdinBytes could
// otherwise exceed Temporal's payload limit and stall the session's workflow
// task instead of failing cleanly. Returns ErrInvalidArgument.
func checkExecPayload(req sandboxapi.ExecRequest) error {
	if len(req.Stdin) > sandboxapi.MaxStdinBytes {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "stdin is larger than %d bytes", sandboxapi.MaxStdinBytes)
	}
	size := 0
	for k, v := range req.Env {
		size += len(k) + len(v)
	}
	for _, a := range req.Cmd {
		size += len(a)
	}
	if size > sandboxapi.MaxStdinBytes {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "command and environment are larger than %d bytes", sandboxapi.MaxStdinBytes)
	}
	for k, v := range req.Env {
		if err := requireUTF8(sandboxapi.ErrInvalidArgument, "environment variable", k, v); err != nil {
			return err
		}
	}
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "command argument", req.Cmd...); err != nil {
		return err
	}
	return requireUTF8(sandboxapi.ErrInvalidWorkspacePath, "cwd", req.Cwd)
}

// requireUTF8 refuses a string that is not valid UTF-8 before it is sent:
// the JSON payload would silently turn each bad byte into U+FFFD, so another
// file would be written or another argument run. Errors wrap kind.
func requireUTF8(kind *sandboxapi.Kind, what string, vals ...string) error {
	for _, v := range vals {
		if !utf8.ValidString(v) {
			return sandboxapi.Errorf(kind, "%s %q is not valid UTF-8 (the wire format carries text only)", what, sandboxapi.Clip(v, 200))
		}
	}
	return nil
}

// FromTemporal converts an error from the Temporal client into a typed
// error (sandboxapi.FromTemporal, docs/API.md "Errors").
func FromTemporal(err error) error {
	if err == nil {
		return nil
	}
	out := sandboxapi.FromTemporal(err)
	if hint := payloadHint(err); hint != "" && out != err {
		var te *sandboxapi.Error
		if errors.As(out, &te) {
			te.Msg += hint
		}
	}
	return out
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
