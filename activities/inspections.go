package activities

import (
	"context"

	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
)

// GitInspections returns the worker interceptor that gives each activity
// execution (local activities included) its own git inspection scope
// (gitx.ReuseInspections): the git calls of one workspace operation read a
// repository's configuration once for their local calls instead of before
// each one, and every network call still reads it afresh (docs/SECURITY.md
// "Git hardening", "Known gaps": "Inspection race"). A host installs it on
// both of its workers (internal/hostworker).
func GitInspections() interceptor.WorkerInterceptor {
	return withActivityContext(func(ctx context.Context) (context.Context, context.CancelFunc) {
		return gitx.ReuseInspections(ctx), func() {}
	})
}
