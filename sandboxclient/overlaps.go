package sandboxclient

import (
	"context"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Overlaps sends overlaps (docs/API.md "Overlaps"): the other live
// workspaces of this workspace's repository, user and project that changed
// files this one changed since its base, highest risk first; those on other
// hosts or evicted are listed as not checked. Read-only. Errors:
// ErrWorkspaceUnavailable, ErrCommandRejected.
func (s *Session) Overlaps(ctx context.Context) (sandboxapi.OverlapsResult, error) {
	return Call(ctx, s, sandboxapi.OpOverlaps, sandboxapi.None{})
}
