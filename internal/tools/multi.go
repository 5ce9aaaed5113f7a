package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
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
	// DefaultMaxSessions bounds the open sessions of one workspace.
	DefaultMaxSessions = 16
)

// MultiOptions configure NewMultiHandler.
type MultiOptions struct {
	// Options of each session's server (Version, Logger, ListWait).
	Options
	// Key checks every request's bearer token (required).
	Key *mcpauth.Key
	// Revoked lists the token ids refused before their expiry, followed
	// live (`--revoked-file`); nil: none is.
	Revoked *mcpauth.RevocationList
	// SessionTimeout closes a session that got no HTTP request for this
	// long (0: DefaultSessionTimeout); its client must initialize again.
	SessionTimeout time.Duration
	// ResumeWait bounds resuming the workspace when a session starts
	// (0: DefaultResumeWait); past it the session starts and its first
	// call tries again.
	ResumeWait time.Duration
	// MaxSessions bounds the open sessions of one workspace (0:
	// DefaultMaxSessions): one more is refused with 429 and
	// {"error": {"type": "SandboxRateLimited", …}} until one closes
	// (DELETE, or SessionTimeout without a request).
	MaxSessions int
}

// NewMultiHandler returns the streamable HTTP handler (official MCP Go
// SDK) of every workspace c reaches, at MultiPattern (README "Use it from
// an agent", docs/SECURITY.md "The MCP server"). Every request, each one
// of an open session too, is checked by opts.Key.Require first: no valid
// token (missing, malformed, forged, expired, or revoked by opts.Revoked)
// → 401, a token of another workspace → 403. A request that starts a
// session (a POST without Mcp-Session-Id: initialize) resumes the
// workspace, as `sandboxctl mcp --workspace` does at start-up, at most
// opts.ResumeWait: an id no workspace has is answered 404 with {"error": {"type":
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
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	open := &openSessions{byWorkspace: map[string][]*pendingServer{}}
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
			wsID := r.PathValue("workspace")
			// Only an initialize makes a session; a session-less request
			// of another method (server/discover, which clients send first
			// to learn the protocol versions) is answered and gone, so it
			// takes no place.
			opens := startsSession(r)
			if opens && !open.admit(wsID, opts.MaxSessions) {
				log.Warn("mcp: session refused, too many open", "workspace", wsID, "max", opts.MaxSessions)
				writeError(w, http.StatusTooManyRequests, sandboxapi.Errorf(sandboxapi.ErrRateLimited,
					"workspace %s has %d open MCP sessions, the most this endpoint keeps; close one (DELETE) or wait for one to time out", wsID, opts.MaxSessions))
				return
			}
			p, ok := sessionStart(ctx, w, r, c, opts, log)
			if opens {
				open.settle(wsID, p)
			}
			if !ok {
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), pendingKey{}, p))
			defer p.served.Store(true)
		}
		sdk.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle(MultiPattern, opts.Key.Require(func(r *http.Request) string { return r.PathValue("workspace") }, opts.Revoked, bind(start), log))
	return mux
}

type pendingKey struct{}

// maxPeek bounds what startsSession reads of a request body.
const maxPeek = 64 << 10

// startsSession reports whether r, a POST without a session id, may start a
// session: its JSON-RPC method is "initialize", or its body is not a single
// message whose method can be read in the first maxPeek bytes (counted, so
// a place is never given away on a guess). r's body is left whole for the
// SDK.
func startsSession(r *http.Request) bool {
	peek, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(peek), r.Body), r.Body}
	if err != nil {
		return true
	}
	var msg struct {
		Method *string `json:"method"`
	}
	if json.Unmarshal(peek, &msg) != nil || msg.Method == nil {
		return true
	}
	return *msg.Method == "initialize"
}

// pendingServer is the server of a session being started, made when the
// SDK first asks for it; served is set once the request that starts the
// session was answered (its session is then open until it closes).
type pendingServer struct {
	get    func() *mcp.Server
	made   atomic.Pointer[mcp.Server]
	served atomic.Bool
}

// open reports whether p still holds a place: its session is being
// started, or is open (a closed session leaves its server's sessions).
func (p *pendingServer) open() bool {
	if !p.served.Load() {
		return true
	}
	s := p.made.Load()
	if s == nil {
		return false // answered without a server: refused, or no session made
	}
	for range s.Sessions() {
		return true
	}
	return false
}

// openSessions counts the sessions of each workspace being started or
// open (MultiOptions.MaxSessions).
type openSessions struct {
	mu          sync.Mutex
	byWorkspace map[string][]*pendingServer
	starting    map[string]int
}

// admit reserves a place for a new session of wsID when fewer than max are
// starting or open; settle gives the place to the session's server (nil:
// none was made).
func (o *openSessions) admit(wsID string, max int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.byWorkspace[wsID][:0:0]
	for _, p := range o.byWorkspace[wsID] {
		if p.open() {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		delete(o.byWorkspace, wsID)
	} else {
		o.byWorkspace[wsID] = kept
	}
	if len(kept)+o.starting[wsID] >= max {
		return false
	}
	if o.starting == nil {
		o.starting = map[string]int{}
	}
	o.starting[wsID]++
	return true
}

func (o *openSessions) settle(wsID string, p *pendingServer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.starting[wsID]--; o.starting[wsID] <= 0 {
		delete(o.starting, wsID)
	}
	if p != nil {
		o.byWorkspace[wsID] = append(o.byWorkspace[wsID], p)
	}
}

// writeError answers a request with status and {"error": {"type", "message"}}.
func writeError(w http.ResponseWriter, status int, err error) {
	te := ErrorFor(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": te.Type, "message": te.Message}})
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
		writeError(w, http.StatusNotFound, err)
		return nil, false
	} else if err != nil {
		log.Warn("resume the workspace", "workspace", wsID, "error", err)
	}
	p := &pendingServer{}
	p.get = sync.OnceValue(func() *mcp.Server {
		s := NewServer(ctx, ws, opts.Options).Server
		p.made.Store(s)
		return s
	})
	return p, true
}
