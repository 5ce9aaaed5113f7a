package payloadcodec_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxcore/sandboxcore/payloadcodec"
)

// vectorsFile holds the test vectors shared with the Python SDK
// (python/tests/test_codec.py): the same plaintext payloads encrypted once by
// this package and once by sandboxcore.codec, so that each implementation is
// checked against what the other one wrote (docs/API.md "Payload
// encryption"). The file is committed; the tests only read it.
const vectorsFile = "testdata/codec-vectors.json"

// vectorPayload is a payload as the file spells it: metadata values and data
// in standard base64 (encoding/json's form of []byte).
type vectorPayload struct {
	Metadata map[string][]byte `json:"metadata"`
	Data     []byte            `json:"data"`
}

func (p vectorPayload) proto() *commonpb.Payload {
	return &commonpb.Payload{Metadata: p.Metadata, Data: p.Data}
}

type codecVectors struct {
	Keys []struct {
		ID     string `json:"id"`
		Secret []byte `json:"secret"`
	} `json:"keys"`
	Vectors []struct {
		Name            string        `json:"name"`
		KeyID           string        `json:"key_id"`
		Plaintext       vectorPayload `json:"plaintext"`
		GoEncrypted     vectorPayload `json:"go_encrypted"`
		PythonEncrypted vectorPayload `json:"python_encrypted"`
	} `json:"vectors"`
}

func readVectors(t *testing.T) (codecVectors, map[string]payloadcodec.Key) {
	t.Helper()
	b, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	var v codecVectors
	require.NoError(t, json.Unmarshal(b, &v))
	require.Len(t, v.Keys, 2, "two keys: one encrypts, the other tests rotation")
	require.NotEmpty(t, v.Vectors)
	keys := map[string]payloadcodec.Key{}
	for _, k := range v.Keys {
		key, err := payloadcodec.NewKey(k.ID, k.Secret)
		require.NoError(t, err)
		keys[k.ID] = key
	}
	return v, keys
}

// otherKey returns the key of the file that is not id.
func otherKey(t *testing.T, keys map[string]payloadcodec.Key, id string) payloadcodec.Key {
	t.Helper()
	for kid, k := range keys {
		if kid != id {
			return k
		}
	}
	t.Fatalf("no key other than %q", id)
	return payloadcodec.Key{}
}

func codecOf(t *testing.T, keys ...payloadcodec.Key) *payloadcodec.Codec {
	t.Helper()
	c, err := payloadcodec.New(keys...)
	require.NoError(t, err)
	return c
}

func TestVectorsDecryptInGo(t *testing.T) {
	v, keys := readVectors(t)
	rotated := 0
	for _, vec := range v.Vectors {
		key, ok := keys[vec.KeyID]
		require.True(t, ok, "%s: key %q is not in the file", vec.Name, vec.KeyID)
		other := otherKey(t, keys, vec.KeyID)
		if vec.KeyID != v.Keys[0].ID {
			rotated++
		}
		for writer, enc := range map[string]vectorPayload{"go": vec.GoEncrypted, "python": vec.PythonEncrypted} {
			name := vec.Name + "/" + writer
			p := enc.proto()
			require.True(t, payloadcodec.IsEncrypted(p), name)
			assert.Equal(t, payloadcodec.Encoding, string(p.Metadata[payloadcodec.MetadataEncoding]), name)
			assert.Equal(t, payloadcodec.Cipher, string(p.Metadata[payloadcodec.MetadataCipher]), name)
			assert.Equal(t, vec.KeyID, string(p.Metadata[payloadcodec.MetadataKeyID]), name)
			if len(vec.Plaintext.Data) > 0 {
				assert.NotContains(t, string(p.Data), string(vec.Plaintext.Data), name)
			}

			// The key alone, and after rotation: another key encrypts, this one decrypts.
			for _, c := range []*payloadcodec.Codec{codecOf(t, key), codecOf(t, other, key)} {
				out, err := c.Decode([]*commonpb.Payload{p})
				require.NoError(t, err, name)
				require.Len(t, out, 1)
				assert.True(t, proto.Equal(vec.Plaintext.proto(), out[0]), "%s: got %v, want %v", name, out[0], vec.Plaintext.proto())
			}

			_, err := codecOf(t, other).Decode([]*commonpb.Payload{p})
			assert.ErrorIs(t, err, payloadcodec.ErrUnknownKey, name)
			assert.Contains(t, err.Error(), `key id "`+vec.KeyID+`"`, name)
		}
		assert.NotEqual(t, vec.GoEncrypted.Data, vec.PythonEncrypted.Data, "%s: a fresh salt and nonce per payload", vec.Name)
	}
	assert.Positive(t, rotated, "some vector is encrypted with the second key")
}

func TestVectorsDetectTampering(t *testing.T) {
	v, keys := readVectors(t)
	both := codecOf(t, keys[v.Keys[0].ID], keys[v.Keys[1].ID])
	for _, vec := range v.Vectors {
		for writer, enc := range map[string]vectorPayload{"go": vec.GoEncrypted, "python": vec.PythonEncrypted} {
			name := vec.Name + "/" + writer
			// Every part of the data: version, salt, nonce, ciphertext, tag.
			for _, i := range []int{0, 1, 16, 17, 28, 29, len(enc.Data) - 17, len(enc.Data) - 1} {
				p := proto.Clone(enc.proto()).(*commonpb.Payload)
				p.Data[i] ^= 0x01
				_, err := both.Decode([]*commonpb.Payload{p})
				assert.ErrorIs(t, err, payloadcodec.ErrCorrupt, "%s: byte %d flipped", name, i)
			}
			// Truncated.
			p := proto.Clone(enc.proto()).(*commonpb.Payload)
			p.Data = p.Data[:len(p.Data)-1]
			_, err := both.Decode([]*commonpb.Payload{p})
			assert.ErrorIs(t, err, payloadcodec.ErrCorrupt, "%s: truncated", name)
			// Relabelled with the other key's id (the id is authenticated).
			p = proto.Clone(enc.proto()).(*commonpb.Payload)
			p.Metadata[payloadcodec.MetadataKeyID] = []byte(otherKey(t, keys, vec.KeyID).ID())
			_, err = both.Decode([]*commonpb.Payload{p})
			assert.ErrorIs(t, err, payloadcodec.ErrCorrupt, "%s: relabelled", name)
			// Another scheme named.
			p = proto.Clone(enc.proto()).(*commonpb.Payload)
			p.Metadata[payloadcodec.MetadataCipher] = []byte("AES-128-CBC")
			_, err = both.Decode([]*commonpb.Payload{p})
			assert.ErrorIs(t, err, payloadcodec.ErrCorrupt, "%s: other cipher", name)
		}
	}
}
