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
func GitInspections() interceptor.WorkerInterceptor { return &gitInspections{} }

type gitInspections struct {
	interceptor.WorkerInterceptorBase
}

func (*gitInspections) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &gitInspectionsActivity{}
	i.Next = next
	return i
}

type gitInspectionsActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *gitInspectionsActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	return i.Next.ExecuteActivity(gitx.ReuseInspections(ctx), in)
}
