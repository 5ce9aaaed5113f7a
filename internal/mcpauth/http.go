package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Realm is the realm of the WWW-Authenticate challenges Require sends.
const Realm = "sandboxcore"

type claimsKey struct{}

// ClaimsFromContext returns the claims Require verified for the request
// whose context ctx is.
func ClaimsFromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}

// Require lets a request through to next only when it carries
// "Authorization: Bearer <token>" (scheme case-insensitive) with a token k
// verifies now, that revoked (nil: nothing is revoked) does not name, for
// exactly the workspace workspaceOf(r) names; next finds the claims with
// ClaimsFromContext. Every request is checked, each one of an MCP session
// too, so a token revoked while its session is open is refused from the
// next request on. Refusals, before next sees anything:
//
//   - 401 with `WWW-Authenticate: Bearer realm="sandboxcore"` (RFC 6750
//     §3) for a missing token, plus `error="invalid_token"` for a
//     malformed, forged, expired or revoked one (error_description "the
//     token expired", "the token was revoked", else "invalid token");
//   - 403 with `error="insufficient_scope"` for a valid token of another
//     workspace.
//
// Each refusal is logged on log (nil: not logged) at Warn with the
// request's remote address, path and reason, never the token.
func (k *Key) Require(workspaceOf func(*http.Request) string, revoked *RevocationList, next http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, challenge, msg string, detail error) {
			log.Warn("mcp: request refused", "remote", r.RemoteAddr, "path", r.URL.Path, "status", status, "reason", msg, "error", detail)
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "sandboxcore: "+msg, status)
		}
		fields := strings.Fields(r.Header.Get("Authorization"))
		if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") {
			refuse(http.StatusUnauthorized, fmt.Sprintf("Bearer realm=%q", Realm), "a bearer token for this workspace is required (sandboxctl mcp token)", nil)
			return
		}
		now := time.Now()
		c, err := k.Verify(fields[1], now)
		if err == nil && revoked != nil && revoked.Revoked(c.TokenID, now) {
			err = fmt.Errorf("%w: token id %s", ErrRevoked, c.TokenID)
		}
		if err != nil {
			desc := "invalid token"
			switch {
			case errors.Is(err, ErrExpired):
				desc = "the token expired"
			case errors.Is(err, ErrRevoked):
				desc = "the token was revoked"
			}
			refuse(http.StatusUnauthorized, fmt.Sprintf("Bearer realm=%q, error=\"invalid_token\", error_description=%q", Realm, desc), desc, err)
			return
		}
		if ws := workspaceOf(r); c.WorkspaceID != ws {
			refuse(http.StatusForbidden, fmt.Sprintf("Bearer realm=%q, error=\"insufficient_scope\", error_description=%q", Realm, "the token is for another workspace"),
				"the token is for another workspace", fmt.Errorf("token for %s", c.WorkspaceID))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	})
}
