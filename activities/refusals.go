package activities

import (
	"context"
	"errors"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RefusalLog returns a worker interceptor that logs, once at INFO on log,
// every activity execution (local activities included) that ends with an
// application error of a kind that is the caller's mistake
// (sandboxapi.Kind.CallerMistake: a bad URL, path, ref or argument): its
// activity type, error type and message, and the workflow it served. The
// SDK logs such an error at DEBUG only (its benign category,
// sandboxapi.NewApplicationError), so a user's mistake is one INFO line,
// never ERROR (docs/OPERATIONS.md "Logs"); other failures keep the SDK's
// ERROR line.
func RefusalLog(log *slog.Logger) interceptor.WorkerInterceptor {
	return &refusalLog{log: log}
}

type refusalLog struct {
	interceptor.WorkerInterceptorBase
	log *slog.Logger
}

func (w *refusalLog) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &refusalLogInbound{log: w.log}
	a.Next = next
	return a
}

type refusalLogInbound struct {
	interceptor.ActivityInboundInterceptorBase
	log *slog.Logger
}

func (a *refusalLogInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	var app *temporal.ApplicationError
	if err != nil && errors.As(err, &app) && app.Category() == temporal.ApplicationErrorCategoryBenign {
		if k := sandboxapi.KindByType(app.Type()); k != nil && k.CallerMistake() {
			info := activity.GetInfo(ctx)
			a.log.Info("request refused", "activity", info.ActivityType.Name, "type", app.Type(), "error", app.Message(),
				"workflow_id", info.WorkflowExecution.ID)
		}
	}
	return out, err
}
