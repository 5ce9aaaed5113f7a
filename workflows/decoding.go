package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
)

// Strict decoding of workflow arguments and signal payloads (docs/API.md
// "Strict decoding"). SessionWorkflow's argument and every update's are
// decoded strictly by wire.Decode; the other workflows' arguments and the
// signals are decoded here the same way. Histories recorded before this
// decoding was strict replay with the lenient decoding they were recorded
// with: the version marker is only written (and only read) when a payload
// fails the strict decoding, so a valid payload changes nothing in any
// history.

// changeStrictDecoding: a workflow argument or signal payload that fails
// strict decoding is refused (an InvalidArgument failure of the workflow, an
// answered signal) instead of being decoded leniently (unknown fields and
// case-folded keys accepted) or, for a signal that did not decode at all,
// waited past (the signal loop then blocked until the next signal of that
// name, holding every other signal back).
const changeStrictDecoding = "strict-workflow-input-and-signals"

// strictDecoding reports whether this run refuses what fails strict
// decoding (false: a run recorded before, which decodes leniently).
func strictDecoding(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeStrictDecoding, workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// decodeStrictly decodes a workflow argument or signal payload strictly into
// T (wire.Decode; what names it in messages). A run recorded before strict
// decoding decodes what fails it leniently, as it was recorded: then
// corrupt reports that even the lenient decoding failed (the SDK dropped
// such a payload). Errors: sandboxapi.ErrInvalidArgument naming the field.
func decodeStrictly[T any](ctx workflow.Context, what string, raw converter.RawValue) (v T, corrupt bool, err error) {
	v, err = decodeRecorded[T](ctx, what, raw)
	if err == nil || strictDecoding(ctx) {
		return v, false, err
	}
	var lenient T
	if lenientDecode(raw, &lenient) != nil {
		return lenient, true, err
	}
	return lenient, false, nil
}

// decodeInput decodes a workflow's argument (decodeStrictly). Errors:
// sandboxapi.ErrInvalidArgument naming the field (pass it through appError).
func decodeInput[T any](ctx workflow.Context, what string, raw converter.RawValue) (T, error) {
	v, _, err := decodeStrictly[T](ctx, what, raw)
	return v, err
}

// lenientDecode is the default data converter's decoding (encoding/json:
// unknown fields ignored, keys case-folded), as runs recorded before strict
// decoding did it.
func lenientDecode(raw converter.RawValue, v any) error {
	p := raw.Payload()
	if p == nil {
		return nil
	}
	return converter.GetDefaultDataConverter().FromPayload(p, v)
}

// receiveSignal takes the signal a selector found on c (never blocking, so a
// malformed one cannot hold the signal loop) and decodes it strictly into T.
// ok reports a usable value; when !ok, err is the decoding error to answer
// the sender with (sandboxapi.ErrInvalidArgument naming the field), or nil
// when the SDK dropped every pending payload because the data converter
// refused them (e.g. a payload key this worker does not hold; the SDK logs
// it). raw is the payload as received, for answering a refused one. A run
// recorded before strict decoding waits, as it was recorded, for the next
// signal on c when the one found did not decode at all. A signal without a
// payload that this run refuses (refusedWithoutPayload) is not ok, with a
// nil err: there is no sender to answer.
func receiveSignal[T any](ctx workflow.Context, c workflow.ReceiveChannel, name string) (v T, raw converter.RawValue, ok bool, err error) {
	if !c.ReceiveAsync(&raw) {
		if !strictDecoding(ctx) {
			c.Receive(ctx, &v)
			return v, raw, true, nil
		}
		return v, raw, false, nil
	}
	if refusedWithoutPayload(ctx, name, raw) {
		return v, raw, false, nil
	}
	v, corrupt, err := decodeStrictly[T](ctx, name, raw)
	switch {
	case corrupt:
		c.Receive(ctx, &v)
		return v, raw, true, nil
	case err != nil:
		return v, raw, false, err
	}
	return v, raw, true, nil
}

// signalSender is what can be read of a refused signal to answer its
// sender: the request id and reply-to workflow id when they are strings.
type signalSender struct {
	RequestID string `json:"request_id"`
	ReplyTo   string `json:"reply_to"`
}

// senderOf reads the request id and reply-to of a refused signal's payload,
// ignoring everything else (zero values when it is not a JSON object).
func senderOf(raw converter.RawValue) signalSender {
	var out, probe signalSender
	if p := raw.Payload(); p != nil {
		var fields map[string]json.RawMessage
		if json.Unmarshal(p.GetData(), &fields) == nil {
			_ = json.Unmarshal(fields["request_id"], &probe.RequestID)
			_ = json.Unmarshal(fields["reply_to"], &probe.ReplyTo)
			out = probe
		}
	}
	return out
}

// changeDuplicateKeys marks runs that refuse a workflow argument or signal
// with a duplicate JSON key (wire.DuplicateKey); runs recorded before it
// decoded one (the last value wins) and must replay so.
const changeDuplicateKeys = "refuse-duplicate-keys"

// decodeRecorded is wire.Decode for a workflow's argument or a signal: a
// payload whose only fault is a duplicate key is refused by a run recorded
// since changeDuplicateKeys, and decoded as it was (wire.DecodeAccepted) by
// one recorded before. The version is asked only on such a payload, the
// same on replay.
func decodeRecorded[T any](ctx workflow.Context, what string, raw converter.RawValue) (T, error) {
	v, err := wire.Decode[T](what, raw)
	if err == nil {
		return v, nil
	}
	accepted, aerr := wire.DecodeAccepted[T](what, raw)
	if aerr != nil || workflow.GetVersion(ctx, changeDuplicateKeys, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
		return v, err
	}
	return accepted, nil
}
