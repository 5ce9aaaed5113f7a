package wire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

type shapeInner struct {
	N int `json:"n"`
}

type shapeOuter struct {
	Name  string                `json:"name"`
	Items []shapeInner          `json:"items"`
	Blob  []byte                `json:"blob"`
	Tags  map[string]shapeInner `json:"tags"`
	On    bool                  `json:"on"`
}

// field returns err's JSON path (sandboxapi.Error.Field) and message.
func field(t *testing.T, err error) (string, string) {
	t.Helper()
	var se *sandboxapi.Error
	require.True(t, errors.As(err, &se), "%v", err)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	return se.Field, sandboxapi.Message(err)
}

// TestCheckShapePieces: objects, arrays, []byte and maps are each checked
// on their own path; an unknown field names the known ones, sorted.
func TestCheckShapePieces(t *testing.T) {
	var v shapeOuter
	require.NoError(t, DecodeJSON("op", []byte(`{"name":"x","items":[{"n":1}],"blob":"AAE=","tags":{"a":{"n":2}},"on":true}`), &v))
	assert.Equal(t, shapeOuter{Name: "x", Items: []shapeInner{{N: 1}}, Blob: []byte{0, 1}, Tags: map[string]shapeInner{"a": {N: 2}}, On: true}, v)

	for body, want := range map[string]string{
		`{"items":[{"n":1},{"m":2}]}`: "items[1].m",
		`{"items":{}}`:                "items",
		`{"blob":[1]}`:                "blob",
		`{"tags":{"a":{"n":"1"}}}`:    "tags.a.n",
		`{"zz":1,"aa":2}`:             "aa",
		`{"on":"yes"}`:                "on",
	} {
		f, _ := field(t, DecodeJSON("op", []byte(body), &shapeOuter{}))
		assert.Equal(t, want, f, body)
	}
	_, msg := field(t, DecodeJSON("op", []byte(`{"x":1}`), &shapeOuter{}))
	assert.Contains(t, msg, `op: unknown field "x" (known fields: blob, items, name, on, tags)`)

	_, msg = field(t, unknownField("op", "a.b", map[string]reflect.Type{}))
	assert.Contains(t, msg, `op: unknown field "a.b" (it takes no fields)`)
	f, _ := field(t, checkArray("op", "nope", reflect.TypeOf([]int{}), "list"))
	assert.Equal(t, "list", f)
	f, _ = field(t, checkObject("op", []any{}, reflect.TypeOf(shapeInner{}), "obj"))
	assert.Equal(t, "obj", f)
}
