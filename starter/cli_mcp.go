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

	"github.com/sandboxcore/sandboxcore/internal/mcpauth"
	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// mcpCommand is `sandboxctl mcp (--repo URL --user U --project P [--mode M]
// (--conversation C | --task T | --ref R) | --workspace WS) [--http ADDR
// [--token-file FILE]]`: the agent tool surface (internal/tools) of one
// workspace over the Model Context Protocol; or `sandboxctl mcp --http ADDR
// --multi --key-file FILE [--session-timeout D]`: every workspace at
// /mcp/<workspace id>, each request with a token of `sandboxctl mcp token`
// (README "Use it from an agent").
func (c *cli) mcpCommand() *cobra.Command {
	var req sandboxapi.WorkspaceRequest
	var mode, wsID, httpAddr, tokenFile, keyFile string
	var multi bool
	sessionTimeout := tools.DefaultSessionTimeout
	maxSessions := tools.DefaultMaxSessions
	cmd := &cobra.Command{
		Use:   "mcp (--repo URL --user U --project P [--mode edit] --conversation C | --workspace WS) [--http ADDR [--token-file FILE]] | mcp --http ADDR --multi --key-file FILE",
		Short: "Serve one workspace's agent tools over MCP (stdio, or streamable HTTP with --http), or every workspace's with --multi",
		Long: "Serve the agent tools of one workspace over the Model Context Protocol:\n  " +
			strings.Join(tools.Names(tools.AllCaps), ", ") + ";\n" +
			"on stdin/stdout by default, or as streamable HTTP on --http ADDR (path /mcp; a loopback address unless\n" +
			"--token-file names a file holding the bearer token every request must send).\n" +
			"Bind it with the flags of `sandboxctl acquire` (the workspace is acquired on the first call)\n" +
			"or with --workspace WS (resumed at start-up: an id no workspace has exits 1 with\n" +
			"WorkspaceNotFound). A released or idle-closed workspace resumes transparently.\n" +
			"An analysis workspace gets the read tools only (" + strings.Join(tools.Names(tools.Caps{Known: true}), ", ") + "),\n" +
			"and sandbox_pr needs a code host for the repository.\n\n" +
			"With --multi (and --http, --key-file) it serves every workspace instead, at\n" +
			"http://ADDR/mcp/<workspace id>: each request must carry \"Authorization: Bearer <token>\" with a\n" +
			"token of `sandboxctl mcp token WS` for that workspace (HMAC under the key file's key, expiring):\n" +
			"none, a forged or an expired one gets 401, one for another workspace 403. A new session resumes\n" +
			"its workspace (an id no workspace has: 404 WorkspaceNotFound); a session with no request for\n" +
			"--session-timeout is closed; a workspace has at most --max-sessions open (one more: 429\n" +
			"SandboxRateLimited). Nothing per workspace is kept beyond the open sessions.",
		Example: "  sandboxctl mcp --repo https://github.com/acme/app.git --user alice --project app --conversation c1\n" +
			"  sandboxctl mcp --workspace ws-0123… --http 127.0.0.1:8765\n" +
			"  head -c 32 /dev/urandom | base64 > mcp.key\n" +
			"  sandboxctl mcp --http 0.0.0.0:8765 --multi --key-file mcp.key\n" +
			"  sandboxctl mcp token ws-0123… --ttl 1h --key-file mcp.key",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if multi || cmd.Flags().Changed("key-file") || cmd.Flags().Changed("session-timeout") || cmd.Flags().Changed("max-sessions") {
				if err := multiFlags(cmd.Flags(), multi, wsID, httpAddr, keyFile, sessionTimeout); err != nil {
					return err
				}
				if maxSessions < 1 || maxSessions > 10000 {
					return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--max-sessions %d: want 1 to 10000", maxSessions)
				}
				key, err := mcpauth.LoadKey(keyFile)
				if err != nil {
					return err
				}
				sc, err := c.client(cmd.Context())
				if err != nil {
					return err
				}
				log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				h := tools.NewMultiHandler(cmd.Context(), sc, tools.MultiOptions{Key: key, SessionTimeout: sessionTimeout, MaxSessions: maxSessions,
					Options: tools.Options{Version: sandboxapi.ContractVersion, Logger: log}})
				return c.serveHTTP(cmd.Context(), h, httpAddr, "/mcp/<workspace id>")
			}
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
			var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.Server }, nil)
			if token != "" {
				h = bearer(token, h)
			}
			mux := http.NewServeMux()
			mux.Handle("/mcp", h)
			return c.serveHTTP(cmd.Context(), mux, httpAddr, "/mcp")
		},
	}
	f := cmd.Flags()
	workspaceRequestFlags(f, &req, &mode, "repository URL (as for acquire)", "edit, task or analysis (read tools only)")
	f.StringVar(&wsID, "workspace", "", "an existing workspace id instead of the request flags")
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on this host:port (path /mcp, or /mcp/<workspace id> with --multi) instead of stdio")
	f.StringVar(&tokenFile, "token-file", "", "with --http: a file holding the bearer token clients must send (required off loopback)")
	f.BoolVar(&multi, "multi", false, "with --http and --key-file: serve every workspace at /mcp/<workspace id>, each request with a token of sandboxctl mcp token")
	f.StringVar(&keyFile, "key-file", envOr(mcpKeyFileEnv, ""), "with --multi: the file of the key tokens are checked with ("+mcpKeyFileEnv+"; 32+ random bytes, raw or base64)")
	f.IntVar(&maxSessions, "max-sessions", tools.DefaultMaxSessions, "with --multi: the most MCP sessions one workspace may have open")
	f.Var(durationValue{&sessionTimeout}, "session-timeout", "with --multi: close an MCP session after this long without a request (a duration or seconds)")
	cmd.AddCommand(c.mcpTokenCommand())
	return cmd
}

