package tests

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// TestAddAnOperationSteps walks CONTRIBUTING.md "Add a session operation"
// for every operation of the contract: the section names each place, and
// each operation is in every one of them — declared (1), bound (2), served
// by a registered activity (3, 4), documented (5) and callable from the Go
// SDK (6). An operation that skipped a step, or a step the section stopped
// naming, fails here.
func TestAddAnOperationSteps(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(contributing), "\n## Add a session operation\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no "Add a session operation" section`)
	}
	for i, place := range []string{"`sandboxapi/ops.go`", "`workflows/ops.go`", "`internal/wire/names.go`",
		"`activities`", "`docs/API.md`", "`sandboxclient`"} {
		if !strings.Contains(section, place) {
			t.Errorf("step %d: the section no longer names %s", i+1, place)
		}
	}
	api, err := os.ReadFile(filepath.Join(root, "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}

	bound := map[string]workflows.OperationInfo{}
	for _, op := range workflows.Operations() {
		bound[op.Name] = op
	}
	served := (&activities.Activities{}).ByName()
	for _, op := range sandboxapi.Operations() {
		b, ok := bound[op.Name]
		if !ok {
			t.Errorf("%s: declared (step 1) but not bound in workflows/ops.go (step 2)", op.Name)
			continue
		}
		if b.Activity != "" {
			if _, ok := served[b.Activity]; !ok {
				t.Errorf("%s: bound to activity %s, which activities does not serve (steps 3, 4)", op.Name, b.Activity)
			}
		}
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(op.Name) + "` \\|").Match(api) {
			t.Errorf("%s: no row in docs/API.md's updates table (step 5)", op.Name)
		}
		recv, method := reflect.TypeFor[*sandboxclient.Session](), goName(op.Name)
		if op.Name == sandboxapi.UpdateAcquire {
			recv = reflect.TypeFor[*sandboxclient.Client]()
		}
		if _, ok := recv.MethodByName(method); !ok {
			t.Errorf("%s: no sandboxclient method %s (step 6)", op.Name, method)
		}
	}
}

// goName is an update name in Go's CamelCase, with Go's initialisms:
// "preview_url" → "PreviewURL".
func goName(update string) string {
	name := ""
	for _, w := range strings.Split(update, "_") {
		switch w {
		case "url", "id":
			name += strings.ToUpper(w)
		default:
			name += strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return name
}
