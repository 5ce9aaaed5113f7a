package mcpauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func testKeyT(t *testing.T) *Key {
	t.Helper()
	k, err := NewKey(testKey)
	require.NoError(t, err)
	return k
}

func TestNewKeyRefusesShortKeys(t *testing.T) {
	_, err := NewKey(make([]byte, MinKeySize-1))
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	k, err := NewKey(make([]byte, MinKeySize))
	require.NoError(t, err)
	assert.NotContains(t, k.String(), "\x00")
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	k, err := LoadKey(write("b64", []byte("c2FuZGJveGNvcmUtbWNwLXRlc3Qta2V5LW5vdC1hLXNlY3JldC0wMDAx\n")))
	require.NoError(t, err)
	assert.Equal(t, testKey, k.secret)

	for name, path := range map[string]string{
		"missing":   filepath.Join(dir, "none"),
		"short":     write("short", []byte("c2hvcnQ=\n")),
		"too large": write("large", []byte(strings.Repeat("A", MaxKeyFileSize+1))),
		"empty":     write("empty", nil),
	} {
		_, err := LoadKey(path)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "%s: %v", name, err)
	}
	_, err = LoadKey(write("secret", []byte("c2hv\n")))
	assert.NotContains(t, err.Error(), "c2hv", "the error never shows the key")
}

func TestMintAndVerify(t *testing.T) {
	k := testKeyT(t)
	now := time.Unix(t0, 500_000_000)
	tok, minted, err := k.Mint(wsA, time.Hour, now)
	require.NoError(t, err)
	exp := minted.Expiry
	assert.Equal(t, int64(t0+3600), exp.Unix())
	assert.True(t, strings.HasPrefix(tok, "v2."+wsA+".1767229200."+minted.TokenID+"."), tok)
	require.NoError(t, ValidateTokenID(minted.TokenID))
	c, err := k.Verify(tok, now)
	require.NoError(t, err)
	assert.Equal(t, Claims{WorkspaceID: wsA, Expiry: exp, TokenID: minted.TokenID}, c)
	parsed, err := ParseToken(tok)
	require.NoError(t, err)
	assert.Equal(t, minted, parsed)

	// Every mint draws a new id; Sign too.
	seen := map[string]bool{minted.TokenID: true}
	for range 100 {
		_, c, err := k.Mint(wsA, time.Hour, now)
		require.NoError(t, err)
		assert.False(t, seen[c.TokenID], "a repeated id")
		seen[c.TokenID] = true
	}
	signed, err := k.Sign(wsA, t0+60)
	require.NoError(t, err)
	c, err = k.Verify(signed, now)
	require.NoError(t, err)
	assert.False(t, seen[c.TokenID])
	for _, id := range []string{"", "nope", strings.Repeat("A", TokenIDLen), strings.Repeat("0", TokenIDLen-1), strings.Repeat("0", TokenIDLen) + "."} {
		_, err := k.SignWithID(wsA, t0+60, id)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "id %q: %v", id, err)
	}
	_, err = k.Verify(tok, exp.Add(-time.Nanosecond))
	assert.NoError(t, err, "valid until its expiry")
	_, err = k.Verify(tok, exp)
	assert.ErrorIs(t, err, ErrExpired)

	for _, ttl := range []time.Duration{0, -time.Hour, time.Second - 1, MaxTTL + time.Second} {
		_, _, err := k.Mint(wsA, ttl, now)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "ttl %s: %v", ttl, err)
	}
	_, _, err = k.Mint(wsA, MaxTTL, now)
	assert.NoError(t, err)
	for _, ws := range []string{"", "ws-nope", "WS-0123456789abcdef01234567", wsA + "."} {
		_, _, err := k.Mint(ws, time.Hour, now)
		assert.True(t, sandboxapi.IsInvalidArgument(err), "ws %q: %v", ws, err)
	}
	_, err = k.Sign(wsA, 0)
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	_, err = k.Sign(wsA, 1_000_000_000_000)
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
}

