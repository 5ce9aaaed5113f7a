package wire

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Payload encodings Decode accepts (Temporal's default data converter).
const (
	encodingJSON = "json/plain"
	encodingNull = "binary/null"
)

// Decode decodes one argument strictly into a value of type T (docs/API.md
// "Strict decoding"): the payload must be JSON (or absent / null, which
// gives T's zero value), every object key must be a field of the Go type at
// that place, spelled exactly as its json tag (no case folding), and occur
// once in its object (DuplicateKey: also not in another case), every value
// must have the field's type, and nothing may follow the value. what names
// the argument in messages (e.g. "exec"). Errors are sandboxapi.FieldError
// values (ErrInvalidArgument with ErrorDetails.Field set to the JSON path)
// or ErrInvalidArgument for a payload that is not JSON at all. Decode is
// deterministic, so workflow code may call it.
func Decode[T any](what string, raw converter.RawValue) (T, error) {
	return decode[T](what, raw, true)
}

// DecodeAccepted is Decode without the duplicate-key check: for an argument
// a run already accepted and recorded (an update's handler, after its
// validator refused duplicates; a workflow argument or signal of a run
// recorded before duplicates were refused), which replay must decode as it
// was decoded then (encoding/json: the last of duplicate keys wins).
func DecodeAccepted[T any](what string, raw converter.RawValue) (T, error) {
	return decode[T](what, raw, false)
}

func decode[T any](what string, raw converter.RawValue, dups bool) (T, error) {
	var out T
	p := raw.Payload()
	if p == nil {
		return out, nil
	}
	switch enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc {
	case encodingNull:
		return out, nil
	case encodingJSON:
	default:
		return out, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: payload encoding %q is not supported (send JSON)", what, sandboxapi.Clip(enc, 60))
	}
	return out, decodeJSON(what, p.GetData(), &out, dups)
}

// DecodeJSON is Decode's JSON half: it decodes data strictly into v (a
// pointer). Errors as Decode.
func DecodeJSON(what string, data []byte, v any) error { return decodeJSON(what, data, v, true) }

func decodeJSON(what string, data []byte, v any, dups bool) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: the argument is not valid JSON: %v", what, err)
	}
	if dec.More() {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: the argument has data after its JSON value", what)
	}
	if dups {
		if err := CheckDuplicateKeys(what, data, reflect.TypeOf(v).Elem()); err != nil {
			return err // the generic decode kept one of the values: which one is not the caller's to guess
		}
	}
	if err := checkShape(what, generic, reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return sandboxapi.FieldError(te.Field, "%s: field %q: want %s, got a JSON %s", what, te.Field, jsonKind(te.Type), te.Value)
		}
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %v", what, err)
	}
	return nil
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkShape walks the generic JSON value v alongside the Go type t and
// refuses object keys that are not fields of t and values of the wrong JSON
// kind (strings for numbers and the like; json.Unmarshal reports the rest).
func checkShape(what string, v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil // time.Time and friends decode themselves
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkObject(what, v, t, path)
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongKind(what, path, "an object", v)
		}
		for k, e := range obj {
			if err := checkShape(what, e, t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		return checkArray(what, v, t, path)
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrongKind(what, path, "a string", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongKind(what, path, "true or false", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return wrongKind(what, path, "a number", v)
		}
	}
	return nil
}

// checkObject is checkShape of the struct type t: v must be an object
// whose every key is one of t's JSON fields (jsonFields), checked in
// sorted key order (the first bad key is always the same one), each value
// against its field's type. Errors: ErrInvalidArgument on the field path
// (an unknown field names the known ones).
func checkObject(what string, v any, t reflect.Type, path string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return wrongKind(what, path, "an object", v)
	}
	fields := jsonFields(t)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic: the first bad key in sorted order
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			return unknownField(what, join(path, k), fields)
		}
		if err := checkShape(what, obj[k], f, join(path, k)); err != nil {
			return err
		}
	}
	return nil
}

// unknownField is the ErrInvalidArgument about the unknown field at path,
// listing the known fields in sorted order ("it takes no fields" for none).
func unknownField(what, path string, fields map[string]reflect.Type) error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	known := "it takes no fields"
	if len(names) > 0 {
		known = "known fields: " + strings.Join(names, ", ")
	}
	return sandboxapi.FieldError(path, "%s: unknown field %q (%s)", what, path, known)
}

// checkArray is checkShape of the slice or array type t: []byte is a
// base64 string (encoding/json), anything else an array whose elements
// are checked at path[i]. Errors: ErrInvalidArgument on the path.
func checkArray(what string, v any, t reflect.Type, path string) error {
	if t.Elem().Kind() == reflect.Uint8 {
		if _, ok := v.(string); !ok {
			return wrongKind(what, path, "a base64 string", v)
		}
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		return wrongKind(what, path, "an array", v)
	}
	for i, e := range arr {
		if err := checkShape(what, e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields maps the JSON names of t's exported fields (embedded structs
// flattened, as encoding/json does) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					if _, dup := out[n]; !dup {
						out[n] = typ
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func wrongKind(what, path, want string, got any) error {
	field := path
	if field == "" {
		field = "(the argument)"
	}
	return sandboxapi.FieldError(path, "%s: field %q: want %s, got %s", what, field, want, describeJSON(got))
}

func describeJSON(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "the number " + sandboxapi.Clip(v.String(), 30)
	case bool:
		return fmt.Sprintf("%t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a number (" + t.String() + ")"
}
