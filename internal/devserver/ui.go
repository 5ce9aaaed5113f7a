package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/temporalio/ui-server/v2/server/api"
	"github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	"github.com/temporalio/ui-server/v2/ui"
)

// webUI is the Temporal Web UI served on a listener this package bound
// itself. It is assembled from ui-server's public packages (route, cors,
// csrf, config, ui) exactly as its server.NewServer does, but is served by
// an http.Server of ours: ui-server's own Server.Start binds the port itself
// and, when that fails (the port was taken after it was checked), calls its
// echo logger's Fatal, i.e. os.Exit(1), which ended the whole process — a
// worker, or an end-to-end test binary (DESIGN.md "Temporal versions and
// the embedded server"). Here a taken port is an error returned by Start,
// and nothing in the UI can end the process.
type webUI struct {
	srv  *http.Server
	done chan struct{}
}

// startWebUI serves the UI configured by cfg on ln (owned from now on) in a
// goroutine. Errors: a configuration the UI refuses, or missing assets.
func startWebUI(ln net.Listener, cfg *uiconfig.Config) (*webUI, error) {
	provider, err := uiconfig.NewConfigProviderWithRefresh(cfg)
	if err != nil {
		return nil, fmt.Errorf("devserver: web ui config: %w", err)
	}
	c, err := provider.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("devserver: web ui config: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover())
	e.Use(middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{
			echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization, auth.AuthorizationExtrasHeader,
			"Caller-Type",
		},
		AllowCredentials: true,
		ConfigProvider:   provider,
	}))
	e.Use(middleware.Secure())
	secure := !c.CORS.CookieInsecure
	e.Use(csrf.EnsureTokenCookie(secure))
	e.Use(middleware.CSRFWithConfig(csrf.MiddlewareConfig(provider, secure)))
	e.Pre(route.PublicPath(c.PublicPath))
	route.SetHealthRoute(e)
	mw := []api.Middleware{headers.WithForwardHeaders([]string{auth.AuthorizationExtrasHeader, "Caller-Type"})}
	if err := route.SetAPIRoutes(e, provider, mw); err != nil {
		return nil, fmt.Errorf("devserver: web ui api routes: %w", err)
	}
	route.SetAuthRoutes(e, provider)
	if c.EnableUI {
		assets, err := ui.Assets()
		if err != nil {
			return nil, fmt.Errorf("devserver: web ui assets: %w", err)
		}
		if assets, err = fs.Sub(assets, "local"); err != nil {
			return nil, fmt.Errorf("devserver: web ui assets: %w", err)
		}
		route.SetUIRoutes(e, c.PublicPath, assets, provider)
		route.SetRenderRoute(e, "/")
	}
	w := &webUI{
		srv:  &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(w.done)
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("temporal web ui stopped", "error", err)
		}
	}()
	return w, nil
}

// stop closes the listener and every connection, and waits for the server
// goroutine.
func (w *webUI) stop() {
	_ = w.srv.Close()
	<-w.done
}
