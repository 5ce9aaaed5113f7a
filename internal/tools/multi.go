package tools

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxcore/sandboxcore/internal/mcpauth"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// MultiPattern is the path NewMultiHandler serves: one MCP endpoint per
// workspace, /mcp/<workspace id>.
const MultiPattern = "/mcp/{workspace}"

// Defaults of MultiOptions.
const (
	// DefaultSessionTimeout closes an MCP session no request came for.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultResumeWait bounds resuming the workspace of a new session.
	DefaultResumeWait = 20 * time.Second
)

// MultiOptions configure NewMultiHandler.
type MultiOptions struct {
	// Options of each session's server (Version, Logger, ListWait).
	Options
	// Key checks every request's bearer token (required).
	Key *mcpauth.Key
	// SessionTimeout closes a session that got no HTTP request for this
	// long (0: DefaultSessionTimeout); its client must initialize again.
	SessionTimeout time.Duration
	// ResumeWait bounds resuming the workspace when a session starts
	// (0: DefaultResumeWait); past it the session starts and its first
	// call tries again.
	ResumeWait time.Duration
}

// NewMultiHandler returns the streamable HTTP handler (official MCP Go
// SDK) of every workspace c reaches, at MultiPattern (README "Use it from
// an agent", docs/SECURITY.md "The MCP server"). Every request is checked
// by opts.Key.Require first: no valid token → 401, a token of another
// workspace → 403. A request that starts a session (a POST without
// Mcp-Session-Id: initialize) resumes the workspace, as `sandboxctl mcp
// --workspace` does at start-up, at most opts.ResumeWait: an id no
// workspace has is answered 404 with {"error": {"type":
// "WorkspaceNotFound", "message": …}}; another failure (no worker yet) is
// logged and the first tool call tries again. The session then gets its
// own NewServer bound to that workspace id, the SDK binds it to the
// token's workspace (a session id used under another workspace's path is
// refused with 403), and closes it after opts.SessionTimeout without a
// request. Nothing per workspace is kept beyond the open sessions. ctx
// bounds the servers' acquires.
func NewMultiHandler(ctx context.Context, c *sandboxclient.Client, opts MultiOptions) http.Handler {
	if opts.Key == nil {
		panic("tools: NewMultiHandler without a key")
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.ResumeWait <= 0 {
		opts.ResumeWait = DefaultResumeWait
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The SDK asks getServer on every request (for the protocol versions a
	// server speaks) but connects only the server of a request without a
	// session id, which sessionStart prepares; the others get a bare
	// server with the same versions and no tools.
	bare := mcp.NewServer(&mcp.Implementation{Name: "sandboxcore", Version: opts.Version}, nil)
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if p, ok := r.Context().Value(pendingKey{}).(*pendingServer); ok {
			return p.get()
		}
		return bare
	}, &mcp.StreamableHTTPOptions{SessionTimeout: opts.SessionTimeout, Logger: log})

	// The SDK's session binding: a session remembers the TokenInfo.UserID
	// (here the workspace id) of the request that made it and refuses
	// requests of another (403).
	bind := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		cl, ok := mcpauth.ClaimsFromContext(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: cl.WorkspaceID, Expiration: cl.Expiry}, nil
	}, &auth.RequireBearerTokenOptions{ClockSkew: time.Minute})

	start := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			p, ok := sessionStart(ctx, w, r, c, opts, log)
			if !ok {
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), pendingKey{}, p))
		}
		sdk.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle(MultiPattern, opts.Key.Require(func(r *http.Request) string { return r.PathValue("workspace") }, bind(start), log))
	return mux
}

type pendingKey struct{}

// pendingServer is the server of a session being started, made when the
// SDK first asks for it.
type pendingServer struct {
	get func() *mcp.Server
}

// sessionStart resumes the workspace of the request's path (its token
// checked already) for a new session and returns its server, or answers
// the request itself (404 WorkspaceNotFound) and returns false.
func sessionStart(ctx context.Context, w http.ResponseWriter, r *http.Request, c *sandboxclient.Client, opts MultiOptions, log *slog.Logger) (*pendingServer, bool) {
	wsID := r.PathValue("workspace")
	ws, err := NewWorkspace(c, Binding{WorkspaceID: wsID})
	if err != nil { // not reached: the token names a valid id
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	rctx, cancel := context.WithTimeout(r.Context(), opts.ResumeWait)
	_, _, err = ws.Acquire(rctx)
	cancel()
	if sandboxapi.IsWorkspaceNotFound(err) {
		te := ErrorFor(err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": te.Type, "message": te.Message}})
		return nil, false
	} else if err != nil {
		log.Warn("resume the workspace", "workspace", wsID, "error", err)
	}
	get := sync.OnceValue(func() *mcp.Server { return NewServer(ctx, ws, opts.Options).Server })
	return &pendingServer{get: get}, true
}
