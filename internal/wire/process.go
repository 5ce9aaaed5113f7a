package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Activity names of exec on processes and of the process updates
// (docs/API.md "Processes"; registered by package activities).
const (
	// ActivityExecStart starts an exec's command as a process of the
	// runtime (ProcessSpec.Exec, id sandboxapi.ExecProcessID) and waits a
	// short while for it to end: a local activity when the session runs on
	// its host's queue, so a short command costs one workflow task.
	ActivityExecStart = "sandbox.ExecStart"
	// ActivityExecCancel kills an exec's process tree (cancel, hibernate and
	// release during a command).
	ActivityExecCancel    = "sandbox.ExecCancel"
	ActivityProcessStart  = "sandbox.ProcessStart"
	ActivityProcessRead   = "sandbox.ProcessRead"
	ActivityProcessWrite  = "sandbox.ProcessWrite"
	ActivityProcessSignal = "sandbox.ProcessSignal"
	ActivityProcessResize = "sandbox.ProcessResize"
	ActivityProcessList   = "sandbox.ProcessList"
)

// ExecStartResult is ActivityExecStart's result.
type ExecStartResult struct {
	// Unsupported: the runtime has no processes (sandbox.ProcessRuntime);
	// nothing ran: run the command with ActivityExec without ProcessID.
	Unsupported bool `json:"unsupported,omitempty"`
	// Done: the command ended within the wait; Result is its outcome.
	Done   bool                  `json:"done,omitempty"`
	Result sandboxapi.ExecResult `json:"result"`
}

// ExecCancelInput is ActivityExecCancel's argument.
type ExecCancelInput struct {
	WorkspaceID string `json:"workspace_id"`
	ProcessID   string `json:"process_id"`
	// Wait bounds how long the activity waits for the killed tree to be gone.
	Wait time.Duration `json:"wait,omitempty"`
}

// ExecCancelResult is ActivityExecCancel's result.
type ExecCancelResult struct {
	// Ended: the process and its tree are gone.
	Ended bool `json:"ended"`
}

// ProcessReadActivityInput is ActivityProcessRead's argument.
type ProcessReadActivityInput struct {
	WorkspaceID string                      `json:"workspace_id"`
	Request     sandboxapi.ProcessReadInput `json:"request"`
	// Wait overrides Request.WaitMS: the session's first, local attempt of
	// a read does not wait (the workflow task is not held).
	Wait time.Duration `json:"wait"`
}

// ProcessListResult is ActivityProcessList's result.
type ProcessListResult = sandboxapi.ProcessListResult

// ProcessTrack is a background process the session started and may still
// be live, carried across continue-as-new (idle rules, docs/API.md "Idle
// rules for processes").
type ProcessTrack struct {
	ID string `json:"id"`
	// LastUse is when it was started, read or written last.
	LastUse time.Time `json:"last_use"`
}

// ProcessSpecFor maps a process_start argument onto the runtime's spec.
func ProcessSpecFor(in sandboxapi.ProcessStartInput) sandbox.ProcessSpec {
	return sandbox.ProcessSpec{Cmd: in.Cmd, Cwd: in.Cwd, Env: in.Env, Tag: in.Tag, PTY: in.PTY, Stdin: in.Stdin, Network: in.Network}
}

// ExecHeadMetadata is the payload metadata key under which the exec
// activities, asked with ExecActivityInput.RawResult, put their ExecHead
// (JSON): the session reads what it needs of the result there and returns
// the payload's data — the command's sandboxapi.ExecResult, as the client
// decodes it — without decoding it (docs/DESIGN.md "Temporal shape": large payloads).
const ExecHeadMetadata = "sandboxcore-exec-head"

// ExecHead is what the session needs of an exec activity's result: whether
// the command ended (ActivityExecStart: Done; Unsupported), how (ExitCode,
// TimedOut, Cancelled), and the replica's state after it (remote runtimes).
type ExecHead struct {
	Done           bool                       `json:"done,omitempty"`
	Unsupported    bool                       `json:"unsupported,omitempty"`
	ExitCode       int                        `json:"exit_code"`
	TimedOut       bool                       `json:"timed_out,omitempty"`
	Cancelled      bool                       `json:"cancelled,omitempty"`
	RuntimeReplica *sandboxapi.RuntimeReplica `json:"runtime_replica,omitempty"`
}

