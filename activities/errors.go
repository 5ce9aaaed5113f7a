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

// ErrorTranslation returns the worker interceptor that is the one place an
// activity's error becomes what crosses the wire (docs/API.md "Errors"):
// every activity execution (local activities included) that ends with an
// error returns ToApplicationError's translation of it, so activity code
// returns the typed errors of the ports (sandboxapi.Errorf, errors.Is-able)
// and never translates them itself.
//
// It also logs, once at INFO on log, every execution that ends with an
// error of a kind that is the caller's mistake
// (sandboxapi.Kind.CallerMistake: a bad URL, path, ref or argument): its
// activity type, error type and message, and the workflow it served. The
// SDK logs such an error at DEBUG only (its benign category,
// sandboxapi.NewApplicationError), so a user's mistake is one INFO line,
// never ERROR (docs/OPERATIONS.md "Logs"); other failures keep the SDK's
// ERROR line.
func ErrorTranslation(log *slog.Logger) interceptor.WorkerInterceptor {
	return &errorTranslation{log: log}
}

type errorTranslation struct {
	interceptor.WorkerInterceptorBase
	log *slog.Logger
}

func (w *errorTranslation) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &errorTranslationInbound{log: w.log}
	a.Next = next
	return a
}

type errorTranslationInbound struct {
	interceptor.ActivityInboundInterceptorBase
	log *slog.Logger
}

func (a *errorTranslationInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	err = ToApplicationError(err)
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

// ToApplicationError maps an error onto a Temporal application error whose
// Type is the sandbox Kind's stable type string and whose detail is its
// sandboxapi.ErrorDetails (docs/API.md "Errors"); kinds that are not
// Retryable are non-retryable. Unknown errors become type "SandboxError",
// non-retryable. Context errors and application errors pass through unchanged.
func ToApplicationError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	if sandboxapi.KindOf(err) == nil {
		return sandboxapi.NewApplicationError(err, true)
	}
	return sandboxapi.NewApplicationError(err, false)
}
