// Package mcpauth is the bearer token of the multi-workspace MCP endpoint
// (`sandboxctl mcp --http ADDR --multi --key-file FILE`, README "Use it
// from an agent", docs/SECURITY.md "The MCP server"): a token scoped to one
// workspace and expiring, an HMAC under a key only the endpoint and the
// minters hold, and carrying a random id the endpoint's revocation list
// (RevocationList, `sandboxctl mcp revoke`) can name. Nothing is stored per
// token: the endpoint recomputes the HMAC and looks the id up.
//
// A token (ASCII, at most MaxTokenLen characters) is
//
//	v2.<workspace id>.<expiry>.<token id>.<mac>
//
// where the workspace id is "ws-" and 24 lowercase hex digits, expiry is
// the end of its validity in Unix seconds (decimal, no sign, no leading
// zero, at most 12 digits), the token id is 32 lowercase hex digits (128
// random bits, like a JWT's "jti") and mac is the unpadded base64url
// encoding (RFC 4648 §5, 43 characters) of
//
//	HMAC-SHA256(key, "sandboxcore-mcp v2" 0x00 <workspace id> 0x00 <expiry> 0x00 <token id>)
//
// Tokens minted before token ids existed,
//
//	v1.<workspace id>.<expiry>.<mac>
//
// with mac over "sandboxcore-mcp v1" 0x00 <workspace id> 0x00 <expiry>, are
// still accepted until they expire (at most MaxTTL after they were minted);
// having no id, they cannot be revoked one by one. A token is valid while
// now < expiry (whole seconds). The Python SDK
// (python/src/sandboxcore/mcp_token.py) mints the same tokens; both check
// testdata/token-vectors.json.
package mcpauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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
	// Version is the version of the tokens Mint and Sign make, their
	// first field.
	Version = "v2"
	// VersionV1 is the version of the tokens minted before token ids:
	// Verify still accepts them until they expire; they have no id.
	VersionV1 = "v1"
	// TokenIDLen is the length of a token id, in lowercase hex digits
	// (128 random bits).
	TokenIDLen = 32
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

// The labels that start every MAC input: the format and its version, so a
// MAC is never valid for another use of the key or another version.
const (
	macLabel   = "sandboxcore-mcp v2\x00"
	macLabelV1 = "sandboxcore-mcp v1\x00"
)

// The errors of Verify (ErrMalformed, ErrForged, ErrExpired) and Require
// (ErrRevoked), each wrapped with what was wrong (never key material).
// Each means HTTP 401 to the endpoint.
var (
	// ErrMalformed: not a v2 or v1 token (shape, workspace id, expiry
	// digits, token id, MAC length), or an expiry further ahead than
	// MaxTTL + MaxSkew.
	ErrMalformed = errors.New("malformed token")
	// ErrForged: well formed, but the MAC is not the key's.
	ErrForged = errors.New("the token's MAC does not match")
	// ErrExpired: the key's token, past its expiry.
	ErrExpired = errors.New("the token expired")
	// ErrRevoked: the key's token, unexpired, whose id the endpoint's
	// revocation list names (Require).
	ErrRevoked = errors.New("the token was revoked")
)

