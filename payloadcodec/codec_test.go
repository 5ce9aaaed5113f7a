package payloadcodec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

func newKey(t testing.TB, id string) (Key, []byte) {
	t.Helper()
	secret := make([]byte, KeySize)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	k, err := NewKey(id, secret)
	require.NoError(t, err)
	return k, secret
}

func mustCodec(t testing.TB, keys ...Key) *Codec {
	t.Helper()
	c, err := New(keys...)
	require.NoError(t, err)
	return c
}

const marker = "zebra-quartz-7d1f file content that must never reach history"

func TestRoundTripHidesEverything(t *testing.T) {
	a, _ := newKey(t, "k1")
	c := mustCodec(t, a)
	dc := converter.GetDefaultDataConverter()
	in := []*commonpb.Payload{}
	for _, v := range []any{marker, map[string]any{"path": "notes/" + marker, "content": []byte(marker)}, nil, []byte{0, 1, 2, 255}} {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		in = append(in, p)
	}
	orig := make([]*commonpb.Payload, len(in))
	for i, p := range in {
		orig[i] = proto.Clone(p).(*commonpb.Payload)
	}
	enc, err := c.Encode(in)
	require.NoError(t, err)
	require.Len(t, enc, len(in))
	for i, e := range enc {
		assert.True(t, proto.Equal(orig[i], in[i]), "Encode must not modify its input")
		assert.Equal(t, Encoding, string(e.Metadata[MetadataEncoding]))
		assert.Equal(t, Cipher, string(e.Metadata[MetadataCipher]))
		assert.Equal(t, "k1", string(e.Metadata[MetadataKeyID]))
		assert.Len(t, e.Metadata, 3, "no original metadata (such as its encoding) stays in clear")
		raw, err := proto.Marshal(e)
		require.NoError(t, err)
		for _, needle := range []string{marker, "zebra", base64.StdEncoding.EncodeToString([]byte(marker)), "json/plain", "binary/null"} {
			assert.NotContains(t, string(raw), needle)
		}
	}
	dec, err := c.Decode(enc)
	require.NoError(t, err)
	for i := range in {
		assert.True(t, proto.Equal(orig[i], dec[i]), "payload %d changed in the round trip", i)
	}
	var s string
	require.NoError(t, dc.FromPayload(dec[0], &s))
	assert.Equal(t, marker, s)

	again, err := c.Encode(in[:1])
	require.NoError(t, err)
	assert.NotEqual(t, enc[0].Data, again[0].Data, "each payload gets its own salt and nonce")
	twice, err := c.Encode(enc[:1])
	require.NoError(t, err)
	assert.Same(t, enc[0], twice[0], "an encrypted payload is not encrypted again")
}

