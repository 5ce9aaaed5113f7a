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
//
// One method per operation, in the file named after the contract's file
// that declares its types (sandboxapi): session.go (acquire, resume,
// hibernate, release, describe), exec.go (exec, read_output, cancel),
// files.go, edit.go, git.go (status, diff, log, commit, push, pull
// requests, merges), process.go, lifecycle.go, runtime.go (preview_url),
// overlaps.go, setup.go, eviction.go, fanout.go; stream.go streams an
// exec's output, list.go lists sessions, dial.go connects.
package sandboxclient

import (
	"context"
	"errors"

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
