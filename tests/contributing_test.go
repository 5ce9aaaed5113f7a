package tests

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// TestAddAnOperationSteps walks CONTRIBUTING.md "Add a session operation"
// for every operation of the contract: the section names each place, and
// each operation is in every one of them — declared (1), bound (2), served
// by a registered activity (3), documented (5) and callable from the Go
// SDK (6); step 4, the workspace method, is the activity's business. An operation that skipped a step, or a step the section stopped
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
	for i, place := range []string{"`sandboxapi/ops.go`", "`workflows/ops.go`", "`activities`",
		"`internal/workspace`", "`docs/API.md`", "`sandboxclient`"} {
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
	served := activities.Names()
	for _, op := range sandboxapi.Operations() {
		b, ok := bound[op.Name]
		if !ok {
			t.Errorf("%s: declared (step 1) but not bound in workflows/ops.go (step 2)", op.Name)
			continue
		}
		if b.Activity != "" {
			if !slices.Contains(served, b.Activity) {
				t.Errorf("%s: bound to activity %s, which activities does not serve (step 3)", op.Name, b.Activity)
			}
		}
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(op.Name) + "` \\|").Match(api) {
			t.Errorf("%s: no row in docs/API.md's updates table (step 5)", op.Name)
		}
		recv, method := reflect.TypeFor[*sandboxclient.Session](), wire.GoName(op.Name)
		if op.Name == sandboxapi.UpdateAcquire {
			recv = reflect.TypeFor[*sandboxclient.Client]()
		}
		if _, ok := recv.MethodByName(method); !ok {
			t.Errorf("%s: no sandboxclient method %s (step 6)", op.Name, method)
		}
	}
}
