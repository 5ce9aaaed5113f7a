package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// resolvedDef resolves the committed schema with its root pointing at ref
// (a JSON pointer under the root, e.g. "#/$defs/AcquireInput").
func resolvedDef(t *testing.T, ref string) *jsonschema.Resolved {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "schema", SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	s.Ref = ref
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	return rs
}

func instance(t *testing.T, js string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// The nulls docs/API.md shows (`{"request": null}` resumes a workspace, the
// fan-out's `"conversation": null`) pass the schema, as the worker accepts
// them.
func TestDocumentedNullsPassTheSchema(t *testing.T) {
	api, err := os.ReadFile(filepath.Join(repoRoot, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(api), "`{\"request\": <same request or null>}`") {
		t.Fatal("docs/API.md no longer documents a null acquire request: update this test")
	}
	fanout := regexp.MustCompile("(?s)Argument \\(`FanoutInput`\\):\n\n```json\n(.*?)```").FindSubmatch(api)
	if fanout == nil {
		t.Fatal("docs/API.md has no FanoutInput example")
	}
	for _, c := range []struct{ def, js string }{
		{"AcquireInput", `{"request": null}`},
		{"FanoutInput", string(fanout[1])},
	} {
		if !strings.Contains(c.js, "null") {
			t.Fatalf("%s example holds no null: %s", c.def, c.js)
		}
		if err := resolvedDef(t, "#/$defs/"+c.def).Validate(instance(t, c.js)); err != nil {
			t.Errorf("%s %s: the schema refuses what docs/API.md shows: %v", c.def, c.js, err)
		}
	}
}

// Every field of the contract that the worker decodes null into — a
// pointer, slice, map or byte slice, with or without omitempty — is
// nullable in the schema: a field of every argument type decodes from
// {"field": null} strictly (wire.DecodeJSON), and the schema's property
// accepts null.
func TestEveryNullableFieldAcceptsNull(t *testing.T) {
	var roots []reflect.Type
	args := map[reflect.Type]bool{}
	for _, op := range sandboxapi.Operations() {
		roots = append(roots, op.In, op.Out)
		args[op.In] = true
	}
	for _, m := range sandboxapi.Messages() {
		roots = append(roots, m.In, m.Out)
		args[m.In] = true
	}
	pkg := reflect.TypeFor[sandboxapi.Handle]().PkgPath()
	seen := map[reflect.Type]bool{}
	checked := 0
	var walk func(typ reflect.Type, arg bool)
	walk = func(typ reflect.Type, arg bool) {
		for typ != nil && (typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map || typ.Kind() == reflect.Array) {
			typ = typ.Elem()
		}
		if typ == nil || typ.Kind() != reflect.Struct || typ.PkgPath() != pkg || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || f.Anonymous {
				continue
			}
			walk(f.Type, arg)
			switch f.Type.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map:
			default:
				continue
			}
			if name == "" {
				name = f.Name
			}
			checked++
			if err := resolvedDef(t, "#/$defs/"+typ.Name()+"/properties/"+name).Validate(nil); err != nil {
				t.Errorf("%s.%s (%s) is refused as null by the schema: %v", typ.Name(), name, f.Type, err)
			}
			if arg {
				v := reflect.New(typ)
				if err := wire.DecodeJSON(typ.Name(), []byte(`{"`+name+`": null}`), v.Interface()); err != nil {
					t.Errorf("%s.%s: the worker refuses null: %v", typ.Name(), name, err)
				}
			}
		}
	}
	for _, r := range roots {
		walk(r, args[r])
	}
	if checked < 20 {
		t.Fatalf("only %d nullable fields found: the walk is broken", checked)
	}
}
