// Package tools is the agent tool surface of sandboxcore (docs/DESIGN.md
// "Layout"; README "Use it from an agent"): sandbox_text_editor,
// sandbox_shell, sandbox_output, sandbox_search, sandbox_git and sandbox_pr,
// each with an input and an output schema, bound explicitly to one
// workspace (Workspace: no globals), gated by what the workspace may do
// (Caps), and served over the Model Context Protocol by NewServer (the
// official MCP Go SDK) for `sandboxctl mcp`, or for every workspace behind
// one streamable HTTP endpoint by NewMultiHandler (`sandboxctl mcp
// --multi`, tokens of internal/mcpauth).
//
// Every tool call is one or a few session updates through sandboxclient
// (docs/API.md "Updates"); typed errors come back as MCP tool errors
// (isError) whose structured content carries the error type.
package tools

import (
	"context"
	"sync"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Binding names the one workspace a tool surface works in: Request (the
// workspace is acquired with it on the first call, as `sandboxctl acquire`
// does) or WorkspaceID (an existing workspace, resumed on the first call).
// Exactly one is set.
type Binding struct {
	Request     *sandboxapi.WorkspaceRequest
	WorkspaceID string
}

// Validate checks the binding. Errors: ErrInvalidArgument (none or both
// set, an invalid request or workspace id).
func (b Binding) Validate() error {
	switch {
	case b.Request != nil && b.WorkspaceID != "":
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "bind to a request or to a workspace id, not both")
	case b.Request != nil:
		_, err := b.Request.Validate(sandboxapi.PermissiveURLs)
		return err
	case b.WorkspaceID != "":
		return sandboxapi.ValidateWorkspaceID(b.WorkspaceID)
	}
	return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "no workspace: give a request (--repo --user --project …) or a workspace id (--workspace)")
}

// Workspace is a tool surface's handle on its one workspace: the session
// and handle of the first successful acquire, shared by every tool call
// (safe for concurrent use). After that the session's own resumption
// applies (sandboxclient.Call: a released, idle-closed or evicted session
// resumes transparently on the next call).
type Workspace struct {
	c   *sandboxclient.Client
	b   Binding
	sem chan struct{} // one acquire at a time

	mu sync.Mutex
	s  *sandboxclient.Session
	h  *sandboxapi.Handle
}

// NewWorkspace binds c to the workspace b names (nothing is sent yet).
// Errors: as Binding.Validate.
func NewWorkspace(c *sandboxclient.Client, b Binding) (*Workspace, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &Workspace{c: c, b: b, sem: make(chan struct{}, 1)}, nil
}

// Binding returns the workspace's binding.
func (w *Workspace) Binding() Binding { return w.b }

// Known returns the handle of the first acquire, if it happened.
func (w *Workspace) Known() (sandboxapi.Handle, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.h == nil {
		return sandboxapi.Handle{}, false
	}
	return *w.h, true
}

// Acquire returns the session and handle, acquiring (request binding) or
// resuming (workspace id) the workspace on the first call; a failed
// attempt is tried again by the next call. Errors: the typed errors of
// sandboxclient.Acquire and Session.Resume, ctx's error.
func (w *Workspace) Acquire(ctx context.Context) (*sandboxclient.Session, sandboxapi.Handle, error) {
	w.mu.Lock()
	if w.h != nil {
		defer w.mu.Unlock()
		return w.s, *w.h, nil
	}
	w.mu.Unlock()
	select {
	case w.sem <- struct{}{}:
		defer func() { <-w.sem }()
	case <-ctx.Done():
		return nil, sandboxapi.Handle{}, sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "acquire the workspace")
	}
	w.mu.Lock()
	if w.h != nil { // another call acquired it meanwhile
		defer w.mu.Unlock()
		return w.s, *w.h, nil
	}
	w.mu.Unlock()
	var s *sandboxclient.Session
	var h sandboxapi.Handle
	var err error
	if w.b.Request != nil {
		s, h, err = w.c.Acquire(ctx, *w.b.Request)
	} else if s, err = w.c.Session(w.b.WorkspaceID); err == nil {
		h, err = s.Resume(ctx)
	}
	if err != nil {
		return nil, sandboxapi.Handle{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.s, w.h = s, &h
	return s, h, nil
}

// Caps is what the tool set depends on (Tools): whether the workspace is
// known yet, writable (edit and task modes; analysis is read-only), and
// whether the worker has a code host for its repository
// (sandboxapi.Handle.CodeHost).
type Caps struct {
	Known    bool
	Writable bool
	CodeHost bool
}

// Caps returns the capabilities known now: from the handle once acquired;
// before that from the request's mode (a code host is not known yet); a
// workspace id before its first acquire is treated as read-only, so no
// write tool is offered that could fail.
func (w *Workspace) Caps() Caps {
	if h, ok := w.Known(); ok {
		return Caps{Known: true, Writable: h.Capabilities.Writable, CodeHost: h.CodeHost}
	}
	if w.b.Request != nil {
		return Caps{Writable: w.b.Request.Mode != sandboxapi.ModeAnalysis}
	}
	return Caps{}
}
