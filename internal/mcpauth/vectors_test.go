package mcpauth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vectorsFile holds the token vectors shared with the Python SDK
// (python/tests/test_mcp_token.py): tokens, v1 tokens (no id, still
// accepted), mints with fractional clocks, tokens to refuse and key files,
// each with what the format says. The file
// is committed; `go test ./internal/mcpauth -run TestVectors -update`
// rewrites it from vectorCases (review the diff: a changed token is a
// changed format).
const vectorsFile = "testdata/token-vectors.json"

var update = flag.Bool("update", false, "rewrite "+vectorsFile)

type tokenVector struct {
	Name        string  `json:"name"`
	WorkspaceID string  `json:"workspace_id"`
	Expiry      int64   `json:"expiry"`
	TokenID     string  `json:"token_id,omitempty"` // absent: a v1 token
	Token       string  `json:"token"`
	VerifyAt    float64 `json:"verify_at"` // a time (Unix seconds) the token is valid at
}

type mintVector struct {
	Name        string  `json:"name"`
	WorkspaceID string  `json:"workspace_id"`
	Now         float64 `json:"now"`   // Unix seconds
	TTL         float64 `json:"ttl_s"` // seconds
	TokenID     string  `json:"token_id"`
	Expiry      int64   `json:"expiry"`
	Token       string  `json:"token"`
}

type invalidVector struct {
	Name  string  `json:"name"`
	Token string  `json:"token"`
	Now   float64 `json:"now"`
	Error string  `json:"error"` // malformed, forged or expired
}

type keyFileVector struct {
	Name    string `json:"name"`
	Content []byte `json:"content"`       // the file's bytes (base64 in the file)
	Key     []byte `json:"key,omitempty"` // the key read from it (base64); absent: refused
}

type vectors struct {
	Comment  string          `json:"comment"`
	Key      []byte          `json:"key"`
	Tokens   []tokenVector   `json:"tokens"`
	V1Tokens []tokenVector   `json:"v1_tokens"`
	Mints    []mintVector    `json:"mints"`
	Invalid  []invalidVector `json:"invalid"`
	KeyFiles []keyFileVector `json:"key_files"`
}

const (
	wsA = "ws-0123456789abcdef01234567"
	wsB = "ws-89abcdef0123456789abcdef"
	t0  = 1_767_225_600 // 2026-01-01T00:00:00Z
)

var testKey = []byte("sandboxcore-mcp-test-key-not-a-secret-0001")

// Token ids of the vectors.
const (
	idA = "00112233445566778899aabbccddeeff"
	idB = "0123456789abcdef0123456789abcdef"
	idC = "fedcba9876543210fedcba9876543210"
)

// signV1 makes a token of the format before token ids (v1), which Verify
// still accepts.
func signV1(k *Key, ws string, exp int64) string {
	e := strconv.FormatInt(exp, 10)
	return VersionV1 + "." + ws + "." + e + "." + k.macV1(ws, e)
}

func unixFloat(f float64) time.Time {
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9))
}

