package sandboxclient

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestEveryOperationHasAMethod: each update of the contract
// (sandboxapi.Operations) has its method, named after it: acquire on
// *Client, every other one on *Session (snake_case to CamelCase, with Go's
// initialisms).
func TestEveryOperationHasAMethod(t *testing.T) {
	initialisms := map[string]string{"url": "URL", "id": "ID"}
	for _, op := range sandboxapi.Operations() {
		name := ""
		for _, w := range strings.Split(op.Name, "_") {
			if up, ok := initialisms[w]; ok {
				name += up
			} else {
				name += strings.ToUpper(w[:1]) + w[1:]
			}
		}
		recv := reflect.TypeFor[*Session]()
		if op.Name == sandboxapi.UpdateAcquire {
			recv = reflect.TypeFor[*Client]()
		}
		if _, ok := recv.MethodByName(name); !ok {
			t.Errorf("operation %q has no method %s.%s", op.Name, recv.Elem().Name(), name)
		}
	}
}