// Result is the head as an ExecResult without output (what the session
// records of a command: its details and outcome).
func (h ExecHead) Result() sandboxapi.ExecResult {
	return sandboxapi.ExecResult{ExitCode: h.ExitCode, TimedOut: h.TimedOut, Cancelled: h.Cancelled}
}

// headOf is the head of res (a command that ended).
func headOf(res sandboxapi.ExecResult, replica *sandboxapi.RuntimeReplica) ExecHead {
	return ExecHead{Done: true, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Cancelled: res.Cancelled, RuntimeReplica: replica}
}

// ExecStartPayload is ActivityExecStart's result as a payload: the JSON of
// r as it always was, or, when raw and the command ended, the JSON of its
// ExecResult with the ExecHead in the metadata.
func ExecStartPayload(r ExecStartResult, raw bool) (converter.RawValue, error) {
	if !raw {
		return jsonValue(r, nil)
	}
	if !r.Done {
		return jsonValue(r, &ExecHead{Unsupported: r.Unsupported})
	}
	h := headOf(r.Result, nil)
	return jsonValue(r.Result, &h)
}

// ExecPayload is ActivityExec's result as a payload: the JSON of r as it
// always was, or, when raw, the JSON of its ExecResult with the ExecHead
// (and the replica's state) in the metadata.
func ExecPayload(r ExecActivityResult, raw bool) (converter.RawValue, error) {
	if !raw {
		return jsonValue(r, nil)
	}
	h := headOf(r.ExecResult, r.RuntimeReplica)
	return jsonValue(r.ExecResult, &h)
}

func jsonValue(v any, head *ExecHead) (converter.RawValue, error) {
	p, err := converter.NewJSONPayloadConverter().ToPayload(v)
	if err != nil {
		return converter.RawValue{}, err
	}
	if head != nil {
		b, err := json.Marshal(head)
		if err != nil {
			return converter.RawValue{}, err
		}
		p.Metadata[ExecHeadMetadata] = b
	}
	return converter.NewRawValue(p), nil
}

// ExecHeadOf returns the ExecHead a raw exec result carries; false when it
// carries none (a result of an activity asked without RawResult, or of a
// worker from before it, or a test's): decode the payload as the typed
// result then. Errors: a head that does not decode.
func ExecHeadOf(v converter.RawValue) (ExecHead, bool, error) {
	p := v.Payload()
	b, ok := p.GetMetadata()[ExecHeadMetadata]
	if !ok {
		return ExecHead{}, false, nil
	}
	var h ExecHead
	if err := json.Unmarshal(b, &h); err != nil {
		return ExecHead{}, false, fmt.Errorf("exec result: its head does not decode: %w", err)
	}
	return h, true, nil
}

// DecodeExecStart is what an ActivityExecStart payload says (to the
// session, and to those that observe it, such as the metrics): its head as
// the result when it carries one (raw: the output left out, the payload's
// data the client's ExecResult), else the payload decoded whole. Errors: a
// head or a payload that does not decode.
func DecodeExecStart(v converter.RawValue) (r ExecStartResult, raw bool, err error) {
	h, ok, err := ExecHeadOf(v)
	if err != nil || ok {
		return ExecStartResult{Done: h.Done, Unsupported: h.Unsupported, Result: h.Result()}, ok, err
	}
	return r, false, converter.GetDefaultDataConverter().FromPayload(v.Payload(), &r)
}

// DecodeExec is DecodeExecStart for an ActivityExec payload.
func DecodeExec(v converter.RawValue) (r ExecActivityResult, raw bool, err error) {
	h, ok, err := ExecHeadOf(v)
	if err != nil || ok {
		return ExecActivityResult{ExecResult: h.Result(), RuntimeReplica: h.RuntimeReplica}, ok, err
	}
	return r, false, converter.GetDefaultDataConverter().FromPayload(v.Payload(), &r)
}
