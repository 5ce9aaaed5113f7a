package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// sentinels reads sandboxapi/errors.go: the name of every Kind variable
// (ErrX = newKind("Type", …)) by type, and the predicate (func IsX(err)
// … errors.Is(err, ErrY)) by sentinel name.
func sentinels(t *testing.T) (byType map[string]string, predicates map[string]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "sandboxapi", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	byType, predicates = map[string]string{}, map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, v := range n.Values {
				call, ok := v.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					continue
				}
				if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "newKind" {
					continue
				}
				lit := call.Args[0].(*ast.BasicLit)
				typ, _ := strconv.Unquote(lit.Value)
				byType[typ] = n.Names[i].Name
			}
		case *ast.FuncDecl:
			if !strings.HasPrefix(n.Name.Name, "Is") || n.Recv != nil || n.Body == nil {
				return false
			}
			ast.Inspect(n.Body, func(m ast.Node) bool {
				call, ok := m.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Is" {
					if id, ok := call.Args[1].(*ast.Ident); ok {
						predicates[id.Name] = n.Name.Name
					}
				}
				return true
			})
			return false
		}
		return true
	})
	return byType, predicates
}

// docs/API.md "Errors" holds one table (one row per type), and each row
// names the type's Go sentinel (and predicate), family and retryability as
// sandboxapi declares them; every sentinel, family roots included, is named
// in the section, so a Go programmer can map the wire types to the names.
func TestErrorsTableMapsEveryGoSentinel(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	api := string(data)
	start := strings.Index(api, "\n## Errors\n")
	if start < 0 {
		t.Fatal(`docs/API.md has no "## Errors" section`)
	}
	section := api[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	if n := strings.Count(section, "\n| type |"); n != 1 {
		t.Errorf(`docs/API.md "Errors" holds %d tables of types, want one`, n)
	}
	byType, predicates := sentinels(t)
	if len(byType) != len(sandboxapi.Kinds()) {
		t.Fatalf("parsed %d kinds from sandboxapi/errors.go, sandboxapi.Kinds() has %d", len(byType), len(sandboxapi.Kinds()))
	}
	for _, k := range sandboxapi.Kinds() {
		name, ok := byType[k.Type]
		if !ok {
			t.Errorf("kind %s: no sentinel found in sandboxapi/errors.go", k.Type)
			continue
		}
		if !strings.Contains(section, "`"+name+"`") && !strings.Contains(section, "`sandboxapi."+name+"`") {
			t.Errorf(`sentinel sandboxapi.%s (%s) is not named in docs/API.md "Errors"`, name, k.Type)
		}
		if k == sandboxapi.ErrWorkspace {
			continue // a family root, never an error's type: named in the text only
		}
		if n := strings.Count(api, "\n| `"+k.Type+"` |"); n != 1 {
			t.Errorf("docs/API.md has %d rows for error type %s, want one", n, k.Type)
		}
		retryable := "no"
		if k.Retryable {
			retryable = "yes"
		}
		sentinel := "`" + name + "`"
		if p, ok := predicates[name]; ok {
			sentinel += " (`" + p + "`)"
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(k.Type) + "` \\| " + regexp.QuoteMeta(sentinel) + " \\| " + k.Family() + " \\| " + retryable + " \\| .+ \\|$")
		if !row.MatchString(section) {
			t.Errorf("docs/API.md \"Errors\": want the row | `%s` | %s | %s | %s | … |", k.Type, sentinel, k.Family(), retryable)
		}
	}
}

// The handle docs/API.md shows under "Getting a session" is one JSON value
// the schema's Handle accepts, and no stray JSON fragment follows it
// outside a code block.
func TestDocumentedHandleIsValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)returns the \\*\\*handle\\*\\*.*?```json\n(.*?)```\n(.*?)\n## ").FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/API.md shows no handle")
	}
	if err := resolvedDef(t, "#/$defs/Handle").Validate(instance(t, string(m[1]))); err != nil {
		t.Errorf("the documented handle does not pass the schema: %v", err)
	}
	fenced := false
	for _, line := range strings.Split(string(m[2]), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && (strings.HasPrefix(trimmed, `"`) || strings.HasPrefix(trimmed, "{")) {
			t.Errorf("a stray JSON fragment outside the example: %q", line)
		}
	}
}
