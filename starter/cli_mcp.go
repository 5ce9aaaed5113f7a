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
// --multi --key-file FILE [--revoked-file FILE] [--session-timeout D]`:
// every workspace at /mcp/<workspace id>, each request with a token of
// `sandboxctl mcp token` that `sandboxctl mcp revoke` did not revoke
// (README "Use it from an agent").
func (c *cli) mcpCommand() *cobra.Command {
	var req sandboxapi.WorkspaceRequest
	var mode, wsID, httpAddr, tokenFile, keyFile, revokedFile string
	var multi bool
	sessionTimeout := tools.DefaultSessionTimeout
	maxSessions := tools.DefaultMaxSessions
	cmd := &cobra.Command{
		Use:   "mcp (--repo URL --user U --project P [--mode edit] --conversation C | --workspace WS) [--http ADDR [--token-file FILE]] | mcp --http ADDR --multi --key-file FILE [--revoked-file FILE]",
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
			"none, a forged, an expired or a revoked one gets 401, one for another workspace 403. A new\n" +
			"session resumes its workspace (an id no workspace has: 404 WorkspaceNotFound); a session with no\n" +
			"request for --session-timeout is closed; a workspace has at most --max-sessions open (one more:\n" +
			"429 SandboxRateLimited). Nothing per workspace is kept beyond the open sessions.\n\n" +
			"With --revoked-file FILE, the tokens `sandboxctl mcp revoke` wrote there are refused from their\n" +
			"next request on, in open sessions too: the file is followed without a restart. A missing file\n" +
			"revokes nothing; one that cannot be read or parsed stops the start-up (exit 2), and once running\n" +
			"keeps the last good list and is logged.",
		Example: "  sandboxctl mcp --repo https://github.com/acme/app.git --user alice --project app --conversation c1\n" +
			"  sandboxctl mcp --workspace ws-0123… --http 127.0.0.1:8765\n" +
			"  (umask 077; head -c 32 /dev/urandom | base64 > ~/.config/sandboxcore/mcp.key)\n" +
			"  sandboxctl mcp --http 127.0.0.1:8765 --multi --key-file ~/.config/sandboxcore/mcp.key --revoked-file mcp.revoked\n" +
			"  sandboxctl mcp token ws-0123… --ttl 1h --key-file mcp.key --json\n" +
			"  sandboxctl mcp revoke --id 00112233… --revoked-file mcp.revoked",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if multi || cmd.Flags().Changed("key-file") || cmd.Flags().Changed("revoked-file") || cmd.Flags().Changed("session-timeout") || cmd.Flags().Changed("max-sessions") {
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
				log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				var revoked *mcpauth.RevocationList
				if revokedFile != "" {
					if revoked, err = mcpauth.OpenRevocationList(revokedFile, log); err != nil {
						return err
					}
					defer revoked.Close()
					fmt.Fprintf(c.stderr, "sandboxctl mcp: refusing the token ids of %s (%d entries, followed live)\n", revokedFile, revoked.Len())
				}
				sc, err := c.client(cmd.Context())
				if err != nil {
					return err
				}
				h := tools.NewMultiHandler(cmd.Context(), sc, tools.MultiOptions{Key: key, Revoked: revoked, SessionTimeout: sessionTimeout, MaxSessions: maxSessions,
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
	f.StringVar(&revokedFile, "revoked-file", envOr(mcpRevokedFileEnv, ""), "with --multi: the revocation list of sandboxctl mcp revoke, followed live ("+mcpRevokedFileEnv+"; missing: nothing revoked)")
	f.IntVar(&maxSessions, "max-sessions", tools.DefaultMaxSessions, "with --multi: the most MCP sessions one workspace may have open")
	f.Var(durationValue{&sessionTimeout}, "session-timeout", "with --multi: close an MCP session after this long without a request (a duration or seconds)")
	cmd.AddCommand(c.mcpTokenCommand(), c.mcpRevokeCommand())
	return cmd
}

// mcpKeyFileEnv names the default of --key-file (mcp --multi, mcp token).
const mcpKeyFileEnv = "SANDBOX_MCP_KEY_FILE"

// mcpRevokedFileEnv names the default of --revoked-file (mcp --multi, mcp
// revoke).
const mcpRevokedFileEnv = "SANDBOX_MCP_REVOKED_FILE"

// maxSessionTimeout bounds mcp --session-timeout.
const maxSessionTimeout = 24 * time.Hour

// multiFlags checks the flags of mcp --multi (also --key-file and
// --revoked-file given without it): --http and --key-file given,
// no binding (--workspace, request flags) and no --token-file, a session
// timeout from 1s to 24h. Errors: InvalidArgument saying which.
func multiFlags(flags *pflag.FlagSet, multi bool, wsID, httpAddr, keyFile string, sessionTimeout time.Duration) error {
	switch {
	case !multi && flags.Changed("key-file"):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--key-file is for --multi (one workspace: --token-file)")
	case !multi && flags.Changed("revoked-file"):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--revoked-file is for --multi (one workspace: change --token-file's token and restart)")
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
// its last line, its id and expiry on stderr (or all of them as JSON), so
// that `sandboxctl mcp revoke` can be given them (README "Use it from an
// agent").
func (c *cli) mcpTokenCommand() *cobra.Command {
	var keyFile string
	ttl := mcpauth.DefaultTTL
	cmd := &cobra.Command{
		Use:   "token WS [--ttl 1h] --key-file FILE",
		Short: "Mint a bearer token of `sandboxctl mcp --multi` for one workspace",
		Long: "Print a bearer token for workspace WS on the endpoint of `sandboxctl mcp --http ADDR --multi\n" +
			"--key-file FILE` (same key file): it opens http://ADDR/mcp/WS only, until --ttl from now\n" +
			"(default 1h, at most 720h). The token is stdout's last line; its id (32 random hex digits) and\n" +
			"expiry go to stderr; --json prints {\"token\", \"token_id\", \"workspace_id\", \"expires_at\"}. Record\n" +
			"the id and expiry to revoke the token before it expires (`sandboxctl mcp revoke --id ID\n" +
			"--expires-at T`). Minting needs the key only, not Temporal: it does not check that the\n" +
			"workspace exists.",
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
			tok, cl, err := key.Mint(args[0], ttl, time.Now())
			if err != nil {
				return err
			}
			exp := cl.Expiry.UTC().Format(time.RFC3339)
			if c.asJSON {
				return c.printJSON(map[string]string{"token": tok, "token_id": cl.TokenID, "workspace_id": cl.WorkspaceID, "expires_at": exp})
			}
			fmt.Fprintf(c.stderr, "sandboxctl mcp token: for %s, id %s, expires %s\n", cl.WorkspaceID, cl.TokenID, exp)
			fmt.Fprintln(c.stdout, tok)
			return nil
		},
	}
	cmd.Flags().Var(durationValue{&ttl}, "ttl", "how long the token is valid: a duration or seconds, at most 720h")
	cmd.Flags().StringVar(&keyFile, "key-file", envOr(mcpKeyFileEnv, ""), "the key file of the --multi endpoint ("+mcpKeyFileEnv+")")
	return cmd
}

// mcpRevokeCommand is `sandboxctl mcp revoke (--id ID [--expires-at T] |
// --token-file FILE) --revoked-file FILE`: adds a token id to the
// revocation list of the --multi endpoint (mcpauth.Revoke: locked, pruned,
// replaced atomically, mode 0600), which refuses the token from its next
// request on (docs/SECURITY.md "The MCP server").
func (c *cli) mcpRevokeCommand() *cobra.Command {
	var id, expiresAt, tokenFile, revokedFile string
	cmd := &cobra.Command{
		Use:   "revoke (--id ID [--expires-at RFC3339] | --token-file FILE) --revoked-file FILE",
		Short: "Revoke one token of `sandboxctl mcp --multi` before it expires",
		Long: "Add a token's id to the revocation list FILE of `sandboxctl mcp --multi --revoked-file FILE`:\n" +
			"the endpoint refuses the token with 401 from its next request on, in open sessions too, while\n" +
			"other tokens of the same workspace keep working. Name the token by its id (--id, as `sandboxctl\n" +
			"mcp token` printed it) or give the token itself in a file (--token-file FILE, - for stdin; it is\n" +
			"only read for its id: no key is needed, so its expiry, unchecked, is not trusted). The entry lasts\n" +
			"until --expires-at (as `mcp token --json` printed it) or, without it, 720h5m from now, past which\n" +
			"no token the endpoint accepts can live. The file is created when missing, written\n" +
			"under a lock (FILE.lock) as a new file renamed over the old one (mode 0600), and entries\n" +
			"whose expiry has passed are dropped, so it stays bounded. A token minted before token ids (v1.…)\n" +
			"has none and cannot be revoked alone: rotating the key ends every token.",
		Example: "  sandboxctl mcp token ws-0123… --key-file mcp.key --json   # records token_id, expires_at\n" +
			"  sandboxctl mcp revoke --id 00112233445566778899aabbccddeeff --expires-at 2026-01-01T01:00:00Z --revoked-file mcp.revoked\n" +
			"  printf '%s\\n' \"$TOKEN\" | sandboxctl mcp revoke --token-file - --revoked-file mcp.revoked",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			e, ws, err := c.revocation(id, expiresAt, tokenFile, now)
			if err != nil {
				return err
			}
			if revokedFile == "" {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "give --revoked-file FILE (or %s): the revocation list of the --multi endpoint", mcpRevokedFileEnv)
			}
			exp := e.Expiry.UTC().Format(time.RFC3339)
			out := map[string]any{"token_id": e.TokenID, "expires_at": exp, "revoked_file": revokedFile}
			if ws != "" {
				out["workspace_id"] = ws
			}
			if !now.Before(e.Expiry) {
				out["expired"] = true
				if c.asJSON {
					return c.printJSON(out)
				}
				fmt.Fprintf(c.stdout, "token %s expired at %s: nothing to revoke\n", e.TokenID, exp)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), revokeLockWait)
			defer cancel()
			n, err := mcpauth.Revoke(ctx, revokedFile, []mcpauth.Revocation{e}, now)
			if err != nil {
				return err
			}
			out["expired"], out["entries"] = false, n
			if c.asJSON {
				return c.printJSON(out)
			}
			fmt.Fprintf(c.stdout, "revoked token %s until %s (%s: entries %d)\n", e.TokenID, exp, revokedFile, n)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "the token id to revoke (32 lowercase hex digits, as sandboxctl mcp token prints it)")
	f.StringVar(&expiresAt, "expires-at", "", "with --id: the token's expiry, RFC 3339 (default: 720h5m from now, the longest a token lives)")
	f.StringVar(&tokenFile, "token-file", "", "a file holding the token to revoke (- = stdin), instead of --id")
	f.StringVar(&revokedFile, "revoked-file", envOr(mcpRevokedFileEnv, ""), "the revocation list of the --multi endpoint ("+mcpRevokedFileEnv+"; created when missing)")
	return cmd
}

// revokeLockWait bounds how long mcp revoke waits for another revoker's
// lock of the revocation file.
const revokeLockWait = 30 * time.Second

// revocation is the entry mcp revoke adds, from --id and --expires-at or
// from the token in --token-file (then also its workspace id), at now.
// Errors: InvalidArgument for none or both of --id and --token-file,
// --expires-at without --id, a malformed id, time or token, an expiry
// later than any token lives, or a v1 token (no id); a token file that
// cannot be read (untyped, exit 1).
func (c *cli) revocation(id, expiresAt, tokenFile string, now time.Time) (mcpauth.Revocation, string, error) {
	longest := now.Add(mcpauth.MaxTTL + mcpauth.MaxSkew).Truncate(time.Second)
	switch {
	case (id == "") == (tokenFile == ""):
		return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "give the token to revoke: --id ID or --token-file FILE (one of them)")
	case expiresAt != "" && id == "":
		return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--expires-at is for --id (a token file carries its expiry)")
	case id != "":
		if err := mcpauth.ValidateTokenID(id); err != nil {
			return mcpauth.Revocation{}, "", err
		}
		if expiresAt == "" {
			return mcpauth.Revocation{TokenID: id, Expiry: longest}, "", nil
		}
		t, err := time.Parse(time.RFC3339, expiresAt)
		if err != nil {
			return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--expires-at %q: want RFC 3339, e.g. 2030-01-02T15:04:05Z (the expires_at of mcp token --json)", expiresAt)
		}
		if t.After(longest) {
			return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--expires-at %s: no token the endpoint accepts lives past %s", expiresAt, longest.UTC().Format(time.RFC3339))
		}
		// A fraction of a second rounds up: the entry must not end before the token.
		return mcpauth.Revocation{TokenID: id, Expiry: time.Unix(t.Add(time.Second-time.Nanosecond).Unix(), 0)}, "", nil
	}
	data, err := c.readFileArg(tokenFile, 4096)
	if err != nil {
		return mcpauth.Revocation{}, "", err
	}
	cl, err := mcpauth.ParseToken(strings.TrimSpace(string(data)))
	if err != nil {
		return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--token-file %s: %v", tokenFile, err)
	}
	if cl.TokenID == "" {
		return mcpauth.Revocation{}, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
			"--token-file %s: a %s token (minted before token ids) has no id and cannot be revoked alone; it expires at %s, and rotating the key (--key-file) ends every token sooner",
			tokenFile, mcpauth.VersionV1, cl.Expiry.UTC().Format(time.RFC3339))
	}
	// The token's expiry is not checked here (no key is needed, so no MAC
	// is verified): a copy with an earlier expiry must not end the entry
	// before the real token, so the entry lasts as long as any token can.
	return mcpauth.Revocation{TokenID: cl.TokenID, Expiry: longest}, cl.WorkspaceID, nil
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
