package activities

import (
	"testing"

	"github.com/sandboxcore/sandboxcore/workflows"
)

// Every activity the operation table names is registered by Register: an
// operation cannot be declared and bound without its activity existing.
func TestEveryOperationsActivityIsRegistered(t *testing.T) {
	byName := (&Activities{}).ByName()
	for _, op := range workflows.Operations() {
		if op.Activity == "" {
			continue
		}
		if _, ok := byName[op.Activity]; !ok {
			t.Errorf("operation %s names activity %s, which Register does not register", op.Name, op.Activity)
		}
	}
}