var (
	expiryPattern = regexp.MustCompile(`^[1-9][0-9]{0,11}$`)
	macPattern    = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	idPattern     = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// Claims is what a token says: the one workspace it opens, the instant
// (whole seconds) it stops being valid and its id.
type Claims struct {
	// WorkspaceID is "ws-" and 24 lowercase hex digits.
	WorkspaceID string
	// Expiry is the first instant the token is no longer valid.
	Expiry time.Time
	// TokenID is TokenIDLen lowercase hex digits; "" for a v1 token,
	// which has none (and so cannot be revoked one by one).
	TokenID string
}

// NewTokenID returns a new random token id: TokenIDLen lowercase hex
// digits (128 bits of crypto/rand).
func NewTokenID() string {
	var b [TokenIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// ValidateTokenID checks that id is a token id: TokenIDLen lowercase hex
// digits. Errors: InvalidArgument.
func ValidateTokenID(id string) error {
	if !idPattern.MatchString(id) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "token id %q: want %d lowercase hex digits", sandboxapi.Clip(id, 80), TokenIDLen)
	}
	return nil
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

// Sign returns a token for workspace wsID expiring at expiry (Unix
// seconds), whatever the time now, with a new random id (NewTokenID).
// Errors: as SignWithID.
func (k *Key) Sign(wsID string, expiry int64) (string, error) {
	return k.SignWithID(wsID, expiry, NewTokenID())
}

// SignWithID returns the token for workspace wsID expiring at expiry (Unix
// seconds) with id tokenID, whatever the time now. The caller keeps ids
// unique (Sign and Mint draw random ones). Errors: InvalidArgument for a
// malformed workspace id or token id, or an expiry outside 1 …
// 999999999999.
func (k *Key) SignWithID(wsID string, expiry int64, tokenID string) (string, error) {
	if err := sandboxapi.ValidateWorkspaceID(wsID); err != nil {
		return "", err
	}
	if err := ValidateTokenID(tokenID); err != nil {
		return "", err
	}
	if expiry < 1 || expiry > 999_999_999_999 {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "token expiry %d: want Unix seconds from 1 to 999999999999", expiry)
	}
	exp := strconv.FormatInt(expiry, 10)
	return Version + "." + wsID + "." + exp + "." + tokenID + "." + k.mac(wsID, exp, tokenID), nil
}

// Mint returns a token for workspace wsID valid for ttl from now, with a
// new random id, and its claims: its expiry is now + ttl in whole Unix
// seconds, rounded down. Record Claims.TokenID and Claims.Expiry to revoke
// it later (`sandboxctl mcp revoke`). Errors: InvalidArgument for a
// malformed workspace id or a ttl below one second or above MaxTTL.
func (k *Key) Mint(wsID string, ttl time.Duration, now time.Time) (string, Claims, error) {
	return k.mintWithID(wsID, ttl, now, NewTokenID())
}

// mintWithID is Mint with the token id given (the shared vectors).
func (k *Key) mintWithID(wsID string, ttl time.Duration, now time.Time, tokenID string) (string, Claims, error) {
	if ttl < time.Second || ttl > MaxTTL {
		return "", Claims{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "token lifetime %s: want 1s to %s", ttl, MaxTTL)
	}
	exp := now.Add(ttl).Unix()
	tok, err := k.SignWithID(wsID, exp, tokenID)
	if err != nil {
		return "", Claims{}, err
	}
	return tok, Claims{WorkspaceID: wsID, Expiry: time.Unix(exp, 0), TokenID: tokenID}, nil
}

// fields are a token's parts, checked for shape only.
type fields struct {
	version, wsID, exp, tokenID, mac string
	expiry                           int64
}

// parse splits token into its fields and checks their shape (not the MAC,
// not the time). Errors: ErrMalformed, wrapped with the reason.
func parse(token string) (fields, error) {
	if len(token) > MaxTokenLen {
		return fields{}, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxTokenLen)
	}
	parts := strings.Split(token, ".")
	var f fields
	switch {
	case len(parts) == 5 && parts[0] == Version:
		f = fields{version: parts[0], wsID: parts[1], exp: parts[2], tokenID: parts[3], mac: parts[4]}
	case len(parts) == 4 && parts[0] == VersionV1:
		f = fields{version: parts[0], wsID: parts[1], exp: parts[2], mac: parts[3]}
	case parts[0] == Version || parts[0] == VersionV1:
		return fields{}, fmt.Errorf("%w: want %s.<workspace id>.<expiry>.<token id>.<mac> (or %s.<workspace id>.<expiry>.<mac>)", ErrMalformed, Version, VersionV1)
	default:
		return fields{}, fmt.Errorf("%w: not a %s (or %s) token", ErrMalformed, Version, VersionV1)
	}
	switch {
	case sandboxapi.ValidateWorkspaceID(f.wsID) != nil:
		return fields{}, fmt.Errorf("%w: the workspace id is not ws- and 24 lowercase hex digits", ErrMalformed)
	case !expiryPattern.MatchString(f.exp):
		return fields{}, fmt.Errorf("%w: the expiry is not Unix seconds", ErrMalformed)
	case f.version == Version && !idPattern.MatchString(f.tokenID):
		return fields{}, fmt.Errorf("%w: the token id is not %d lowercase hex digits", ErrMalformed, TokenIDLen)
	case !macPattern.MatchString(f.mac):
		return fields{}, fmt.Errorf("%w: the MAC is not 43 base64url characters", ErrMalformed)
	}
	f.expiry, _ = strconv.ParseInt(f.exp, 10, 64) // 12 digits at most
	return f, nil
}

// ParseToken returns what token says without checking its MAC or its
// time: for a minter or an operator who holds the token and wants its id
// and expiry (`sandboxctl mcp revoke --token-file`). Never trust its
// claims for access: that is Verify. Errors: ErrMalformed, wrapped with the
// reason.
func ParseToken(token string) (Claims, error) {
	f, err := parse(token)
	if err != nil {
		return Claims{}, err
	}
	return Claims{WorkspaceID: f.wsID, Expiry: time.Unix(f.expiry, 0), TokenID: f.tokenID}, nil
}

// Verify checks token at now: its shape, its MAC (compared in constant
// time) and its expiry; a v1 token (no id) is accepted too, its claims'
// TokenID "". It does not consult a revocation list (Require does).
// Errors: ErrMalformed, ErrForged, ErrExpired, each wrapped with the
// reason.
func (k *Key) Verify(token string, now time.Time) (Claims, error) {
	f, err := parse(token)
	if err != nil {
		return Claims{}, err
	}
	want := k.mac(f.wsID, f.exp, f.tokenID)
	if f.version == VersionV1 {
		want = k.macV1(f.wsID, f.exp)
	}
	if subtle.ConstantTimeCompare([]byte(f.mac), []byte(want)) != 1 {
		return Claims{}, ErrForged
	}
	n := now.Unix()
	if n >= f.expiry {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, time.Unix(f.expiry, 0).UTC().Format(time.RFC3339))
	}
	if f.expiry-n > int64((MaxTTL+MaxSkew)/time.Second) {
		return Claims{}, fmt.Errorf("%w: it expires more than %s ahead", ErrMalformed, MaxTTL+MaxSkew)
	}
	return Claims{WorkspaceID: f.wsID, Expiry: time.Unix(f.expiry, 0), TokenID: f.tokenID}, nil
}

// mac is the base64url (unpadded) HMAC-SHA256 of a v2 token's fields.
func (k *Key) mac(wsID, exp, tokenID string) string {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte(macLabel + wsID + "\x00" + exp + "\x00" + tokenID))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// macV1 is the base64url (unpadded) HMAC-SHA256 of a v1 token's fields.
func (k *Key) macV1(wsID, exp string) string {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte(macLabelV1 + wsID + "\x00" + exp))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
