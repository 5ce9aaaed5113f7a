package activities

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestPackageDocNamesEveryFile: the package doc's "where each concern
// lives" names every source file of the package, so it cannot drift.
func TestPackageDocNamesEveryFile(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "activities.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && !strings.Contains(doc, n) {
			t.Errorf("the package doc (activities.go) does not name %s", n)
		}
	}
}
