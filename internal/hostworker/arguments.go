package hostworker

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// argumentsRequired is the worker interceptor of
// SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION for updates and signals: an update or
// signal that carries no argument payload at all never meets the codec
// that refuses plaintext, so a client without the keys could call the
// argument-less ones (status, diff, hibernate, restore, …). Its validator
// refuses them with
// InvalidArgument; the SDKs send an (encrypted) empty object for an
// operation without arguments (docs/API.md "Payload encryption").
// Validators do not run on replay, so histories are unaffected. Signals
// cannot be refused to their sender: the workflow drops them, as recorded
// in its history (workflows.RequireSignalPayloads).
func argumentsRequired() interceptor.WorkerInterceptor { return &argsWorker{} }

type argsWorker struct {
	interceptor.WorkerInterceptorBase
}

func (w *argsWorker) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &argsInbound{}
	i.Next = next
	return i
}

type argsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

// ExecuteWorkflow runs the workflow with its signals that carry no payload
// refused (workflows.RequireSignalPayloads), as its updates are here.
func (i *argsInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflows.RequireSignalPayloads(ctx), in)
}

// ValidateUpdate refuses an update none of whose arguments arrived as a
// payload, then asks the workflow's own validator.
func (i *argsInbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	carried := false
	for _, a := range in.Args {
		if rv, ok := a.(converter.RawValue); ok && rv.Payload() != nil {
			carried = true
		}
	}
	if !carried {
		return activities.ToApplicationError(sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
			"%s: an (encrypted) argument is required by this worker (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION): send {} for an operation without one", sandboxapi.Clip(in.Name, 60)))
	}
	return i.Next.ValidateUpdate(ctx, in)
}
