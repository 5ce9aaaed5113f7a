package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

const repoRoot = "../.."

// The committed docs/schema files are what `make schema` writes today:
// a change to a contract type without `make schema` fails here (and so in CI).
func TestCommittedSchemaIsCurrent(t *testing.T) {
	files, err := Generate(filepath.Join(repoRoot, "sandboxapi"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(repoRoot, "docs", "schema", name))
		if err != nil {
			t.Fatalf("%s: %v (run make schema)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/schema/%s is stale: run make schema and commit the result", name)
		}
	}
}

// Every operation the workflow registers is declared in the public table,
// in the schema index and in docs/API.md's updates table, and nothing is
// declared that the workflow does not register.
func TestEveryOperationIsDeclaredDocumentedAndInTheSchema(t *testing.T) {
	api, err := os.ReadFile(filepath.Join(repoRoot, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	var idx Index
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "schema", IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	var declared, registered []string
	for _, op := range sandboxapi.Operations() {
		declared = append(declared, op.Name)
	}
	for _, op := range workflows.Operations() {
		registered = append(registered, op.Name)
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(op.Name) + "` \\|")
		if !row.Match(api) {
			t.Errorf("operation %s is registered but has no row in docs/API.md's updates table", op.Name)
		}
		if _, ok := idx.Updates[op.Name]; !ok {
			t.Errorf("operation %s is registered but missing from docs/schema/%s (run make schema)", op.Name, IndexFile)
		}
	}
	if !slices.Equal(declared, registered) {
		t.Errorf("sandboxapi.Operations() %v and the workflow's table %v differ", declared, registered)
	}
	for _, m := range sandboxapi.Messages() {
		if !bytes.Contains(api, []byte("`"+m.Name+"`")) {
			t.Errorf("%s %s of %s is not mentioned in docs/API.md", m.Kind, m.Name, m.Workflow)
		}
	}
}

// Every error kind has a row in docs/API.md's errors table.
func TestEveryErrorKindIsDocumented(t *testing.T) {
	api, err := os.ReadFile(filepath.Join(repoRoot, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sandboxapi.Kinds() {
		if k == sandboxapi.ErrWorkspace {
			continue // a family root, never an error's type
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(k.Type) + "` \\|")
		if !row.Match(api) {
			t.Errorf("error kind %s has no row in docs/API.md's errors table", k.Type)
		}
	}
}

// TestCommentBase: the comment map's base is the import path of the
// working directory, whatever the relative spelling of the API directory.
func TestCommentBase(t *testing.T) {
	base, err := commentBase("../../sandboxapi")
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/sandboxcore/sandboxcore/internal/schema"; base != want {
		t.Fatalf("commentBase = %q, want %q", base, want)
	}
	if got := (&collector{}).add(nil); got != "" {
		t.Fatalf("add(nil) = %q", got)
	}
}
