package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// mcpCommand is `sandboxctl mcp (--repo URL --user U --project P [--mode M]
// (--conversation C | --task T | --ref R) | --workspace WS) [--http ADDR
// [--token-file FILE]]`: the agent tool surface (internal/tools) of one
// workspace over the Model Context Protocol (README "Use it from an agent").
func (c *cli) mcpCommand() *cobra.Command {
	var req sandbox.WorkspaceRequest
	var mode, wsID, httpAddr, tokenFile string
	cmd := &cobra.Command{
		Use:   "mcp (--repo URL --user U --project P [--mode edit] --conversation C | --workspace WS) [--http ADDR [--token-file FILE]]",
		Short: "Serve one workspace's agent tools over MCP (stdio, or streamable HTTP with --http)",
		Long: "Serve the agent tools of one workspace (sandbox_text_editor, sandbox_shell, sandbox_output,\n" +
			"sandbox_search, sandbox_git, sandbox_pr) over the Model Context Protocol: on stdin/stdout by\n" +
			"default, or as streamable HTTP on --http ADDR (path /mcp; a loopback address unless\n" +
			"--token-file names a file holding the bearer token every request must send).\n" +
			"Bind it with the flags of `sandboxctl acquire` (the workspace is acquired on the first call)\n" +
			"or with --workspace WS (resumed at start-up: an id no workspace has exits 1 with\n" +
			"WorkspaceNotFound). A released or idle-closed workspace resumes transparently.\n" +
			"An analysis workspace gets the read tools only.",
		Example: "  sandboxctl mcp --repo https://github.com/acme/app.git --user alice --project app --conversation c1\n" +
			"  sandboxctl mcp --workspace ws-0123… --http 127.0.0.1:8765",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := mcpBinding(cmd.Flags(), wsID, &req, mode)
			if err != nil {
				return err
			}
			token, err := httpToken(httpAddr, tokenFile)
			if err != nil {
				return err
			}
			sc, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			ws, err := tools.NewWorkspace(sc, b)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if wsID != "" {
				if err := resumeBinding(cmd.Context(), ws, wsID, log); err != nil {
					return err
				}
			}
			srv := tools.NewServer(cmd.Context(), ws, tools.Options{Version: sandboxapi.ContractVersion, Logger: log})
			if httpAddr == "" {
				return c.serveStdio(cmd.Context(), srv)
			}
			return c.serveHTTP(cmd.Context(), srv, httpAddr, token)
		},
	}
	f := cmd.Flags()
	workspaceRequestFlags(f, &req, &mode, "repository URL (as for acquire)", "edit, task or analysis (read tools only)")
	f.StringVar(&wsID, "workspace", "", "an existing workspace id instead of the request flags")
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on this host:port (path /mcp) instead of stdio")
	f.StringVar(&tokenFile, "token-file", "", "with --http: a file holding the bearer token clients must send (required off loopback)")
	return cmd
}

// mcpBinding is what mcp's flags bind the server to: the workspace wsID, or
// req (its mode from mode) when --repo, --user or --project is given, or
// neither (Binding.Validate refuses that). Errors: InvalidArgument for
// --workspace together with a request flag, and Binding.Validate's.
func mcpBinding(flags *pflag.FlagSet, wsID string, req *sandboxapi.WorkspaceRequest, mode string) (tools.Binding, error) {
	b := tools.Binding{WorkspaceID: wsID}
	if wsID != "" {
		for _, f := range requestFlags {
			if flags.Changed(f) {
				return tools.Binding{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--workspace and --%s: bind to a workspace id or to a request, not both", f)
			}
		}
	} else if flags.Changed("repo") || flags.Changed("user") || flags.Changed("project") {
		req.Mode = sandboxapi.WorkspaceMode(mode)
		b.Request = req
	}
	if err := b.Validate(); err != nil {
		return tools.Binding{}, err
	}
	return b, nil
}

// httpToken checks the transport flags of mcp and returns the bearer token
// (readToken; "" = none, or stdio). Errors: InvalidArgument for
// --token-file without --http, a bad token file, or an --http address off
// loopback without a token (requireLoopback).
func httpToken(httpAddr, tokenFile string) (string, error) {
	if tokenFile != "" && httpAddr == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--token-file is for --http")
	}
	if httpAddr == "" {
		return "", nil
	}
	token, err := readToken(tokenFile)
	if err != nil {
		return "", err
	}
	if token == "" {
		if err := requireLoopback(httpAddr); err != nil {
			return "", err
		}
	}
	return token, nil
}

// resumeBinding resumes workspace wsID, which a --workspace binding names, before
// serving: an id no workspace has fails here with WorkspaceNotFound (exit as
// for any typed error) instead of serving read tools that cannot work, and
// the tool set and instructions follow the workspace's mode. Another failure
// (no worker yet) is logged and tried again by the first call.
func resumeBinding(ctx context.Context, ws *tools.Workspace, wsID string, log *slog.Logger) error {
	actx, cancel := context.WithTimeout(ctx, mcpStartWait)
	_, _, err := ws.Acquire(actx)
	cancel()
	if sandboxapi.IsWorkspaceNotFound(err) {
		return err
	} else if err != nil {
		log.Warn("resume the workspace", "workspace", wsID, "error", err)
	}
	return nil
}

// serveStdio serves srv on sandboxctl's stdin and stdout until the client
// closes stdin or ctx ends (SIGINT), both a clean end.
func (c *cli) serveStdio(ctx context.Context, srv *tools.Server) error {
	t := &mcp.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopWriteCloser{c.stdout}}
	err := srv.Run(ctx, t)
	if err != nil && (errors.Is(err, io.EOF) || ctx.Err() != nil) {
		return nil
	}
	return err
}

// mcpStartWait bounds resuming a --workspace binding at start-up; past it
// the server starts and its first call tries again.
const mcpStartWait = 20 * time.Second

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// readToken reads a bearer token file ("" = none): one line, at least 16
// characters, printable ASCII. Errors: ErrInvalidArgument.
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "--token-file: %v", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 16 || strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "--token-file %s: want one token of at least 16 printable ASCII characters, no spaces", path)
	}
	return tok, nil
}

// requireLoopback refuses an --http address that is not on loopback
// (without a token anyone who reaches it could drive the workspace).
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "--http %q: want host:port", addr)
	}
	if isLoopbackHost(host) {
		return nil
	}
	return sandbox.Errorf(sandbox.ErrInvalidArgument, "--http %s is not a loopback address: give --token-file with a bearer token clients must send", addr)
}

// isLoopbackHost reports whether host (of a listen address) is "localhost"
// or a loopback IP address (127.0.0.0/8, ::1).
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveHTTP serves srv as streamable HTTP on addr at /mcp until ctx ends;
// with a token every request must carry "Authorization: Bearer <token>".
func (c *cli) serveHTTP(ctx context.Context, srv *tools.Server, addr, token string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "--http %s: %v", addr, err)
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.Server }, nil)
	if token != "" {
		h = bearer(token, h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stderr, "sandboxctl mcp: serving streamable HTTP on http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}
}

// bearer refuses requests without "Authorization: Bearer <token>" (401).
func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxcore"`)
			http.Error(w, "sandboxcore: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
