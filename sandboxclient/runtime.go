package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// PreviewURL returns a URL that reaches port (1–65535) of the workspace's
// running runtime (docs/API.md "Preview URLs"): Daytona's signed preview URL,
// or on Docker a loopback port of the worker's machine. Errors:
// sandboxapi.ErrInvalidArgument (port), ErrCommandRejected (the runtime
// cannot expose ports, or is not running), ErrNotFound (no runtime yet:
// run a command first).
func (s *Session) PreviewURL(ctx context.Context, port int) (sandboxapi.PreviewURL, error) {
	return Call(ctx, s, sandboxapi.OpPreviewURL, sandboxapi.PreviewURLInput{Port: port})
}
