// Package payloadcodec encrypts Temporal payloads so that Temporal's history,
// visibility store, backups and Web UI hold ciphertext instead of workspace
// content (file contents, patches, command output, commit messages, error
// messages). It is a converter.PayloadCodec for the Temporal Go SDK and a
// leaf: it imports nothing else from sandboxcore, so other Go modules that
// talk to an encrypted sandboxcore deployment can use it as it is.
//
// The format (docs/API.md "Payload encryption"): every payload is replaced by
// one with metadata
//
//	encoding          = "binary/encrypted"
//	encryption-cipher = "AES-256-GCM-HKDF-SHA256"
//	encryption-key-id = <the key's id>
//
// and data
//
//	0x01 | salt (16 random bytes) | nonce (12 random bytes) | AES-256-GCM ciphertext and tag
//
// where the plaintext is the original payload (metadata and data) in protobuf
// binary form, the AES key is HKDF-SHA256(key, salt, info
// "sandboxcore payload v1") — a fresh key per payload, so the GCM limit of
// 2^32 random nonces per key never applies — and the additional
// authenticated data is "sandboxcore payload v1", a zero byte and the key id.
//
// Keys rotate: the first key of a Codec encrypts, every key decrypts, and the
// key id travels in the payload's metadata (docs/SECURITY.md "Payload
// encryption").
package payloadcodec

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Metadata keys and values of an encrypted payload (docs/API.md "Payload
// encryption").
const (
	MetadataEncoding = converter.MetadataEncoding // "encoding"
	MetadataCipher   = "encryption-cipher"
	MetadataKeyID    = "encryption-key-id"
	// Encoding is the "encoding" of every encrypted payload; the Temporal Web
	// UI shows such payloads as they are unless a codec server decodes them.
	Encoding = "binary/encrypted"
	// Cipher names this package's scheme in MetadataCipher.
	Cipher = "AES-256-GCM-HKDF-SHA256"
)

// KeySize is the size of every key in bytes (AES-256).
const KeySize = 32

const (
	formatVersion = 0x01
	saltSize      = 16
	nonceSize     = 12
	label         = "sandboxcore payload v1"
)

// ErrUnknownKey is returned by Decode for a payload encrypted with a key id
// the Codec does not hold (add the old key back to SANDBOX_PAYLOAD_KEYS,
// after the key that encrypts).
var ErrUnknownKey = errors.New("payloadcodec: payload encrypted with a key this codec does not hold")

// ErrCorrupt is returned by Decode for an encrypted payload that does not
// authenticate under its key (altered, truncated, or a different key under
// the same id) or that names another scheme.
var ErrCorrupt = errors.New("payloadcodec: encrypted payload is corrupt or was not encrypted with this key")

// ErrPlaintext is returned by Decode of a codec that requires encryption
// (Options.RequireEncryption) for a payload that carries no encryption
// metadata: one written by a client without the keys (or before keys were
// configured). The SDK then refuses what carried it — an update or a query
// is rejected, a workflow started with it fails, a signal is dropped — and
// TypedFailureConverter reports it as UndecodableType ("InvalidArgument").
var ErrPlaintext = errors.New("payloadcodec: plaintext payload refused: this worker requires encrypted payloads (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION)")

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Key is one AES-256 key and its id. The secret is never printed: Key
// implements fmt.Formatter and renders as payloadcodec.Key{ID:…}.
type Key struct {
	id     string
	secret [KeySize]byte
}

// NewKey makes a key from its id ([A-Za-z0-9][A-Za-z0-9._-]{0,63}, stored in
// every payload it encrypts) and exactly KeySize secret bytes (copied).
// Errors: a malformed id, a secret of another size, or an all-zero secret.
func NewKey(id string, secret []byte) (Key, error) {
	if !keyIDPattern.MatchString(id) {
		return Key{}, fmt.Errorf("payloadcodec: key id %q: want 1 to 64 characters from A-Z a-z 0-9 . _ - (starting with a letter or digit)", id)
	}
	if len(secret) != KeySize {
		return Key{}, fmt.Errorf("payloadcodec: key %q: %d bytes, want %d", id, len(secret), KeySize)
	}
	var k Key
	k.id = id
	copy(k.secret[:], secret)
	if k.secret == ([KeySize]byte{}) {
		return Key{}, fmt.Errorf("payloadcodec: key %q is all zero bytes: generate one with `head -c 32 /dev/urandom | base64`", id)
	}
	return k, nil
}

// ID returns the key's id.
func (k Key) ID() string { return k.id }

// Format prints the key's id only, whatever the verb.
func (k Key) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "payloadcodec.Key{ID:%s}", k.id) }

// Codec encrypts and decrypts payloads; it implements converter.PayloadCodec
// and is safe for concurrent use.
type Codec struct {
	primary Key
	keys    map[string]Key
	ids     []string
	opts    Options
}

