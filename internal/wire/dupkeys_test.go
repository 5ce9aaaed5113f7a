package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestDuplicateKeysAreRefused: strict decoding refuses an object with a
// duplicate key — at the top level, nested, in an array of objects, in a
// map, and a field's key in another case ("Name" beside "name": encoding/json
// would fill the field from either) — with InvalidArgument naming the key's
// path; nothing is decoded. A map's keys that differ only in case are two
// keys (two environment variables), and valid payloads still decode.
func TestDuplicateKeysAreRefused(t *testing.T) {
	for body, want := range map[string]string{
		`{"name":"a","name":"b"}`:                                "name",
		`{"name":"a","on":true,"Name":"b"}`:                      "Name",
		`{"name":"a","NAME":"b"}`:                                "NAME",
		`{"tags":{"a":{"n":1,"n":2}}}`:                           "tags.a.n",
		`{"tags":{"a":{"n":1},"a":{"n":2}}}`:                     "tags.a",
		`{"items":[{"n":1},{"n":2,"N":3}]}`:                      "items[1].N",
		`{"items":[{"n":1}],"on":false,"items":[]}`:              "items",
		`{"tags":{"x":{"n":1}},"items":[{"n":1},{"n":1,"n":1}]}`: "items[1].n",
	} {
		var v shapeOuter
		err := DecodeJSON("op", []byte(body), &v)
		f, msg := field(t, err)
		assert.Equal(t, want, f, body)
		assert.Contains(t, msg, `op: duplicate key "`+want+`"`, body)
		assert.Equal(t, shapeOuter{}, v, "nothing is decoded: %s", body)
	}

	// A real request type: exec's env is a map (case-sensitive names), its
	// fields are a struct's.
	var ex sandboxapi.ExecRequest
	require.NoError(t, DecodeJSON("exec", []byte(`{"cmd":["env"],"env":{"HTTP_PROXY":"a","http_proxy":"b"}}`), &ex))
	assert.Equal(t, map[string]string{"HTTP_PROXY": "a", "http_proxy": "b"}, ex.Env)
	f, _ := field(t, DecodeJSON("exec", []byte(`{"cmd":["true"],"env":{"A":"1","A":"2"}}`), &sandboxapi.ExecRequest{}))
	assert.Equal(t, "env.A", f)
	f, _ = field(t, DecodeJSON("exec", []byte(`{"cmd":["true"],"Cmd":["rm","-rf","x"]}`), &sandboxapi.ExecRequest{}))
	assert.Equal(t, "Cmd", f)

	// Valid payloads, with keys repeated across objects, still decode.
	var v shapeOuter
	require.NoError(t, DecodeJSON("op", []byte(`{"name":"x","items":[{"n":1},{"n":2}],"tags":{"n":{"n":3},"N":{"n":4}},"on":true}`), &v))
	assert.Equal(t, shapeOuter{Name: "x", Items: []shapeInner{{N: 1}, {N: 2}}, Tags: map[string]shapeInner{"n": {N: 3}, "N": {N: 4}}, On: true}, v)
}

// TestDuplicateKeyUnknownTypes: with no type every object's keys compare
// exactly; a type that decodes itself (json.RawMessage) is compared
// exactly; malformed JSON reports nothing (its decoding fails instead).
func TestDuplicateKeyUnknownTypes(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"a":2}`:                   "a",
		`[{"a":{"b":[1,{"c":1,"c":2}]}}]`: "[0].a.b[1].c",
		`{"a":1,"A":2}`:                   "",
		`{"a":`:                           "",
		`[1,2,{"x":{}},{"x":{}}]`:         "",
	} {
		got, dup := DuplicateKey([]byte(body), nil)
		assert.Equal(t, want != "", dup, body)
		assert.Equal(t, want, got, body)
	}
	type withRaw struct {
		Raw json.RawMessage `json:"raw"`
	}
	_, dup := DuplicateKey([]byte(`{"raw":{"a":1,"A":2}}`), reflect.TypeFor[withRaw]())
	assert.False(t, dup)
	got, dup := DuplicateKey([]byte(`{"raw":{"a":1,"a":2}}`), reflect.TypeFor[withRaw]())
	assert.True(t, dup)
	assert.Equal(t, "raw.a", got)
}

// BenchmarkDecodeJSON measures strict decoding of a typical exec update
// argument, with and without the duplicate-key check (docs/BENCHMARKS.md).
func BenchmarkDecodeJSON(b *testing.B) {
	body := []byte(`{"cmd":["go","test","./..."],"cwd":"src/app","env":{"GOFLAGS":"-mod=mod","CGO_ENABLED":"0","HTTP_PROXY":"x"},"timeout_s":600,"max_output_bytes":1048576,"stdin":"aGVsbG8="}`)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			var v sandboxapi.ExecRequest
			if err := DecodeJSON("exec", body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-unmarshal", func(b *testing.B) { // reference: the lenient decoding
		for b.Loop() {
			var v sandboxapi.ExecRequest
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("duplicate-check-alone", func(b *testing.B) {
		t := reflect.TypeFor[sandboxapi.ExecRequest]()
		for b.Loop() {
			if _, dup := DuplicateKey(body, t); dup {
				b.Fatal("dup")
			}
		}
	})
}
