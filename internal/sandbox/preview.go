package sandbox

import (
	"context"
	"time"
)

// PreviewURL is how to reach a port of a runtime from outside (the
// preview_url session update: {port} → {url, token?, expires_at?}).
type PreviewURL struct {
	// URL reaches the port (http or https).
	URL string `json:"url"`
	// Token, when set, must accompany requests (the backend says how:
	// Daytona's x-daytona-preview-token header).
	Token string `json:"token,omitempty"`
	// ExpiresAt is when the URL stops working (nil: while the runtime runs).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// PortPreviewer is the optional capability behind the preview_url update: a
// runtime provider's PreviewURLs() value implements it when the backend can
// expose a port (DESIGN.md "Ports": optional capabilities are interfaces the
// consumer asserts). Errors: ErrInvalidArgument (port outside 1–65535),
// ErrNotFound (no such runtime), ErrCommandRejected (the runtime cannot
// expose ports, e.g. its network is none), the backend's kinds.
type PortPreviewer interface {
	PreviewURL(ctx context.Context, runtimeID string, port int) (PreviewURL, error)
}