// vectorCases computes the file's content with this package.
func vectorCases(t *testing.T) vectors {
	k, err := NewKey(testKey)
	require.NoError(t, err)
	other, err := NewKey([]byte("another-key-of-at-least-32-bytes-0002"))
	require.NoError(t, err)
	sign := func(k *Key, ws string, exp int64, id string) string {
		tok, err := k.SignWithID(ws, exp, id)
		require.NoError(t, err)
		return tok
	}
	v := vectors{
		Comment: "Shared test vectors of the MCP bearer token (internal/mcpauth, python/src/sandboxcore/mcp_token.py): " +
			"v2.<workspace id>.<expiry>.<token id>.<base64url(HMAC-SHA256(key, \"sandboxcore-mcp v2\\0\" + workspace id + \"\\0\" + expiry + \"\\0\" + token id))>; " +
			"v1_tokens, minted before token ids, are v1.<workspace id>.<expiry>.<base64url(HMAC-SHA256(key, \"sandboxcore-mcp v1\\0\" + workspace id + \"\\0\" + expiry))> and still valid until they expire. " +
			"key and key file contents are base64; times are Unix seconds. Public test keys: never use them for anything else. " +
			"Rewrite with `go test ./internal/mcpauth -run TestVectors -update`.",
		Key: testKey,
	}
	maxAhead := int64((MaxTTL + MaxSkew) / time.Second)
	for _, c := range []struct {
		name string
		ws   string
		exp  int64
		id   string
		at   float64
	}{
		{"one hour", wsA, t0 + 3600, idA, t0},
		{"another workspace", wsB, t0 + 3600, idA, t0},
		{"another id", wsA, t0 + 3600, idB, t0},
		{"last second", wsA, t0 + 1, idC, t0 + 0.999},
		{"thirty days and the skew ahead", wsB, t0 + maxAhead, idB, t0},
		{"twelve digits", wsA, 999_999_999_999, idC, 999_999_999_000},
	} {
		v.Tokens = append(v.Tokens, tokenVector{c.name, c.ws, c.exp, c.id, sign(k, c.ws, c.exp, c.id), c.at})
	}
	for _, c := range []struct {
		name string
		ws   string
		exp  int64
		at   float64
	}{
		{"one hour", wsA, t0 + 3600, t0},
		{"another workspace", wsB, t0 + 3600, t0},
		{"last second", wsA, t0 + 1, t0 + 0.999},
		{"thirty days and the skew ahead", wsB, t0 + maxAhead, t0},
	} {
		v.V1Tokens = append(v.V1Tokens, tokenVector{c.name, c.ws, c.exp, "", signV1(k, c.ws, c.exp), c.at})
	}
	for _, c := range []struct {
		name string
		ws   string
		now  float64
		ttl  float64
		id   string
	}{
		{"an hour", wsA, t0, 3600, idA},
		{"a fractional clock rounds down", wsA, t0 + 0.75, 3600, idA},
		{"a fractional ttl rounds down", wsB, t0 + 0.75, 3600.5, idB},
		{"one second", wsA, t0, 1, idC},
		{"thirty days", wsB, t0, MaxTTL.Seconds(), idA},
	} {
		tok, cl, err := k.mintWithID(c.ws, time.Duration(c.ttl*float64(time.Second)), unixFloat(c.now), c.id)
		require.NoError(t, err)
		v.Mints = append(v.Mints, mintVector{c.name, c.ws, c.now, c.ttl, c.id, cl.Expiry.Unix(), tok})
	}

	good := sign(k, wsA, t0+3600, idA)
	mac := good[strings.LastIndexByte(good, '.')+1:]
	body := strings.TrimSuffix(good, mac) // "v2.<ws>.<exp>.<id>."
	// The last character of a 43-character MAC carries 4 bits and 2 unused
	// ones: flipping an unused bit decodes to the same bytes non-strictly.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", mac[42])
	noncanon := good[:len(good)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])
	flip := []byte(good)
	if flip[len(flip)-10] == 'A' {
		flip[len(flip)-10] = 'B'
	} else {
		flip[len(flip)-10] = 'A'
	}
	withExp := func(exp string) string {
		return "v2." + wsA + "." + exp + "." + idA + "." + k.mac(wsA, exp, idA)
	}
	withID := func(id string) string {
		return "v2." + wsA + ".1767229200." + id + "." + k.mac(wsA, "1767229200", id)
	}
	goodV1 := signV1(k, wsA, t0+3600)
	macV1 := goodV1[strings.LastIndexByte(goodV1, '.')+1:]
	v.Invalid = append(v.Invalid, []invalidVector{
		{"expired at its expiry", sign(k, wsA, t0, idA), t0, "expired"},
		{"expired a second ago", sign(k, wsA, t0-1, idA), t0 + 0.5, "expired"},
		{"v1, expired at its expiry", signV1(k, wsA, t0), t0, "expired"},
		{"another key", sign(other, wsA, t0+3600, idA), t0, "forged"},
		{"v1, another key", signV1(other, wsA, t0+3600), t0, "forged"},
		{"a changed MAC character", string(flip), t0, "forged"},
		{"a non-canonical MAC", noncanon, t0, "forged"},
		{"another workspace's MAC", "v2." + wsB + "." + strings.TrimPrefix(good, "v2."+wsA+"."), t0, "forged"},
		{"a later expiry", "v2." + wsA + ".1767229201." + idA + "." + mac, t0, "forged"},
		{"another id", "v2." + wsA + ".1767229200." + idB + "." + mac, t0, "forged"},
		{"v1, a later expiry", "v1." + wsA + ".1767229201." + macV1, t0, "forged"},
		{"the v1 MAC under v2", "v2." + wsA + ".1767229200." + idA + "." + macV1, t0, "forged"},
		{"the v2 MAC without its id", "v1." + wsA + ".1767229200." + mac, t0, "forged"},
		{"too far ahead", sign(k, wsA, t0+maxAhead+1, idA), t0, "malformed"},
		{"v1, too far ahead", signV1(k, wsA, t0+maxAhead+1), t0, "malformed"},
		{"version 3", "v3" + strings.TrimPrefix(good, "v2"), t0, "malformed"},
		{"upper-case version", "V2" + strings.TrimPrefix(good, "v2"), t0, "malformed"},
		{"v2 without an id", "v2." + wsA + ".1767229200." + mac, t0, "malformed"},
		{"v1 with an id", "v1" + strings.TrimPrefix(good, "v2"), t0, "malformed"},
		{"three fields", "v2." + wsA + "." + mac, t0, "malformed"},
		{"six fields", good + ".x", t0, "malformed"},
		{"v1, five fields", goodV1 + ".x", t0, "malformed"},
		{"upper-case hex", "v2.ws-" + strings.ToUpper(wsA[3:]) + ".1767229200." + idA + "." + mac, t0, "malformed"},
		{"short workspace id", "v2.ws-0123.1767229200." + idA + "." + mac, t0, "malformed"},
		{"a leading zero", withExp("01767229200"), t0, "malformed"},
		{"a sign", withExp("+1767229200"), t0, "malformed"},
		{"thirteen digits", withExp("1000000000000"), t0, "malformed"},
		{"zero", withExp("0"), t0, "malformed"},
		{"upper-case id", withID(strings.ToUpper(idC)), t0, "malformed"},
		{"short id", withID(idA[:31]), t0, "malformed"},
		{"long id", withID(idA + "0"), t0, "malformed"},
		{"empty id", withID(""), t0, "malformed"},
		{"padded MAC", good + "=", t0, "malformed"},
		{"standard alphabet", body + strings.NewReplacer("-", "+", "_", "/").Replace(mac[:42]) + "+", t0, "malformed"},
		{"short MAC", good[:len(good)-1], t0, "malformed"},
		{"a line end", good + "\n", t0, "malformed"},
		{"a space", " " + good, t0, "malformed"},
		{"empty", "", t0, "malformed"},
		{"too long", good + strings.Repeat("A", MaxTokenLen), t0, "malformed"},
		{"not ASCII", body + mac[:41] + "é", t0, "malformed"},
	}...)

	raw32 := []byte("\x00\x01\x02 \xff\xfe=+/\n\r\tkey-bytes-raw-0123456789\x80")[:32]
	k32 := []byte("0123456789abcdef0123456789ABCDEF")
	k64 := []byte(strings.Repeat("sixty-four bytes of key! ", 3))[:64]
	b64 := base64.StdEncoding.EncodeToString
	wrapped := b64(k64)
	wrapped = wrapped[:76] + "\n" + wrapped[76:] + "\n"
	urlKey := []byte("\xfb\xff\xbf" + strings.Repeat("k", 29)) // encodes with - and _
	v.KeyFiles = append(v.KeyFiles, []keyFileVector{
		{"raw 32 bytes", raw32, raw32},
		{"base64 with a line end", []byte(b64(k32) + "\n"), k32},
		{"base64 without padding", []byte(strings.TrimRight(b64(k32), "=")), k32},
		{"base64url without padding", []byte(base64.RawURLEncoding.EncodeToString(urlKey) + "\r\n"), urlKey},
		{"base64url padded", []byte(base64.URLEncoding.EncodeToString(urlKey)), urlKey},
		{"base64 wrapped, 64 bytes", []byte(wrapped), k64},
		{"base64 with spaces around", []byte("  " + b64(k32) + " \t\n"), k32},
		{"hex is read as base64", []byte("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), mustB64(t, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")},
		{"a passphrase is raw", []byte("correct horse battery staple, 2026!\n"), []byte("correct horse battery staple, 2026!\n")},
		{"mixed alphabets are raw", []byte("+_" + strings.Repeat("A", 42)), []byte("+_" + strings.Repeat("A", 42))},
		{"base64 of 24 bytes", []byte(b64(k32[:24])), nil},
		{"base64 of 31 bytes", []byte(b64(k32[:31]) + "\n"), nil},
		{"base64 of a bad length", []byte(strings.Repeat("A", 45)), nil},
		{"three padding characters are raw", []byte(b64(k32) + "=="), []byte(b64(k32) + "==")},
		{"raw 31 bytes", raw32[:31], nil},
		{"empty", nil, nil},
		{"white space only", []byte(" \n\t\r\n"), nil},
	}...)
	return v
}

