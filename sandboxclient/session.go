package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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

// update sends update name (arg nil: none) as Call does.
func (s *Session) update(ctx context.Context, name string, arg, out any) error {
	return FromTemporal(s.rpc.Update(ctx, name, updateIDFrom(ctx), arg, out))
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

// updateWithStart sends update name (arg nil: none) by update-with-start
// (conflict policy USE_EXISTING, the session input naming only the
// workspace id), retrying while a run is ending (SessionReleased).
func (s *Session) updateWithStart(ctx context.Context, name string, arg, out any) error {
	return FromTemporal(s.rpc.UpdateWithStart(ctx, name, updateIDFrom(ctx), arg, out))
}
