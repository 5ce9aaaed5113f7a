package tools

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/mcpauth"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

const (
	multiA       = "ws-0123456789abcdef01234567"
	multiB       = "ws-89abcdef0123456789abcdef"
	multiMissing = "ws-000000000000000000000000"
)

// acquireFake is a Temporal client whose acquire update answers a writable
// handle for every workspace but multiMissing (WorkspaceNotFound); every
// other call panics (nil embedded client).
type acquireFake struct {
	client.Client
	acquires atomic.Int32
}

type fakeStart struct {
	client.WithStartWorkflowOperation
	id string
}

func (f *acquireFake) NewWithStartWorkflowOperation(opts client.StartWorkflowOptions, _ any, _ ...any) client.WithStartWorkflowOperation {
	return fakeStart{id: opts.ID}
}

func (f *acquireFake) UpdateWithStartWorkflow(_ context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.acquires.Add(1)
	wfID := opts.StartWorkflowOperation.(fakeStart).id
	for _, ws := range []string{multiA, multiB, multiMissing} {
		if strings.Contains(wfID, strings.TrimPrefix(ws, "ws-")) {
			if ws == multiMissing {
				return nil, temporal.NewNonRetryableApplicationError("no workspace "+ws, sandboxapi.ErrWorkspaceNotFound.Type, nil)
			}
			return fakeUpdate{h: sandboxapi.Handle{WorkspaceID: ws, Mode: sandboxapi.ModeEdit, Capabilities: sandboxapi.Capabilities{Writable: true}}}, nil
		}
	}
	return nil, temporal.NewNonRetryableApplicationError("unexpected workflow "+wfID, sandboxapi.ErrSandbox.Type, nil)
}

type fakeUpdate struct {
	client.WorkflowUpdateHandle
	h sandboxapi.Handle
}

func (u fakeUpdate) Get(_ context.Context, out any) error {
	p, err := converter.GetDefaultDataConverter().ToPayload(u.h)
	if err != nil {
		return err
	}
	return converter.GetDefaultDataConverter().FromPayload(p, out)
}

// bearerTransport sends "Authorization: Bearer <token>" with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

var multiSecret = []byte("multi-handler-test-key-0123456789abcdef")

func multiServer(t *testing.T, timeout time.Duration) (*httptest.Server, *mcpauth.Key, *acquireFake) {
	t.Helper()
	return multiServerWith(t, MultiOptions{SessionTimeout: timeout})
}

// multiServerWith is multiServer with opts (its Key and Options are the test's).
func multiServerWith(t *testing.T, opts MultiOptions) (*httptest.Server, *mcpauth.Key, *acquireFake) {
	t.Helper()
	key, err := mcpauth.NewKey(multiSecret)
	require.NoError(t, err)
	fake := &acquireFake{}
	sc := sandboxclient.New(fake, sandboxclient.Options{TaskQueue: "q"})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts.Key = key
	if opts.Options.Version == "" {
		opts.Options = Options{Version: "test", ListWait: time.Second}
	}
	srv := httptest.NewServer(NewMultiHandler(ctx, sc, opts))
	t.Cleanup(srv.Close)
	return srv, key, fake
}

