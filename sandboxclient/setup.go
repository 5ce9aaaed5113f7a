package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Setup runs the repository's setup commands again now (a running setup is
// waited for) and returns their outcome (docs/RUNTIMES.md "Setup"). Errors:
// ErrInvalidArgument when the repository names no setup command.
func (s *Session) Setup(ctx context.Context) (sandboxapi.SetupState, error) {
	return Call(ctx, s, sandboxapi.OpSetup, sandboxapi.None{})
}
