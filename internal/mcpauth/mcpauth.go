// Package mcpauth is the bearer token of the multi-workspace MCP endpoint
// (`sandboxctl mcp --http ADDR --multi --key-file FILE`, README "Use it
// from an agent", docs/SECURITY.md "The MCP server"): a token scoped to one
// workspace and expiring, an HMAC under a key only the endpoint and the
// minters hold. Nothing is stored per token: the endpoint recomputes the
// HMAC.
//
// A token (ASCII, at most MaxTokenLen characters) is
//
//	v1.<workspace id>.<expiry>.<mac>
//
// where the workspace id is "ws-" and 24 lowercase hex digits, expiry is
// the end of its validity in Unix seconds (decimal, no sign, no leading
// zero, at most 12 digits) and mac is the unpadded base64url encoding (RFC
// 4648 §5, 43 characters) of
//
//	HMAC-SHA256(key, "sandboxcore-mcp v1" 0x00 <workspace id> 0x00 <expiry>)
//
// A token is valid while now < expiry (whole seconds). The Python SDK
// (python/src/sandboxcore/mcp_token.py) mints the same tokens; both check
// testdata/token-vectors.json.
package mcpauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

const (
	// Version is the token format's version, its first field.
	Version = "v1"
	// MinKeySize is the least number of key bytes (after base64 decoding).
	MinKeySize = 32
	// MaxKeyFileSize bounds what LoadKey reads, in bytes.
	MaxKeyFileSize = 4096
	// MaxTokenLen bounds a token, in characters; longer is ErrMalformed.
	MaxTokenLen = 256
	// DefaultTTL is how long a token lasts unless told (`sandboxctl mcp
	// token --ttl`).
	DefaultTTL = time.Hour
	// MaxTTL is the longest lifetime Mint gives a token; Verify refuses
	// (ErrMalformed) one whose expiry lies more than MaxTTL + MaxSkew ahead.
	MaxTTL = 30 * 24 * time.Hour
	// MaxSkew is the clock difference between a minter and the endpoint
	// that Verify tolerates for the MaxTTL check (not for expiry).
	MaxSkew = 5 * time.Minute
)

// macLabel starts every MAC input: the format and its version, so a MAC is
// never valid for another use of the key.
const macLabel = "sandboxcore-mcp v1\x00"

// The errors of Verify, each wrapped with what was wrong (never key
// material). All three mean HTTP 401 to the endpoint.
var (
	// ErrMalformed: not a v1 token (shape, workspace id, expiry digits,
	// MAC length), or an expiry further ahead than MaxTTL + MaxSkew.
	ErrMalformed = errors.New("malformed token")
	// ErrForged: well formed, but the MAC is not the key's.
	ErrForged = errors.New("the token's MAC does not match")
	// ErrExpired: the key's token, past its expiry.
	ErrExpired = errors.New("the token expired")
)

var (
	expiryPattern = regexp.MustCompile(`^[1-9][0-9]{0,11}$`)
	macPattern    = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
)

// Claims is what a valid token says: the one workspace it opens and the
// instant (whole seconds) it stops being valid.
type Claims struct {
	WorkspaceID string
	Expiry      time.Time
}

// Key is an HMAC key for tokens (at least MinKeySize bytes). Its String
// never shows the key.
type Key struct{ secret []byte }

// NewKey returns a Key holding a copy of secret. Errors: InvalidArgument
// for fewer than MinKeySize bytes.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < MinKeySize {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "an MCP token key must have at least %d bytes, not %d", MinKeySize, len(secret))
	}
	return &Key{secret: bytes.Clone(secret)}, nil
}

// String hides the key.
func (k *Key) String() string { return "mcpauth.Key(…)" }

// LoadKey reads the key file at path (at most MaxKeyFileSize bytes). With
// every ASCII white-space byte (space, \t, \n, \v, \f, \r) removed, a file
// that is non-empty and wholly base64 — the standard alphabet (A-Z a-z 0-9
// + /) or the URL one (A-Z a-z 0-9 - _), not mixed, with at most two
// trailing '=' — is decoded (padding optional) and must give at least
// MinKeySize bytes; any other file is the key itself, as read, and must
// hold at least MinKeySize bytes. Make one with
// `head -c 32 /dev/urandom | base64 > FILE`. Errors: InvalidArgument
// naming the file and what is wrong (never its content).
func LoadKey(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "key file: %v", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxKeyFileSize+1))
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "key file %s: %v", path, err)
	}
	defer clear(raw)
	if len(raw) > MaxKeyFileSize {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "key file %s is larger than %d bytes: want %d or more random bytes, raw or base64", path, MaxKeyFileSize, MinKeySize)
	}
	secret, err := KeyFromFile(raw)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "key file %s: %s", path, err.Error())
	}
	defer clear(secret)
	return NewKey(secret)
}

var (
	stdB64 = regexp.MustCompile(`^[A-Za-z0-9+/]+={0,2}$`)
	urlB64 = regexp.MustCompile(`^[A-Za-z0-9_-]+={0,2}$`)
)