// mcpKeyFileEnv names the default of --key-file (mcp --multi, mcp token).
const mcpKeyFileEnv = "SANDBOX_MCP_KEY_FILE"

// maxSessionTimeout bounds mcp --session-timeout.
const maxSessionTimeout = 24 * time.Hour

// multiFlags checks the flags of mcp --multi: --http and --key-file given,
// no binding (--workspace, request flags) and no --token-file, a session
// timeout from 1s to 24h. Errors: InvalidArgument saying which.
func multiFlags(flags *pflag.FlagSet, multi bool, wsID, httpAddr, keyFile string, sessionTimeout time.Duration) error {
	switch {
	case !multi && flags.Changed("key-file"):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--key-file is for --multi (one workspace: --token-file)")
	case !multi:
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--session-timeout and --max-sessions are for --multi")
	case httpAddr == "":
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--multi serves streamable HTTP: give --http ADDR")
	case keyFile == "":
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--multi needs --key-file FILE (or %s): the key its tokens are checked with", mcpKeyFileEnv)
	case flags.Changed("token-file"):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--multi checks tokens of `sandboxctl mcp token` with --key-file, not --token-file")
	case wsID != "":
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--multi serves every workspace: no --workspace")
	case sessionTimeout < time.Second || sessionTimeout > maxSessionTimeout:
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--session-timeout %s: want 1s to %s", sessionTimeout, maxSessionTimeout)
	}
	for _, f := range requestFlags {
		if flags.Changed(f) {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--multi serves every workspace: no --%s", f)
		}
	}
	return nil
}

// mcpTokenCommand is `sandboxctl mcp token WS [--ttl D] --key-file FILE`:
// a bearer token of the --multi endpoint for workspace WS, on stdout as
// its last line (README "Use it from an agent").
func (c *cli) mcpTokenCommand() *cobra.Command {
	var keyFile string
	ttl := mcpauth.DefaultTTL
	cmd := &cobra.Command{
		Use:   "token WS [--ttl 1h] --key-file FILE",
		Short: "Mint a bearer token of `sandboxctl mcp --multi` for one workspace",
		Long: "Print a bearer token for workspace WS on the endpoint of `sandboxctl mcp --http ADDR --multi\n" +
			"--key-file FILE` (same key file): it opens http://ADDR/mcp/WS only, until --ttl from now\n" +
			"(default 1h, at most 720h). The token is stdout's last line (its expiry goes to stderr; --json\n" +
			"prints {\"token\", \"workspace_id\", \"expires_at\"}). Minting needs the key only, not Temporal:\n" +
			"it does not check that the workspace exists.",
		Example: "  TOKEN=$(sandboxctl mcp token ws-0123… --ttl 8h --key-file mcp.key)\n" +
			"  curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:8765/mcp/ws-0123… …",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "give --key-file FILE (or %s): the key of the --multi endpoint", mcpKeyFileEnv)
			}
			key, err := mcpauth.LoadKey(keyFile)
			if err != nil {
				return err
			}
			tok, exp, err := key.Mint(args[0], ttl, time.Now())
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(map[string]string{"token": tok, "workspace_id": args[0], "expires_at": exp.UTC().Format(time.RFC3339)})
			}
			fmt.Fprintf(c.stderr, "sandboxctl mcp token: for %s, expires %s\n", args[0], exp.UTC().Format(time.RFC3339))
			fmt.Fprintln(c.stdout, tok)
			return nil
		},
	}
	cmd.Flags().Var(durationValue{&ttl}, "ttl", "how long the token is valid: a duration or seconds, at most 720h")
	cmd.Flags().StringVar(&keyFile, "key-file", envOr(mcpKeyFileEnv, ""), "the key file of the --multi endpoint ("+mcpKeyFileEnv+")")
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
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--token-file: %v", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 16 || strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--token-file %s: want one token of at least 16 printable ASCII characters, no spaces", path)
	}
	return tok, nil
}

// requireLoopback refuses an --http address that is not on loopback
// (without a token anyone who reaches it could drive the workspace).
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--http %q: want host:port", addr)
	}
	if isLoopbackHost(host) {
		return nil
	}
	return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--http %s is not a loopback address: give --token-file with a bearer token clients must send", addr)
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

// serveHTTP serves h (streamable HTTP at path, as the listening line
// says) on addr until ctx ends.
func (c *cli) serveHTTP(ctx context.Context, h http.Handler, addr, path string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--http %s: %v", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stderr, "sandboxctl mcp: serving streamable HTTP on http://%s%s\n", ln.Addr(), path)
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
