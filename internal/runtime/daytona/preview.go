package daytona

import (
	"context"
	"net/http"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// PreviewExpiry is how long a signed preview URL lasts.
const PreviewExpiry = time.Hour

// PreviewURL returns Daytona's signed preview URL of port (1–65535) of a
// running runtime (docs/API.md "Preview URLs"): the sandbox is private and
// the URL carries its own token (so PreviewURL.Token is empty), valid for
// PreviewExpiry. Errors: sandboxapi.ErrInvalidArgument (port), sandboxapi.ErrNotFound
// (no such runtime), sandboxapi.ErrCommandRejected (the sandbox is not running:
// nothing listens; run the server with exec first), mapErr's.
func (p *Provider) PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error) {
	if port < 1 || port > 65535 {
		return sandboxapi.PreviewURL{}, sandboxapi.FieldError("port", "port %d is outside 1–65535", port)
	}
	if err := validID(runtimeID); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	sb, err := p.getSandbox(ctx, runtimeID)
	if err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	if sb == nil || runtimeState(sb.GetState()) == sandbox.RuntimeMissing {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "daytona: runtime %s does not exist (run a command first)", runtimeID)
	}
	if sb.GetState() != apiclient.SANDBOXSTATE_STARTED {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "daytona: runtime %s is %s, so nothing listens on port %d: start the server with exec first", runtimeID, sb.GetState(), port)
	}
	var out sandboxapi.PreviewURL
	name := p.sandboxName(runtimeID)
	err = p.retry(ctx, "preview URL", func(ctx context.Context) error {
		var resp *http.Response
		res, resp, err := p.api.SandboxAPI.GetSignedPortPreviewUrl(ctx, name, int32(port)).ExpiresInSeconds(int32(PreviewExpiry / time.Second)).Execute()
		if err := p.mapErr(ctx, resp, err, "preview URL of %s:%d", name, port); err != nil {
			return err
		}
		if res.GetUrl() == "" {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: an empty preview URL for %s:%d", name, port)
		}
		exp := time.Now().Add(PreviewExpiry).UTC().Truncate(time.Second)
		out = sandboxapi.PreviewURL{URL: res.GetUrl(), ExpiresAt: &exp}
		return nil
	})
	return out, err
}