func mustB64(t *testing.T, s string) []byte {
	b, err := base64.RawStdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestVectors: this package agrees with the committed vectors (which the
// Python SDK checks too), and the vectors are what vectorCases computes.
func TestVectors(t *testing.T) {
	want := vectorCases(t)
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(want))
		require.NoError(t, os.WriteFile(vectorsFile, buf.Bytes(), 0o644))
	}
	b, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	var got vectors
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, want, got, "%s is stale: rerun with -update and review the diff", vectorsFile)

	k, err := NewKey(got.Key)
	require.NoError(t, err)
	for _, v := range got.Tokens {
		require.NotEmpty(t, v.TokenID, v.Name)
		tok, err := k.SignWithID(v.WorkspaceID, v.Expiry, v.TokenID)
		require.NoError(t, err, v.Name)
		assert.Equal(t, v.Token, tok, v.Name)
		want := Claims{v.WorkspaceID, time.Unix(v.Expiry, 0), v.TokenID}
		c, err := k.Verify(v.Token, unixFloat(v.VerifyAt))
		require.NoError(t, err, v.Name)
		assert.Equal(t, want, c, v.Name)
		c, err = ParseToken(v.Token)
		require.NoError(t, err, v.Name)
		assert.Equal(t, want, c, v.Name)
	}
	for _, v := range got.V1Tokens {
		assert.Equal(t, v.Token, signV1(k, v.WorkspaceID, v.Expiry), v.Name)
		c, err := k.Verify(v.Token, unixFloat(v.VerifyAt))
		require.NoError(t, err, "v1 %s", v.Name)
		assert.Equal(t, Claims{WorkspaceID: v.WorkspaceID, Expiry: time.Unix(v.Expiry, 0)}, c, "v1 %s: no token id", v.Name)
	}
	for _, v := range got.Mints {
		tok, c, err := k.mintWithID(v.WorkspaceID, time.Duration(v.TTL*float64(time.Second)), unixFloat(v.Now), v.TokenID)
		require.NoError(t, err, v.Name)
		assert.Equal(t, v.Token, tok, v.Name)
		assert.Equal(t, Claims{v.WorkspaceID, time.Unix(v.Expiry, 0), v.TokenID}, c, v.Name)
	}
	kinds := map[string]error{"malformed": ErrMalformed, "forged": ErrForged, "expired": ErrExpired}
	for _, v := range got.Invalid {
		_, err := k.Verify(v.Token, unixFloat(v.Now))
		require.Contains(t, kinds, v.Error, v.Name)
		assert.True(t, errors.Is(err, kinds[v.Error]), "%s: %v, want %s", v.Name, err, v.Error)
		if v.Error == "malformed" && v.Name != "too far ahead" && v.Name != "v1, too far ahead" {
			_, err := ParseToken(v.Token)
			assert.ErrorIs(t, err, ErrMalformed, v.Name)
		}
	}
	for _, v := range got.KeyFiles {
		key, err := KeyFromFile(v.Content)
		if v.Key == nil {
			assert.Error(t, err, v.Name)
			continue
		}
		require.NoError(t, err, v.Name)
		assert.Equal(t, v.Key, key, v.Name)
	}
}