// Options change how a Codec decodes (Codec.WithOptions). The zero value is
// what New returns: plaintext payloads are read as they are.
type Options struct {
	// RequireEncryption makes Decode refuse every payload that carries no
	// encryption metadata with ErrPlaintext, whatever its encoding — JSON,
	// "binary/null" (a nil value), a payload without metadata — so that a
	// client without the keys cannot drive a worker with plaintext
	// arguments. A codec of this package encrypts everything it encodes,
	// nil values included, and the Temporal SDK runs its own payloads (the
	// __temporal_workflow_metadata query's result, version and side-effect
	// markers) through the same converter, so workers and clients that hold
	// the keys are unaffected; what never passes through a codec (search
	// attributes, headers) is unaffected either way. Turn it on once no
	// history written without keys must still be replayed or read by the
	// workers (docs/SECURITY.md "Payload encryption",
	// SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION). A codec server keeps it off: it
	// decodes whatever the Web UI shows.
	RequireEncryption bool
}

// New returns a Codec that encrypts with keys[0] and decrypts with any of
// keys. Errors: no key, or two keys with one id.
func New(keys ...Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("payloadcodec: no key")
	}
	c := &Codec{primary: keys[0], keys: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if k.id == "" {
			return nil, errors.New("payloadcodec: a key made without NewKey")
		}
		if _, dup := c.keys[k.id]; dup {
			return nil, fmt.Errorf("payloadcodec: key id %q appears twice", k.id)
		}
		c.keys[k.id] = k
		c.ids = append(c.ids, k.id)
	}
	return c, nil
}

// WithOptions returns a Codec with c's keys and opts (c is unchanged).
func (c *Codec) WithOptions(opts Options) *Codec {
	cp := *c
	cp.opts = opts
	return &cp
}

// Options returns the options of c.
func (c *Codec) Options() Options { return c.opts }

// EncryptionKeyID is the id of the key new payloads are encrypted with.
func (c *Codec) EncryptionKeyID() string { return c.primary.id }

// KeyIDs lists the ids of every key, the encrypting one first.
func (c *Codec) KeyIDs() []string { return append([]string(nil), c.ids...) }

// Format prints the key ids only, whatever the verb.
func (c Codec) Format(f fmt.State, _ rune) {
	if c.opts.RequireEncryption {
		fmt.Fprintf(f, "payloadcodec.Codec{KeyIDs:%v RequireEncryption:true}", c.ids)
		return
	}
	fmt.Fprintf(f, "payloadcodec.Codec{KeyIDs:%v}", c.ids)
}

// Encode encrypts every payload with the first key (converter.PayloadCodec).
// Payloads already encrypted by this scheme are kept as they are. The inputs
// are not modified.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if IsEncrypted(p) {
			out[i] = p
			continue
		}
		e, err := c.encrypt(p)
		if err != nil {
			return payloads, err
		}
		out[i] = e
	}
	return out, nil
}

// Decode decrypts every encrypted payload (converter.PayloadCodec). A payload
// without the "binary/encrypted" encoding is returned as it is: history
// written before keys were configured stays readable — unless the codec
// requires encryption (Options.RequireEncryption): then it is ErrPlaintext,
// naming its encoding. Errors: ErrUnknownKey naming the key id, ErrCorrupt,
// ErrPlaintext.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.GetMetadata()[MetadataEncoding]); enc != Encoding {
			if c.opts.RequireEncryption {
				if enc == "" {
					enc = "none"
				}
				return payloads, fmt.Errorf("%w (payload %d of %d, encoding %q)", ErrPlaintext, i+1, len(payloads), clipEncoding(enc))
			}
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return payloads, err
		}
		out[i] = d
	}
	return out, nil
}

// IsEncrypted reports whether p carries this package's encryption metadata.
func IsEncrypted(p *commonpb.Payload) bool {
	md := p.GetMetadata()
	return string(md[MetadataEncoding]) == Encoding && string(md[MetadataCipher]) == Cipher
}

func (c *Codec) encrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	plain, err := proto.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("payloadcodec: marshal payload: %w", err)
	}
	buf := make([]byte, 1+saltSize+nonceSize, 1+saltSize+nonceSize+len(plain)+16)
	buf[0] = formatVersion
	salt, nonce := buf[1:1+saltSize], buf[1+saltSize:]
	if _, err := rand.Read(buf[1:]); err != nil {
		return nil, fmt.Errorf("payloadcodec: random: %w", err)
	}
	aead, err := payloadAEAD(c.primary, salt)
	if err != nil {
		return nil, err
	}
	data := aead.Seal(buf, nonce, plain, additionalData(c.primary.id))
	return &commonpb.Payload{
		Metadata: map[string][]byte{
			MetadataEncoding: []byte(Encoding),
			MetadataCipher:   []byte(Cipher),
			MetadataKeyID:    []byte(c.primary.id),
		},
		Data: data,
	}, nil
}

