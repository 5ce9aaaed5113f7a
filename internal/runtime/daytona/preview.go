package daytona

import (
	"context"
	"net/http"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// PreviewExpiry is how long a signed preview URL lasts.
const PreviewExpiry = time.Hour

// previewCap exposes sandbox ports through Daytona's preview URLs: a signed
// preview URL (the token is in the URL, valid PreviewExpiry) for private
// sandboxes. It implements sandbox.PreviewURLCapability and sandbox.PortPreviewer.
type previewCap struct{ p *Provider }

var (
	_ sandbox.PreviewURLCapability = previewCap{}
	_ sandbox.PortPreviewer        = previewCap{}
)

// PreviewURL returns a signed preview URL of port (1–65535) of a running
// runtime. Errors: sandbox.ErrInvalidArgument, sandbox.ErrNotFound, mapErr's.
func (c previewCap) PreviewURL(ctx context.Context, runtimeID string, port int) (sandbox.PreviewURL, error) {
	if port < 1 || port > 65535 {
		return sandbox.PreviewURL{}, sandbox.Errorf(sandbox.ErrInvalidArgument, "port %d is outside 1–65535", port)
	}
	if err := validID(runtimeID); err != nil {
		return sandbox.PreviewURL{}, err
	}
	sb, err := c.p.getSandbox(ctx, runtimeID)
	if err != nil {
		return sandbox.PreviewURL{}, err
	}
	if sb == nil {
		return sandbox.PreviewURL{}, sandbox.Errorf(sandbox.ErrNotFound, "daytona: runtime %s does not exist", runtimeID)
	}
	var out sandbox.PreviewURL
	err = c.p.retry(ctx, "preview URL", func(ctx context.Context) error {
		res, resp, err := c.p.api.SandboxAPI.GetSignedPortPreviewUrl(ctx, runtimeID, int32(port)).ExpiresInSeconds(int32(PreviewExpiry / time.Second)).Execute()
		if err := c.p.mapErr(ctx, resp, err, "preview URL of %s:%d", runtimeID, port); err != nil {
			return err
		}
		exp := time.Now().Add(PreviewExpiry).UTC()
		out = sandbox.PreviewURL{URL: res.GetUrl(), ExpiresAt: &exp}
		return nil
	})
	return out, err
}

// ExposePort returns PreviewURL's URL.
func (c previewCap) ExposePort(ctx context.Context, runtimeID string, port int) (string, error) {
	u, err := c.PreviewURL(ctx, runtimeID, port)
	return u.URL, err
}

var _ = http.StatusOK
