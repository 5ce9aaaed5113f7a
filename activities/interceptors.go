package activities

import (
	"context"

	"go.temporal.io/sdk/interceptor"
)

// The host's worker interceptors that only give each activity execution a
// context of their own (GitInspections, HeartbeatShield) share this one.

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
