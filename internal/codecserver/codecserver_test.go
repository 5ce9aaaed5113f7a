package codecserver

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/payloadcodec"
)

const (
	token    = "0123456789abcdef0123456789abcdef-codec-token"
	uiOrigin = "http://127.0.0.1:8233"
	marker   = "walrus-tangerine-42 printed by the build"
)

type fixture struct {
	srv   *httptest.Server
	codec *payloadcodec.Codec
	now   time.Time
}

func newFixture(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	secret := make([]byte, payloadcodec.KeySize)
	_, _ = rand.Read(secret)
	k, err := payloadcodec.NewKey("k1", secret)
	require.NoError(t, err)
	c, err := payloadcodec.New(k)
	require.NoError(t, err)
	f := &fixture{codec: c, now: time.Now()}
	o := Options{Codec: c, Token: token, AllowedOrigins: []string{uiOrigin}, Now: func() time.Time { return f.now }}
	if mod != nil {
		mod(&o)
	}
	h, err := New(o)
	require.NoError(t, err)
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// uiBody is the body the Web UI (ui-server v2.55.0) posts: the payloads as
// the UI holds them, metadata values and data in base64.
func (f *fixture) uiBody(t *testing.T) string {
	t.Helper()
	p, err := f.codec.DataConverter().ToPayload(marker)
	require.NoError(t, err)
	md := map[string]string{}
	for k, v := range p.Metadata {
		md[k] = base64.StdEncoding.EncodeToString(v)
	}
	b, err := json.Marshal(map[string]any{"payloads": []any{map[string]any{"metadata": md, "data": base64.StdEncoding.EncodeToString(p.Data)}}})
	require.NoError(t, err)
	require.NotContains(t, string(b), "walrus")
	return string(b)
}

// uiRequest is the request the Web UI's data encoder makes.
func (f *fixture) uiRequest(t *testing.T, op, body string, mod func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/"+op+"?preserveStorageRefs=true", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Origin", uiOrigin)
	if mod != nil {
		mod(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func read(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

func bearer(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }

func TestDecodesTheUIRequestFormat(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.uiRequest(t, "decode", f.uiBody(t), bearer)
	body := read(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	var out struct {
		Payloads []struct {
			Metadata map[string]string `json:"metadata"`
			Data     string            `json:"data"`
		} `json:"payloads"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Len(t, out.Payloads, 1)
	enc, _ := base64.StdEncoding.DecodeString(out.Payloads[0].Metadata["encoding"])
	assert.Equal(t, "json/plain", string(enc))
	data, _ := base64.StdEncoding.DecodeString(out.Payloads[0].Data)
	assert.Equal(t, `"`+marker+`"`, string(data))

	// The browser's preflight for that request.
	req, _ := http.NewRequest(http.MethodOptions, f.srv.URL+"/decode?preserveStorageRefs=true", nil)
	req.Header.Set("Origin", uiOrigin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-namespace") // as browsers send it: sorted, lower case
	pre, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer pre.Body.Close()
	assert.Less(t, pre.StatusCode, 300)
	assert.Equal(t, uiOrigin, pre.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, strings.ToLower(pre.Header.Get("Access-Control-Allow-Headers")), "x-namespace")
	assert.Equal(t, "true", pre.Header.Get("Access-Control-Allow-Credentials"))

	// Encode: what the UI sends when an operator starts a workflow or signals.
	plain, err := converter.GetDefaultDataConverter().ToPayload("from the UI")
	require.NoError(t, err)
	b, _ := json.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{plain}})
	resp = f.uiRequest(t, "encode", string(b), bearer)
	body = read(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.NotContains(t, body, base64.StdEncoding.EncodeToString([]byte(`"from the UI"`)))
	var ps commonpb.Payloads
	require.NoError(t, json.Unmarshal([]byte(body), &ps))
	var s string
	require.NoError(t, f.codec.DataConverter().FromPayload(ps.Payloads[0], &s))
	assert.Equal(t, "from the UI", s)
}

func TestRefusesWithoutTheToken(t *testing.T) {
	f := newFixture(t, nil)
	body := f.uiBody(t)
	for name, mod := range map[string]func(*http.Request){
		"no credentials": nil,
		"wrong token":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("x", len(token))) },
		"token prefix":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token[:32]) },
		"basic scheme":   func(r *http.Request) { r.SetBasicAuth("x", token) },
		"forged cookie":  func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: "99999999999.AAAA"}) },
	} {
		resp := f.uiRequest(t, "decode", body, mod)
		got := read(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		assert.NotContains(t, got, "walrus", name)
		assert.NotContains(t, got, base64.StdEncoding.EncodeToString([]byte(`"`+marker)), name)
		assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"), "%s: the UI can read the refusal and show the payload undecoded", name)
	}
	resp := f.uiRequest(t, "decode", body, func(r *http.Request) {
		bearer(r)
		r.Header.Set("Origin", "https://evil.example")
	})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another origin is refused even with the token")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	resp = f.uiRequest(t, "decode", strings.Repeat(" ", 100), func(r *http.Request) { r.Method = http.MethodGet })
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp = f.uiRequest(t, "download", body, bearer)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	_, err := New(Options{Codec: f.codec, Token: "short"})
	assert.ErrorContains(t, err, "at least 32 bytes")
	_, err = New(Options{Token: token})
	assert.Error(t, err)
	_, err = New(Options{Codec: f.codec, Token: token, AllowedOrigins: []string{"127.0.0.1:8233"}})
	assert.ErrorContains(t, err, "scheme://host")
}

func TestBrowserSessionFromLogin(t *testing.T) {
	f := newFixture(t, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.srv.URL + "/login")
	require.NoError(t, err)
	page := read(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `type="password" name="token"`)
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	resp, err = noRedirect.PostForm(f.srv.URL+"/login", url.Values{"token": {"nope"}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Empty(t, resp.Cookies())

	resp, err = noRedirect.PostForm(f.srv.URL+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.Equal(t, CookieName, c.Name)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.NotContains(t, c.Value, token, "the cookie never holds the token")

	withCookie := func(r *http.Request) { r.AddCookie(c) }
	resp = f.uiRequest(t, "decode", f.uiBody(t), withCookie)
	assert.Equal(t, http.StatusOK, resp.StatusCode, read(t, resp))
	resp = f.uiRequest(t, "decode", f.uiBody(t), func(r *http.Request) {
		r.AddCookie(c)
		r.Header.Set("Authorization", "Bearer some-oidc-access-token")
	})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a UI that passes its own OIDC token still has the session")

	tampered := *c
	tampered.Value = "9" + c.Value[1:]
	resp = f.uiRequest(t, "decode", f.uiBody(t), func(r *http.Request) { r.AddCookie(&tampered) })
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	f.now = f.now.Add(DefaultSessionTTL + time.Second)
	resp = f.uiRequest(t, "decode", f.uiBody(t), withCookie)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the session expires")

	secure := newFixture(t, func(o *Options) { o.Secure = true })
	resp, err = noRedirect.PostForm(secure.srv.URL+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	require.Len(t, resp.Cookies(), 1)
	assert.True(t, resp.Cookies()[0].Secure)
	assert.Equal(t, http.SameSiteNoneMode, resp.Cookies()[0].SameSite)
}

func TestSDKRemoteCodecAndBodyLimit(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxBodyBytes = 4096 })
	// What the Temporal CLI (--codec-endpoint, --codec-auth) and the SDK's
	// remote data converter send.
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: f.srv.URL,
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		},
	})
	p, err := converter.GetDefaultDataConverter().ToPayload(marker)
	require.NoError(t, err)
	enc, err := remote.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.True(t, payloadcodec.IsEncrypted(enc[0]))
	dec, err := remote.Decode(enc)
	require.NoError(t, err)
	assert.Equal(t, p.Data, dec[0].Data)

	big, err := converter.GetDefaultDataConverter().ToPayload(strings.Repeat("x", 8192))
	require.NoError(t, err)
	_, err = remote.Encode([]*commonpb.Payload{big})
	assert.ErrorContains(t, err, "Bad Request")
}