func TestRotation(t *testing.T) {
	old, _ := newKey(t, "2025-01")
	cur, _ := newKey(t, "2025-07")
	before := mustCodec(t, old)
	after := mustCodec(t, cur, old)
	assert.Equal(t, "2025-07", after.EncryptionKeyID())
	assert.Equal(t, []string{"2025-07", "2025-01"}, after.KeyIDs())

	p, err := converter.GetDefaultDataConverter().ToPayload(marker)
	require.NoError(t, err)
	oldEnc, err := before.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	dec, err := after.Decode(oldEnc)
	require.NoError(t, err, "payloads of the old key stay readable after a new key is first")
	assert.True(t, proto.Equal(p, dec[0]))

	newEnc, err := after.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.Equal(t, "2025-07", string(newEnc[0].Metadata[MetadataKeyID]))
	_, err = before.Decode(newEnc)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"2025-07"`, "the error names the missing key id")
}

func TestTamperingIsDetected(t *testing.T) {
	a, _ := newKey(t, "a")
	b, _ := newKey(t, "b")
	c := mustCodec(t, a, b)
	p, err := converter.GetDefaultDataConverter().ToPayload(marker)
	require.NoError(t, err)
	enc, err := c.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)

	mutate := func(f func(*commonpb.Payload)) *commonpb.Payload {
		q := proto.Clone(enc[0]).(*commonpb.Payload)
		f(q)
		return q
	}
	cases := map[string]*commonpb.Payload{
		"flipped ciphertext byte": mutate(func(q *commonpb.Payload) { q.Data[len(q.Data)-20] ^= 1 }),
		"flipped salt byte":       mutate(func(q *commonpb.Payload) { q.Data[3] ^= 0x80 }),
		"truncated":               mutate(func(q *commonpb.Payload) { q.Data = q.Data[:20] }),
		"other version":           mutate(func(q *commonpb.Payload) { q.Data[0] = 2 }),
		"key id swapped":          mutate(func(q *commonpb.Payload) { q.Metadata[MetadataKeyID] = []byte("b") }),
		"other scheme":            mutate(func(q *commonpb.Payload) { q.Metadata[MetadataCipher] = []byte("AES-256-GCM") }),
		"no scheme":               mutate(func(q *commonpb.Payload) { delete(q.Metadata, MetadataCipher) }),
	}
	for name, q := range cases {
		_, err := c.Decode([]*commonpb.Payload{q})
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}

	// The same id with another secret does not authenticate.
	impostor, _ := newKey(t, "a")
	_, err = mustCodec(t, impostor).Decode(enc)
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestPlaintextPayloadsPassThroughDecode(t *testing.T) {
	a, _ := newKey(t, "a")
	c := mustCodec(t, a)
	p, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"written": "before keys were configured"})
	require.NoError(t, err)
	out, err := c.Decode([]*commonpb.Payload{p})
	require.NoError(t, err)
	assert.Same(t, p, out[0])
}

// TestRequireEncryptionRefusesPlaintext: a codec with
// Options.RequireEncryption refuses every payload without encryption
// metadata — JSON, "binary/null" (a nil value), bytes, a payload with no
// metadata at all, a nil one — with ErrPlaintext naming its encoding, while
// its own payloads (nil values included, which it encrypts too) and those
// of another codec with the same keys decode; an empty list is no payload.
// The codec it came from is unchanged (the codec server's keeps reading
// plaintext), and the failure converter reports the refusal typed.
func TestRequireEncryptionRefusesPlaintext(t *testing.T) {
	a, _ := newKey(t, "a")
	lax := mustCodec(t, a)
	strict := lax.WithOptions(Options{RequireEncryption: true})
	assert.True(t, strict.Options().RequireEncryption)
	assert.False(t, lax.Options().RequireEncryption, "WithOptions returns a copy")
	assert.Equal(t, "payloadcodec.Codec{KeyIDs:[a] RequireEncryption:true}", fmt.Sprint(strict))

	dc := converter.GetDefaultDataConverter()
	for name, v := range map[string]any{"json": map[string]string{"cmd": "rm -rf /"}, "null": nil, "bytes": []byte("x")} {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		_, err = strict.Decode([]*commonpb.Payload{p})
		require.ErrorIs(t, err, ErrPlaintext, name)
		assert.Contains(t, err.Error(), string(p.Metadata[MetadataEncoding]), name)
		out, err := lax.Decode([]*commonpb.Payload{p})
		require.NoError(t, err, "without the option plaintext passes (%s)", name)
		assert.Same(t, p, out[0])

		// The same value from a client with the keys: encrypted, accepted.
		var enc *commonpb.Payload
		enc, err = lax.DataConverter().ToPayload(v)
		require.NoError(t, err)
		require.True(t, IsEncrypted(enc), name)
		_, err = strict.Decode([]*commonpb.Payload{enc})
		require.NoError(t, err, name)
	}
	for name, p := range map[string]*commonpb.Payload{"no metadata": {Data: []byte(`"x"`)}, "empty": {}, "nil": nil} {
		_, err := strict.Decode([]*commonpb.Payload{p})
		require.ErrorIs(t, err, ErrPlaintext, name)
		assert.Contains(t, err.Error(), `encoding "none"`, name)
	}
	// One plaintext payload among encrypted ones refuses the lot.
	enc, err := strict.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{MetadataEncoding: []byte("json/plain")}, Data: []byte(`1`)}})
	require.NoError(t, err)
	plain, _ := dc.ToPayload(2)
	_, err = strict.Decode([]*commonpb.Payload{enc[0], plain})
	require.ErrorIs(t, err, ErrPlaintext)
	assert.Contains(t, err.Error(), "payload 2 of 2")
	out, err := strict.Decode(nil)
	require.NoError(t, err)
	assert.Empty(t, out)

	// Through the data converter (what the SDK calls), and typed by the
	// failure converter as the contract's InvalidArgument.
	var m map[string]string
	p, _ := dc.ToPayload(map[string]string{"k": "v"})
	err = strict.DataConverter().FromPayload(p, &m)
	require.ErrorIs(t, err, ErrPlaintext)
	fc := strict.FailureConverter()
	back := fc.FailureToError(fc.ErrorToFailure(fmt.Errorf("unable to decode the input for update %q: %w", "exec", err)))
	var app *temporal.ApplicationError
	require.True(t, errors.As(back, &app))
	assert.Equal(t, UndecodableType, app.Type())
	assert.True(t, app.NonRetryable())
	assert.Contains(t, app.Message(), "plaintext payload refused")
}

func TestDataAndFailureConverters(t *testing.T) {
	a, _ := newKey(t, "a")
	c := mustCodec(t, a)
	dc := c.DataConverter()
	p, err := dc.ToPayload(marker)
	require.NoError(t, err)
	assert.True(t, IsEncrypted(p))
	var s string
	require.NoError(t, dc.FromPayload(p, &s))
	assert.Equal(t, marker, s)
	var plain string
	assert.Error(t, converter.GetDefaultDataConverter().FromPayload(p, &plain), "without the key the payload cannot be read")

	fc := c.FailureConverter()
	f := fc.ErrorToFailure(temporal.NewNonRetryableApplicationError("no such file: notes/"+marker, "FileNotFound", nil, map[string]string{"path": marker}))
	raw, err := proto.Marshal(f)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "zebra", "the failure's message and details are encrypted")
	assert.Equal(t, "FileNotFound", f.GetApplicationFailureInfo().GetType(), "the error kind stays readable")
	back := fc.FailureToError(f)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(back, &ae))
	assert.Equal(t, "FileNotFound", ae.Type())
	assert.Contains(t, ae.Message(), marker)
}

// TestFailuresStaySealed: the failure converter never leaves an error's
// message in clear — not after FailureToError (which the SDK's converter
// does in place, on failures the SDK also records in commands), not for an
// error decoded from a failure, not for one decoded from plaintext.
func TestFailuresStaySealed(t *testing.T) {
	a, _ := newKey(t, "a")
	fc := mustCodec(t, a).FailureConverter()
	cause := temporal.NewApplicationError("cause: "+marker, "Inner")
	f := fc.ErrorToFailure(temporal.NewApplicationErrorWithCause("outer: "+marker, "FileNotFound", cause))
	assertSealed := func(what string, f *failurepb.Failure) {
		t.Helper()
		raw, err := proto.Marshal(f)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "zebra", what)
		for x := f; x != nil; x = x.Cause {
			assert.Equal(t, "Encoded failure", x.Message, what)
			assert.True(t, IsEncrypted(x.EncodedAttributes), what)
		}
	}
	assertSealed("a new error", f)
	require.NotNil(t, f.Cause)

	before := proto.Clone(f)
	back := fc.FailureToError(f)
	assert.True(t, proto.Equal(before, f), "FailureToError leaves its argument alone")
	var ae *temporal.ApplicationError
	require.ErrorAs(t, back, &ae)
	assert.Equal(t, "outer: "+marker, ae.Message())
	assertSealed("an error decoded from a failure, recorded again", fc.ErrorToFailure(back))

	// What the SDK's own converter leaves behind: decoded in place.
	sdk := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: mustCodec(t, a).DataConverter(), EncodeCommonAttributes: true})
	leaky := sdk.ErrorToFailure(temporal.NewApplicationError(marker, "X"))
	_ = sdk.FailureToError(leaky)
	require.Contains(t, leaky.Message, "zebra", "control: the SDK decodes in place")
	assertSealed("a failure decoded in place", fc.ErrorToFailure(fc.FailureToError(leaky)))

	// A failure from a history written before keys were configured.
	plain := temporal.GetDefaultFailureConverter().ErrorToFailure(temporal.NewApplicationError(marker, "X"))
	require.Contains(t, plain.Message, "zebra")
	assertSealed("a plaintext failure, recorded again", fc.ErrorToFailure(fc.FailureToError(plain)))
	require.ErrorAs(t, fc.FailureToError(plain), &ae)
	assert.Equal(t, marker, ae.Message(), "plaintext failures still decode")
	assert.Nil(t, fc.ErrorToFailure(nil))
	assert.NoError(t, fc.FailureToError(nil))
}

func TestSecretsAreNeverPrinted(t *testing.T) {
	k, secret := newKey(t, "printed-id")
	c := mustCodec(t, k)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		for _, v := range []any{k, &k, c, *c, []Key{k}, struct{ K Key }{k}} {
			out := fmt.Sprintf(verb, v)
			assert.NotContains(t, out, hex.EncodeToString(secret), verb)
			assert.NotContains(t, out, base64.StdEncoding.EncodeToString(secret), verb)
			assert.NotContains(t, out, string(secret), verb)
			assert.NotContains(t, out, fmt.Sprint(secret[:4]), verb)
			assert.Contains(t, out, "printed-id", verb)
		}
	}
}

func TestNewKeyAndNew(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, KeySize)
	_, err := NewKey("ok", secret[:31])
	assert.ErrorContains(t, err, "31 bytes")
	_, err = NewKey("ok", make([]byte, KeySize))
	assert.ErrorContains(t, err, "all zero")
	for _, id := range []string{"", "-x", "a b", "a=b", "a,b", strings.Repeat("x", 65), "é"} {
		_, err = NewKey(id, secret)
		assert.Error(t, err, "id %q", id)
	}
	k, err := NewKey("ok", secret)
	require.NoError(t, err)
	_, err = New()
	assert.Error(t, err)
	_, err = New(k, k)
	assert.ErrorContains(t, err, "twice")
	_, err = New(Key{})
	assert.Error(t, err)
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	raw := make([]byte, KeySize)
	_, _ = rand.Read(raw)
	raw[KeySize-1] = '\n' // a raw key that happens to end in a line feed stays raw
	b64 := make([]byte, KeySize)
	_, _ = rand.Read(b64)
	url := bytes.Repeat([]byte{0xfb, 0xff}, KeySize/2) // "+/" in standard, "-_" in URL base64
	rawFile := write("raw", raw)
	b64File := write("b64", []byte(base64.StdEncoding.EncodeToString(b64)+"\n"))
	urlFile := write("url", []byte("  "+base64.RawURLEncoding.EncodeToString(url)+"\r\n"))

	keys, err := LoadKeys(fmt.Sprintf("new=%s, old=%s,older=%s", b64File, rawFile, urlFile))
	require.NoError(t, err)
	require.Len(t, keys, 3)
	assert.Equal(t, "new", keys[0].ID())
	assert.Equal(t, b64, keys[0].secret[:])
	assert.Equal(t, raw, keys[1].secret[:])
	assert.Equal(t, url, keys[2].secret[:])

	short := write("short", []byte(base64.StdEncoding.EncodeToString(raw[:16])))
	zero := write("zero", make([]byte, KeySize))
	big := write("big", bytes.Repeat([]byte("A"), 10000))
	for spec, want := range map[string]string{
		"":                                  "empty",
		"   ":                               "empty",
		"k1":                                `entry "k1": want ID=FILE`,
		"=" + rawFile:                       "want ID=FILE",
		"k1=":                               "want ID=FILE",
		"k1=" + rawFile + ",k1=" + b64File:  "appears twice",
		"bad id=" + rawFile:                 "the id must be",
		"k1=" + filepath.Join(dir, "none"):  "no such file",
		"k1=" + short:                       "want exactly 32 random bytes",
		"k1=" + zero:                        "all zero",
		"k1=" + big:                         "larger than",
		"k1=" + rawFile + ",,k2=" + b64File: "want ID=FILE",
	} {
		_, err := LoadKeys(spec)
		var ke *KeysError
		require.ErrorAs(t, err, &ke, "spec %q", spec)
		assert.Contains(t, err.Error(), want, "spec %q", spec)
		assert.True(t, strings.HasPrefix(err.Error(), EnvKeys+": "), err.Error())
		assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString(raw[:16]))
	}

	c, err := FromEnv(func(string) (string, bool) { return "", false })
	assert.NoError(t, err)
	assert.Nil(t, c, "unset: no codec, payloads stay plaintext")
	c, err = FromEnv(func(k string) (string, bool) { return "a=" + b64File + ",b=" + rawFile, k == EnvKeys })
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.KeyIDs())
}

// BenchmarkCodec measures the codec's cost per payload against the raw
// baseline of the same run: the SDK's default data converter alone.
func BenchmarkCodec(b *testing.B) {
	a, _ := newKey(b, "bench")
	c := mustCodec(b, a)
	// A value shaped like write_file's argument: JSON with the content in base64.
	type file struct {
		Path    string `json:"path"`
		Content []byte `json:"content"`
	}
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		value := file{Path: "src/main.go", Content: bytes.Repeat([]byte("x"), size)}
		for _, tc := range []struct {
			name string
			dc   converter.DataConverter
		}{{"plain", converter.GetDefaultDataConverter()}, {"encrypted", c.DataConverter()}} {
			b.Run(fmt.Sprintf("%s/%dKiB", tc.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				var out file
				for b.Loop() {
					p, err := tc.dc.ToPayload(value)
					if err != nil {
						b.Fatal(err)
					}
					if err := tc.dc.FromPayload(p, &out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// FuzzDecode: whatever Temporal hands back (it is not trusted to be
// well-formed), Decode returns a typed error or a payload, never panics, and
// never returns a payload for data that was not sealed with the key.
func FuzzDecode(f *testing.F) {
	k, err := NewKey("k", bytes.Repeat([]byte{9}, KeySize))
	if err != nil {
		f.Fatal(err)
	}
	c, err := New(k)
	if err != nil {
		f.Fatal(err)
	}
	p, _ := converter.GetDefaultDataConverter().ToPayload("seed")
	enc, _ := c.Encode([]*commonpb.Payload{p})
	f.Add(enc[0].Data, "k", Cipher)
	f.Add([]byte{1}, "k", Cipher)
	f.Add([]byte{}, "", "")
	f.Add(bytes.Repeat([]byte{1}, 60), "other", Cipher)
	f.Fuzz(func(t *testing.T, data []byte, keyID, cipherName string) {
		in := &commonpb.Payload{Metadata: map[string][]byte{MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte(keyID), MetadataCipher: []byte(cipherName)}, Data: data}
		out, err := c.Decode([]*commonpb.Payload{in})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Only a payload sealed under the key decrypts: the corpus seed's (each
		// fuzzing process seals its own, with its own salt).
		if keyID != "k" || cipherName != Cipher || !proto.Equal(out[0], p) {
			t.Fatalf("forged payload accepted: %v", out[0])
		}
	})
}
