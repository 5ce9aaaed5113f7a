package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DuplicateKey finds the first object key of the JSON document data that
// occurs twice in the same object, at any depth, and returns its path
// ("request.env", "files[2].path"; the key as last written). t is the Go
// type the document decodes into (nil: unknown): keys of an object that
// decodes into a struct are compared as encoding/json matches them to the
// struct's fields, without case ("Path" and "path" are the same key, so a
// duplicate can never pick which of two values a field gets); keys of one
// that decodes into a map (or of unknown type) are compared exactly, as
// the map keeps them ("HTTP_PROXY" and "http_proxy" are two variables).
// It streams the document with json.Decoder.Token and keeps only the keys
// of the objects it is inside. Malformed JSON is not its business: it
// reports no duplicate in what precedes the error (callers decode the
// document too, and that fails).
func DuplicateKey(data []byte, t reflect.Type) (path string, found bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay text: nothing to parse
	var stack []frame
	next := t // the type of the value the next token starts
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // io.EOF: the end; anything else: left to the decoder
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			top := &stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				next = valueDone(stack)
				continue
			}
			key, _ := tok.(string)
			top.key = key
			for _, k := range top.keys {
				if k == key || top.fields != nil && strings.EqualFold(k, key) {
					return framePath(stack), true
				}
			}
			top.keys = append(top.keys, key)
			top.wantKey = false
			next = top.elem
			if top.fields != nil {
				next = top.fields.lookup(key) // nil for an unknown field (refused by the caller)
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			f := frame{object: true, wantKey: true}
			switch c := container(next); {
			case c == nil:
			case c.Kind() == reflect.Struct:
				f.fields = foldedFields(c)
			case c.Kind() == reflect.Map:
				f.elem = c.Elem()
			}
			stack = append(stack, f)
		case json.Delim('['):
			f := frame{}
			if c := container(next); c != nil && (c.Kind() == reflect.Slice || c.Kind() == reflect.Array) {
				f.elem = c.Elem()
			}
			stack = append(stack, f)
			next = f.elem
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			next = valueDone(stack)
		default:
			next = valueDone(stack)
		}
	}
}

// frame is one object or array DuplicateKey is inside.
type frame struct {
	object  bool
	wantKey bool          // object: the next token is a key (or '}')
	key     string        // object: the current key
	keys    []string      // object: its keys so far
	fields  *structFields // object decoding into a struct: its fields
	elem    reflect.Type  // a map's or an array's element type (nil: unknown)
	index   int           // array: the current element
}

// container is t without pointers, or nil when t is unknown or decodes
// itself (json.Unmarshaler, encoding.TextUnmarshaler): its keys are then
// compared exactly.
func container(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// structFields are a struct type's JSON fields (jsonFields) by exact and
// by folded (foldKey) name.
type structFields struct {
	exact, folded map[string]reflect.Type
}

// lookup returns the type of the field key names: by its exact name, else
// as encoding/json matches it (without case); nil for no field.
func (f *structFields) lookup(key string) reflect.Type {
	if t, ok := f.exact[key]; ok {
		return t
	}
	return f.folded[foldKey(key)]
}

// fieldsCache holds foldedFields per struct type.
var fieldsCache sync.Map // reflect.Type → *structFields

// foldedFields returns struct type t's structFields (cached).
func foldedFields(t reflect.Type) *structFields {
	if f, ok := fieldsCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{exact: jsonFields(t), folded: map[string]reflect.Type{}}
	for name, ft := range f.exact {
		f.folded[foldKey(name)] = ft
	}
	fieldsCache.Store(t, f)
	return f
}

// valueDone records that a value ended inside the innermost frame and
// returns the type of the value that may come next there (an array's next
// element; nil otherwise).
func valueDone(stack []frame) reflect.Type {
	n := len(stack)
	if n == 0 {
		return nil
	}
	if stack[n-1].object {
		stack[n-1].wantKey = true
		return nil
	}
	stack[n-1].index++
	return stack[n-1].elem
}

// framePath renders the path of the innermost frame's current key.
func framePath(stack []frame) string {
	var b strings.Builder
	for i, f := range stack {
		if f.object {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}

// foldKey is key as encoding/json folds it to look a field name up: ASCII
// letters upper-cased, any other rune r as unicode.ToUpper(unicode.ToLower(r)).
func foldKey(key string) string {
	ascii := true
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(key)
	}
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, key)
}

// CheckDuplicateKeys refuses a JSON document that decodes into t (nil:
// unknown) with a duplicate key (DuplicateKey): a sandboxapi.FieldError (ErrInvalidArgument) on the key's
// path, naming it; what names the argument in the message.
func CheckDuplicateKeys(what string, data []byte, t reflect.Type) error {
	path, dup := DuplicateKey(data, t)
	if !dup {
		return nil
	}
	return sandboxapi.FieldError(path, "%s: duplicate key %q (a key may occur once in an object; keys that differ only in case are the same key)", what, path)
}