// KeyFromFile returns the key bytes of a key file's content by LoadKey's
// rule. Errors (plain, without key material): base64 that does not decode
// or decodes to fewer than MinKeySize bytes, or fewer than MinKeySize raw
// bytes.
func KeyFromFile(raw []byte) ([]byte, error) {
	var b strings.Builder
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			b.WriteByte(c)
		}
	}
	text := b.String()
	var enc *base64.Encoding
	switch {
	case text != "" && stdB64.MatchString(text):
		enc = base64.RawStdEncoding
	case text != "" && urlB64.MatchString(text):
		enc = base64.RawURLEncoding
	}
	if enc == nil {
		if len(raw) < MinKeySize {
			return nil, fmt.Errorf("holds %d bytes: want %d or more random bytes, raw or base64 (e.g. `head -c 32 /dev/urandom | base64 > FILE`)", len(raw), MinKeySize)
		}
		return bytes.Clone(raw), nil
	}
	text = strings.TrimRight(text, "=")
	if len(text)%4 == 1 {
		return nil, errors.New("is not valid base64 (its length)")
	}
	secret, err := enc.DecodeString(text)
	if err != nil {
		return nil, errors.New("is not valid base64")
	}
	if len(secret) < MinKeySize {
		clear(secret)
		return nil, fmt.Errorf("holds base64 of %d bytes: want %d or more random bytes (e.g. `head -c 32 /dev/urandom | base64 > FILE`)", len(secret), MinKeySize)
	}
	return secret, nil
}

// Sign returns the token for workspace wsID expiring at expiry (Unix
// seconds), whatever the time now. Errors: InvalidArgument for a malformed
// workspace id or an expiry outside 1 … 999999999999.
func (k *Key) Sign(wsID string, expiry int64) (string, error) {
	if err := sandboxapi.ValidateWorkspaceID(wsID); err != nil {
		return "", err
	}
	if expiry < 1 || expiry > 999_999_999_999 {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "token expiry %d: want Unix seconds from 1 to 999999999999", expiry)
	}
	exp := strconv.FormatInt(expiry, 10)
	return Version + "." + wsID + "." + exp + "." + k.mac(wsID, exp), nil
}

// Mint returns a token for workspace wsID valid for ttl from now (its
// expiry is now + ttl in whole Unix seconds, rounded down) and that expiry.
// Errors: InvalidArgument for a malformed workspace id or a ttl below one
// second or above MaxTTL.
func (k *Key) Mint(wsID string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	if ttl < time.Second || ttl > MaxTTL {
		return "", time.Time{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "token lifetime %s: want 1s to %s", ttl, MaxTTL)
	}
	exp := now.Add(ttl).Unix()
	tok, err := k.Sign(wsID, exp)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, time.Unix(exp, 0), nil
}

// Verify checks token at now: its shape, its MAC (compared in constant
// time) and its expiry. Errors: ErrMalformed, ErrForged, ErrExpired, each
// wrapped with the reason.
func (k *Key) Verify(token string, now time.Time) (Claims, error) {
	if len(token) > MaxTokenLen {
		return Claims{}, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxTokenLen)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 4 {
		return Claims{}, fmt.Errorf("%w: want v1.<workspace id>.<expiry>.<mac>", ErrMalformed)
	}
	ver, wsID, exp, mac := parts[0], parts[1], parts[2], parts[3]
	switch {
	case ver != Version:
		return Claims{}, fmt.Errorf("%w: not a %s token", ErrMalformed, Version)
	case sandboxapi.ValidateWorkspaceID(wsID) != nil:
		return Claims{}, fmt.Errorf("%w: the workspace id is not ws- and 24 lowercase hex digits", ErrMalformed)
	case !expiryPattern.MatchString(exp):
		return Claims{}, fmt.Errorf("%w: the expiry is not Unix seconds", ErrMalformed)
	case !macPattern.MatchString(mac):
		return Claims{}, fmt.Errorf("%w: the MAC is not 43 base64url characters", ErrMalformed)
	}
	if subtle.ConstantTimeCompare([]byte(mac), []byte(k.mac(wsID, exp))) != 1 {
		return Claims{}, ErrForged
	}
	expiry, _ := strconv.ParseInt(exp, 10, 64) // 12 digits at most
	n := now.Unix()
	if n >= expiry {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, time.Unix(expiry, 0).UTC().Format(time.RFC3339))
	}
	if expiry-n > int64((MaxTTL+MaxSkew)/time.Second) {
		return Claims{}, fmt.Errorf("%w: it expires more than %s ahead", ErrMalformed, MaxTTL+MaxSkew)
	}
	return Claims{WorkspaceID: wsID, Expiry: time.Unix(expiry, 0)}, nil
}

// mac is the base64url (unpadded) HMAC-SHA256 of a token's fields.
func (k *Key) mac(wsID, exp string) string {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte(macLabel + wsID + "\x00" + exp))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
