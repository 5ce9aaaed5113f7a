package activities

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// PortPreviewer is the optional runtime capability the preview_url update
// uses (docs/API.md "Preview URLs"; DESIGN.md "Ports": optional
// capabilities are interfaces the consumer asserts). A RuntimeProvider
// implements it exactly when its Capabilities().PreviewURL is true
// (runtimetest checks that): Daytona (signed preview URLs) and Docker (a
// loopback port of the worker's machine forwarded to the container).
type PortPreviewer interface {
	PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error)
}

// ReplicaReporter is the optional capability of remote runtimes whose
// runtimes hold a replica of the workspace (docs/API.md "Remote runtimes"):
// RuntimeReplica reports runtime id's replica as this host records it (no
// remote call), false when the host has none. Acquire and Exec pass it on
// to the session (Handle.RuntimeReplica, SessionDescription.RuntimeReplica).
type ReplicaReporter interface {
	RuntimeReplica(runtimeID string) (sandboxapi.RuntimeReplica, bool)
}

// runtimeReplica is the replica state of ws's runtime, nil for runtimes
// without replicas (or none on this host).
func (a *Activities) runtimeReplica(ws sandboxapi.Workspace) *sandboxapi.RuntimeReplica {
	rr, ok := a.Runtimes.(ReplicaReporter)
	if !ok {
		return nil
	}
	st, ok := rr.RuntimeReplica(sandboxapi.RuntimeIDFor(ws.ID))
	if !ok {
		return nil
	}
	return &st
}

// PreviewURL returns a URL reaching in.Port of the workspace's runtime.
// Errors: ErrCommandRejected (the host's runtime cannot expose ports — the
// local and bubblewrap runtimes share the host's network, where nothing is
// published — or the runtime is not running or has no network),
// ErrNotFound (the workspace has no runtime yet: run a command first),
// ErrInvalidArgument (port), ErrWorkspaceUnavailable, the backend's kinds.
func (a *Activities) PreviewURL(ctx context.Context, in wire.PreviewURLActivityInput) (sandboxapi.PreviewURL, error) {
	if err := (sandboxapi.PreviewURLInput{Port: in.Port}).Validate(); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	pp, ok := a.Runtimes.(PortPreviewer)
	if !ok || !a.Runtimes.Capabilities().PreviewURL {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "preview_url: the %s runtime of this host cannot expose ports (remote runtimes such as Daytona, and Docker, can)", a.Runtimes.Kind())
	}
	u, err := pp.PreviewURL(ctx, sandboxapi.RuntimeIDFor(ws.ID), in.Port)
	if err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	a.touch(ctx, ws.ID, false)
	return u, nil
}
