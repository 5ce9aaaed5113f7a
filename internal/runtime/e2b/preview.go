package e2b

import (
	"context"
	"strconv"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// previewCap exposes sandbox ports the way E2B does: every port of a
// sandbox is served at {scheme}://{port}-{sandbox id}.{domain} while the
// sandbox runs; sandboxes are created private, so requests need the
// sandbox's traffic token in the E2b-Traffic-Access-Token header
// (PreviewURL.Token).
type previewCap struct{ p *Provider }

// PreviewURL is previewCap's: the provider itself carries the capability
// the preview_url activity asserts (activities.PortPreviewer).
func (p *Provider) PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error) {
	return previewCap{p}.PreviewURL(ctx, runtimeID, port)
}

// PreviewURL returns the URL of port (1–65535) of a runtime, resuming its
// sandbox when it is paused (the URL answers only while it runs; ExpiresAt
// stays nil: it works while the runtime runs). Errors:
// sandboxapi.ErrInvalidArgument (the port, the id), sandboxapi.ErrNotFound (no such
// runtime), the kinds of mapHTTP.
func (c previewCap) PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error) {
	if port < 1 || port > 65535 {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "port %d is outside 1–65535", port)
	}
	if err := validID(runtimeID); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	rt := c.p.runtimeFor(runtimeID)
	_ = rt.held.Load()
	if st, err := rt.State(ctx); err != nil {
		return sandboxapi.PreviewURL{}, err
	} else if st == sandbox.RuntimeMissing {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: runtime %s does not exist", runtimeID)
	}
	env, err := rt.ensure(ctx)
	if err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	rec := env.rec
	return sandboxapi.PreviewURL{
		URL:   c.p.scheme + "://" + strconv.Itoa(port) + "-" + rec.SandboxID + "." + rec.Domain + "/",
		Token: rec.TrafficToken,
	}, nil
}

// ExposePort returns PreviewURL's URL.
func (c previewCap) ExposePort(ctx context.Context, runtimeID string, port int) (string, error) {
	u, err := c.PreviewURL(ctx, runtimeID, port)
	return u.URL, err
}
