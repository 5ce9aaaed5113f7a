package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// changeSignalPayloads marks runs that may refuse a signal carrying no
// payload at all (RequireSignalPayloads); runs recorded before it took such
// a signal as its zero value and must replay so.
const changeSignalPayloads = "refuse-signals-without-payload"

// payloadsRequiredKey is the workflow context key RequireSignalPayloads sets.
type payloadsRequiredKey struct{}

// RequireSignalPayloads returns ctx marked so that the workflow's signals
// that carry no payload at all are refused (dropped, logged) instead of
// read as their zero value: a worker that refuses plaintext payloads
// (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION, docs/SECURITY.md "Payload
// encryption") sets it in its inbound interceptor's ExecuteWorkflow, since
// a signal without a payload never meets the codec that refuses plaintext.
// The decision is recorded in history (a side effect) when such a signal
// arrives, so a run replays the same whatever the replaying worker's
// setting.
func RequireSignalPayloads(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, payloadsRequiredKey{}, true)
}

// refusedWithoutPayload reports whether the signal name, received as raw,
// carries no payload and this run refuses such signals
// (RequireSignalPayloads, as recorded); a refused signal is logged. A
// signal with a payload is never refused here, and asks nothing of the
// history.
func refusedWithoutPayload(ctx workflow.Context, name string, raw converter.RawValue) bool {
	if raw.Payload() != nil {
		return false
	}
	if workflow.GetVersion(ctx, changeSignalPayloads, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	var required bool
	if err := workflow.SideEffect(ctx, func(ctx workflow.Context) any {
		r, _ := ctx.Value(payloadsRequiredKey{}).(bool)
		return r
	}).Get(&required); err != nil || !required {
		return false
	}
	workflow.GetLogger(ctx).Warn("signal without a payload refused: this worker requires (encrypted) arguments (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION)",
		"signal", name)
	return true
}
