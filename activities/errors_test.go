package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ToApplicationError gives every sandbox error kind its stable type string,
// its ErrorDetails and a retryable flag equal to the kind's (docs/API.md
// "Errors"), also when the typed error is wrapped.
func TestToApplicationErrorKeepsEveryKind(t *testing.T) {
	for _, k := range sandboxapi.Kinds() {
		t.Run(k.Type, func(t *testing.T) {
			err := ToApplicationError(fmt.Errorf("context: %w", sandboxapi.Errorf(k, "went wrong")))
			app := wantAppError(t, err, k)
			if app.Message() != "went wrong" {
				t.Errorf("message %q; want the typed error's own message", app.Message())
			}
		})
	}
}

// Errors of no kind become SandboxError, never retried; context ends and
// application errors pass through unchanged; nil stays nil.
func TestToApplicationErrorOfOtherErrors(t *testing.T) {
	if ToApplicationError(nil) != nil {
		t.Fatal("nil became an error")
	}
	wantAppError(t, ToApplicationError(errors.New("disk on fire")), sandboxapi.ErrSandbox)
	for _, err := range []error{context.Canceled, context.DeadlineExceeded, fmt.Errorf("wait: %w", context.Canceled)} {
		if got := ToApplicationError(err); got != err {
			t.Errorf("%v became %v", err, got)
		}
	}
	app := temporal.NewApplicationError("already translated", "SandboxTimeout")
	if got := ToApplicationError(app); got != app {
		t.Errorf("an application error was translated again: %v", got)
	}
}