func (c *Codec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if got := string(md[MetadataCipher]); got != Cipher {
		return nil, fmt.Errorf("%w: %s %q, want %q", ErrCorrupt, MetadataCipher, got, Cipher)
	}
	id := string(md[MetadataKeyID])
	k, ok := c.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w: key id %q (this codec holds %v)", ErrUnknownKey, id, c.ids)
	}
	data := p.GetData()
	if len(data) < 1+saltSize+nonceSize+16 || data[0] != formatVersion {
		return nil, fmt.Errorf("%w: key id %q: malformed data", ErrCorrupt, id)
	}
	salt, nonce, sealed := data[1:1+saltSize], data[1+saltSize:1+saltSize+nonceSize], data[1+saltSize+nonceSize:]
	aead, err := payloadAEAD(k, salt)
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, nonce, sealed, additionalData(id))
	if err != nil {
		return nil, fmt.Errorf("%w: key id %q", ErrCorrupt, id)
	}
	var out commonpb.Payload
	if err := proto.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("%w: key id %q: %v", ErrCorrupt, id, err)
	}
	return &out, nil
}

func payloadAEAD(k Key, salt []byte) (cipher.AEAD, error) {
	sub, err := hkdf.Key(sha256.New, k.secret[:], salt, label, KeySize)
	if err != nil {
		return nil, fmt.Errorf("payloadcodec: derive key: %w", err)
	}
	block, err := aes.NewCipher(sub)
	if err != nil {
		return nil, fmt.Errorf("payloadcodec: %w", err)
	}
	return cipher.NewGCM(block)
}

func additionalData(keyID string) []byte {
	var b bytes.Buffer
	b.WriteString(label)
	b.WriteByte(0)
	b.WriteString(keyID)
	return b.Bytes()
}

// DataConverter returns the SDK's default data converter with this codec
// applied to every payload it produces: workflow, activity, update, signal
// and query arguments and results, heartbeat details, memo fields (the SDK
// encodes memos with the client's data converter) — everything but search
// attributes, which Temporal indexes in plaintext by design.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter returns the SDK's default failure converter with
// EncodeCommonAttributes on and this codec's data converter: an error's
// message and stack trace travel in an encrypted payload (the history shows
// "Encoded failure"), while its type — the sandbox error kind, e.g.
// "FileNotFound" — stays readable, so typed errors still work for clients
// in any language.
//
// Two guards close gaps of the SDK's converter (go.temporal.io/sdk v1.50.0):
// FailureToError decodes the failure it is given in place, and the SDK hands
// it failures it also records in commands (a local activity's marker), which
// would then reach the history with the decoded message next to the encoded
// one; so FailureToError here works on a copy. And ErrorToFailure returns the
// failure an error was decoded from as it is, so one decoded from plaintext
// (written before keys were configured, or by the server) or already decoded
// in place is sealed again here before it is recorded.
//
// An error caused by a payload this codec cannot decode (a key it does not
// hold, a corrupt payload) is sent typed: TypedFailureConverter.
func (c *Codec) FailureConverter() converter.FailureConverter {
	dc := c.DataConverter()
	return TypedFailureConverter(&failureConverter{dc: dc, inner: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true,
	})})
}

// encodedMessage is the message the SDK leaves in an encoded failure.
const encodedMessage = "Encoded failure"

type failureConverter struct {
	dc    converter.DataConverter
	inner converter.FailureConverter
}

func (f *failureConverter) ErrorToFailure(err error) *failurepb.Failure {
	out := f.inner.ErrorToFailure(err)
	if sealed(out) {
		return out
	}
	out = proto.Clone(out).(*failurepb.Failure)
	for x := out; x != nil; x = x.Cause {
		switch {
		case x.EncodedAttributes != nil:
			x.Message, x.StackTrace = encodedMessage, ""
		case x.Message != "" || x.StackTrace != "":
			if err := converter.EncodeCommonFailureAttributes(f.dc, x); err != nil {
				// As the SDK's own converter does: never record it in clear.
				panic(fmt.Sprintf("payloadcodec: encode failure attributes: %v", err))
			}
		}
	}
	return out
}

func (f *failureConverter) FailureToError(fl *failurepb.Failure) error {
	if fl == nil {
		return nil
	}
	return f.inner.FailureToError(proto.Clone(fl).(*failurepb.Failure))
}

// sealed reports whether no failure of the chain holds a message or stack
// trace in clear.
func sealed(f *failurepb.Failure) bool {
	for x := f; x != nil; x = x.Cause {
		if x.EncodedAttributes != nil {
			if x.Message != encodedMessage || x.StackTrace != "" {
				return false
			}
		} else if x.Message != "" || x.StackTrace != "" {
			return false
		}
	}
	return true
}

// clipEncoding bounds an encoding named in an error (it is the sender's).
func clipEncoding(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