func mint(t *testing.T, key *mcpauth.Key, ws string) string {
	t.Helper()
	tok, _, err := key.Mint(ws, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// signV1 makes a token of the format before token ids (v1: no id), as
// internal/mcpauth documents it.
func signV1(t *testing.T, secret []byte, ws string, exp int64) string {
	t.Helper()
	e := strconv.FormatInt(exp, 10)
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("sandboxcore-mcp v1\x00" + ws + "\x00" + e))
	return "v1." + ws + "." + e + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url, token, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// TestMultiHandlerAuth: the endpoint of many workspaces refuses a missing,
// forged or expired token (401, before the workspace is touched) and a
// token of another workspace (403); the workspace's own token starts a
// session (200) — and that session cannot be used under another
// workspace's path, even with that workspace's token (403).
func TestMultiHandlerAuth(t *testing.T) {
	srv, key, fake := multiServer(t, 0)
	other, err := mcpauth.NewKey([]byte("another-key-of-at-least-32-bytes-0002"))
	require.NoError(t, err)
	urlA, urlB := srv.URL+"/mcp/"+multiA, srv.URL+"/mcp/"+multiB
	expired, err := key.Sign(multiA, time.Now().Unix()-1)
	require.NoError(t, err)
	for _, c := range []struct {
		name, url, token string
		status           int
	}{
		{"missing", urlA, "", 401},
		{"garbage", urlA, "nope", 401},
		{"forged", urlA, mint(t, other, multiA), 401},
		{"expired", urlA, expired, 401},
		{"another workspace", urlA, mint(t, key, multiB), 403},
		{"a malformed path", srv.URL + "/mcp/ws-nope", mint(t, key, multiA), 403},
	} {
		res := post(t, c.url, c.token, "", initBody)
		assert.Equal(t, c.status, res.StatusCode, c.name)
		assert.True(t, strings.HasPrefix(res.Header.Get("WWW-Authenticate"), `Bearer realm="sandboxcore"`), "%s: %q", c.name, res.Header.Get("WWW-Authenticate"))
	}
	assert.Zero(t, fake.acquires.Load(), "nothing reached the workspace")
	for _, path := range []string{"/mcp", "/mcp/", "/mcp/" + multiA + "/x", "/"} {
		res := post(t, srv.URL+path, mint(t, key, multiA), "", initBody)
		assert.Equal(t, 404, res.StatusCode, path)
	}

	res := post(t, urlA, mint(t, key, multiA), "", initBody)
	require.Equal(t, 200, res.StatusCode)
	sid := res.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	assert.EqualValues(t, 1, fake.acquires.Load(), "the session resumed its workspace")

	// A's session under B's path with B's token: the SDK's session binding.
	res = post(t, urlB, mint(t, key, multiB), sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, 403, res.StatusCode)
	msg, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(msg), "session user mismatch")
	// Under its own path with a fresh token of A: served.
	res = post(t, urlA, mint(t, key, multiA), sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, 202, res.StatusCode)
	// Without a token: 401 even with the session id.
	res = post(t, urlA, "", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	assert.Equal(t, 401, res.StatusCode)
}

// TestMultiHandlerRevocation: with a revocation file, a token revoked
// while its session is open is refused (401 invalid_token, as an expired
// one) on the session's next request, and cannot start a new session; a
// sibling token of the same workspace carries the same session on, and a
// token minted before token ids (v1) still works. The file is followed
// without a restart.
func TestMultiHandlerRevocation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revoked")
	revoked, err := mcpauth.OpenRevocationList(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = revoked.Close() })
	srv, key, fake := multiServerWith(t, MultiOptions{Revoked: revoked})
	urlA := srv.URL + "/mcp/" + multiA
	tok1, c1, err := key.Mint(multiA, time.Hour, time.Now())
	require.NoError(t, err)
	tok2 := mint(t, key, multiA)
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	res := post(t, urlA, tok1, "", initBody)
	require.Equal(t, 200, res.StatusCode)
	sid := res.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	require.Equal(t, 202, post(t, urlA, tok1, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).StatusCode)
	require.Equal(t, 200, post(t, urlA, tok1, sid, list).StatusCode)
	acquires := fake.acquires.Load()

	_, err = mcpauth.Revoke(context.Background(), path, []mcpauth.Revocation{{TokenID: c1.TokenID, Expiry: c1.Expiry}}, time.Now())
	require.NoError(t, err)
	res = post(t, urlA, tok1, sid, list)
	assert.Equal(t, 401, res.StatusCode, "the open session's next request")
	assert.Equal(t, `Bearer realm="sandboxcore", error="invalid_token", error_description="the token was revoked"`, res.Header.Get("WWW-Authenticate"))
	res = post(t, urlA, tok1, "", initBody)
	assert.Equal(t, 401, res.StatusCode, "no new session either")
	assert.Equal(t, acquires, fake.acquires.Load(), "nothing reached the workspace")

	res = post(t, urlA, tok2, sid, list)
	assert.Equal(t, 200, res.StatusCode, "the sibling token carries the same session on")
	body, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(body), Shell)
	assert.Equal(t, 200, post(t, urlA, tok2, "", initBody).StatusCode)

	v1 := signV1(t, multiSecret, multiA, time.Now().Add(time.Hour).Unix())
	assert.Equal(t, 200, post(t, urlA, v1, sid, list).StatusCode, "a v1 token is still accepted")
}