// TestRequire: the HTTP check answers 401 (missing, malformed, forged,
// expired; with a WWW-Authenticate challenge), 403 (another workspace's
// token) and lets the workspace's own token through with its claims.
func TestRequire(t *testing.T) {
	k := testKeyT(t)
	other, err := NewKey([]byte("another-key-of-at-least-32-bytes-0002"))
	require.NoError(t, err)
	var seen *Claims
	h := k.Require(func(r *http.Request) string { return r.PathValue("ws") }, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := ClaimsFromContext(r.Context())
		require.True(t, ok)
		seen = &c
		w.WriteHeader(http.StatusOK)
	}), nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp/{ws}", h)

	now := time.Now()
	mint := func(k *Key, ws string, exp time.Time) string {
		tok, err := k.Sign(ws, exp.Unix())
		require.NoError(t, err)
		return tok
	}
	ownA := mint(k, wsA, now.Add(time.Hour))
	v1A := signV1(k, wsA, now.Add(time.Hour).Unix())
	for _, c := range []struct {
		name, auth, path string
		status           int
		challenge        string
	}{
		{"missing", "", "/mcp/" + wsA, 401, `Bearer realm="sandboxcore"`},
		{"basic", "Basic " + ownA, "/mcp/" + wsA, 401, `Bearer realm="sandboxcore"`},
		{"no token", "Bearer", "/mcp/" + wsA, 401, `Bearer realm="sandboxcore"`},
		{"two tokens", "Bearer " + ownA + " " + ownA, "/mcp/" + wsA, 401, `Bearer realm="sandboxcore"`},
		{"malformed", "Bearer nope", "/mcp/" + wsA, 401, `error="invalid_token", error_description="invalid token"`},
		{"forged", "Bearer " + mint(other, wsA, now.Add(time.Hour)), "/mcp/" + wsA, 401, `error="invalid_token", error_description="invalid token"`},
		{"expired", "Bearer " + mint(k, wsA, now.Add(-time.Second)), "/mcp/" + wsA, 401, `error="invalid_token", error_description="the token expired"`},
		{"another workspace", "Bearer " + mint(k, wsB, now.Add(time.Hour)), "/mcp/" + wsA, 403, `error="insufficient_scope"`},
		{"for a malformed path", "Bearer " + ownA, "/mcp/ws-nope", 403, `error="insufficient_scope"`},
		{"own", "Bearer " + ownA, "/mcp/" + wsA, 200, ""},
		{"own, lower-case scheme", "bearer " + ownA, "/mcp/" + wsA, 200, ""},
		{"own, minted before token ids (v1)", "Bearer " + v1A, "/mcp/" + wsA, 200, ""},
		{"v1, expired", "Bearer " + signV1(k, wsA, now.Add(-time.Second).Unix()), "/mcp/" + wsA, 401, `error="invalid_token", error_description="the token expired"`},
		{"v1, another workspace", "Bearer " + signV1(k, wsB, now.Add(time.Hour).Unix()), "/mcp/" + wsA, 403, `error="insufficient_scope"`},
	} {
		seen = nil
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader("{}"))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		assert.Equal(t, c.status, rec.Code, c.name)
		if c.status == 200 {
			require.NotNil(t, seen, c.name)
			assert.Equal(t, wsA, seen.WorkspaceID, c.name)
			assert.Empty(t, rec.Header().Get("WWW-Authenticate"), c.name)
			continue
		}
		assert.Nil(t, seen, "%s: the handler was reached", c.name)
		assert.Contains(t, rec.Header().Get("WWW-Authenticate"), c.challenge, c.name)
		assert.True(t, strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer realm="sandboxcore"`), c.name)
		assert.NotContains(t, rec.Body.String(), ownA, c.name)
	}
}

func TestVerifyErrorsAreDistinct(t *testing.T) {
	for _, pair := range [][2]error{{ErrMalformed, ErrForged}, {ErrForged, ErrExpired}, {ErrMalformed, ErrExpired}, {ErrExpired, ErrRevoked}, {ErrForged, ErrRevoked}, {ErrMalformed, ErrRevoked}} {
		assert.False(t, errors.Is(pair[0], pair[1]))
	}
}
