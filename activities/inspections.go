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

// withActivityContext returns a worker interceptor that runs every activity
// execution (local activities included) with the context wrap makes of its
// own, released by wrap's cancel func when the execution returns.
func withActivityContext(wrap func(context.Context) (context.Context, context.CancelFunc)) interceptor.WorkerInterceptor {
	return &activityContext{wrap: wrap}
}

type activityContext struct {
	interceptor.WorkerInterceptorBase
	wrap func(context.Context) (context.Context, context.CancelFunc)
}

func (w *activityContext) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityContextInbound{wrap: w.wrap}
	a.Next = next
	return a
}

type activityContextInbound struct {
	interceptor.ActivityInboundInterceptorBase
	wrap func(context.Context) (context.Context, context.CancelFunc)
}

func (a *activityContextInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	ctx, release := a.wrap(ctx)
	defer release()
	return a.Next.ExecuteActivity(ctx, in)
}