// TestMultiHandlerUnknownWorkspace: a valid token of a workspace that does
// not exist gets 404 with the typed error at initialize.
func TestMultiHandlerUnknownWorkspace(t *testing.T) {
	srv, key, _ := multiServer(t, 0)
	res := post(t, srv.URL+"/mcp/"+multiMissing, mint(t, key, multiMissing), "", initBody)
	require.Equal(t, 404, res.StatusCode)
	var body struct {
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	assert.Equal(t, "WorkspaceNotFound", body.Error.Type)
}

// TestMultiHandlerSessions: the MCP Go SDK client drives two workspaces
// through one endpoint, each session with its own server and tool list;
// an idle session is closed after the session timeout.
func TestMultiHandlerSessions(t *testing.T) {
	srv, key, _ := multiServer(t, 300*time.Millisecond)
	connect := func(ws string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearerTransport{mint(t, key, ws)}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/" + ws, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a, b := connect(multiA), connect(multiB)
	for _, cs := range []*mcp.ClientSession{a, b} {
		res, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		assert.True(t, slices.Contains(got, Shell), "writable: %v", got)
		assert.Contains(t, cs.InitializeResult().Instructions, "sandbox_shell", "instructions of the resumed workspace")
	}
	time.Sleep(time.Second)
	_, err := a.ListTools(context.Background(), nil)
	assert.Error(t, err, "the idle session was closed")
}

// TestMultiHandlerBoundsSessionsPerWorkspace: a token holder cannot open
// sessions without end: past MaxSessions open sessions of its workspace a
// new one is refused (429 SandboxRateLimited), other workspaces are not
// affected, and a closed session frees its place.
func TestMultiHandlerBoundsSessionsPerWorkspace(t *testing.T) {
	srv, key, _ := multiServerWith(t, MultiOptions{SessionTimeout: time.Minute, MaxSessions: 2})
	connect := func(ws string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: bearerTransport{mint(t, key, ws)}}
		return mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/" + ws, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	}
	a1, err := connect(multiA)
	require.NoError(t, err)
	a2, err := connect(multiA)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a2.Close() })

	res := post(t, srv.URL+"/mcp/"+multiA, mint(t, key, multiA), "", initBody)
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	var body struct {
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	assert.Equal(t, sandboxapi.ErrRateLimited.Type, body.Error.Type)
	assert.Contains(t, body.Error.Message, "2 open MCP sessions")

	b, err := connect(multiB)
	require.NoError(t, err, "another workspace has places of its own")
	t.Cleanup(func() { _ = b.Close() })

	require.NoError(t, a1.Close()) // DELETE: the session ends, its place is free
	// The SDK ends the session right after answering the DELETE.
	var a3 *mcp.ClientSession
	require.Eventually(t, func() bool {
		a3, err = connect(multiA)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "a closed session frees its place: %v", err)
	t.Cleanup(func() { _ = a3.Close() })
	_, err = a3.ListTools(context.Background(), nil)
	require.NoError(t, err)
}

// TestStartsSession: only an initialize (or a body whose method cannot be
// read) takes a session place, and the body reaches the SDK whole.
func TestStartsSession(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"params":{"pad":"` + strings.Repeat("x", maxPeek) + `"},"method":"ping"}`
	for _, tc := range []struct {
		name, body string
		want       bool
	}{
		{"initialize", initBody, true},
		{"discover", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{"no method", `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{"not json", `not json`, true},
		{"batch", `[` + initBody + `]`, true},
		{"past the peek", big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp/x", strings.NewReader(tc.body))
			assert.Equal(t, tc.want, startsSession(r))
			got, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(got), "the SDK reads the whole body")
		})
	}
}
