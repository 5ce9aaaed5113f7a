package payloadcodec

import (
	"errors"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// UndecodableType is the failure type of an error caused by a payload the
// worker could not decode: the contract's InvalidArgument kind (docs/API.md
// "Errors"), non-retryable, since the same payload never decodes.
const UndecodableType = "InvalidArgument"

// undecodableDetails is the one detail of such a failure, the contract's
// ErrorDetails of InvalidArgument (docs/API.md "Errors": family, kind,
// retryable); spelt out here so that this package stays a leaf.
type undecodableDetails struct {
	Family    string `json:"family"`
	Kind      string `json:"kind"`
	Retryable bool   `json:"retryable"`
}

// undecodable are the causes TypedFailureConverter recognises: this codec's
// own errors and the SDK data converter's decoding errors.
var undecodable = []error{
	ErrUnknownKey, ErrCorrupt, ErrPlaintext,
	converter.ErrUnableToDecode, converter.ErrEncodingIsNotSupported,
	converter.ErrEncodingIsNotSet, converter.ErrMetadataIsNotSet,
}

// TypedFailureConverter wraps fc so that an error caused by a payload that
// could not be decoded — encrypted with a key this worker does not hold
// (ErrUnknownKey), corrupt (ErrCorrupt), plaintext to a codec that requires
// encryption (ErrPlaintext), or refused by the data converter
// (an unknown encoding, no encoding, JSON that does not decode) — is sent as
// a non-retryable application error of type UndecodableType
// ("InvalidArgument") instead of the SDK's untyped, retryable "wrapError".
// The SDK reports such errors itself, before any workflow code runs: an
// update or workflow argument the worker cannot decode. An error that
// already is (or wraps) a Temporal error (application, activity, child
// workflow, canceled, timeout) is passed to fc unchanged; its message is
// kept. Codec.FailureConverter applies it; a worker without keys applies it
// to the SDK's default failure converter (a client encrypting for a
// deployment that does not decrypt gets the same typed error).
func TypedFailureConverter(fc converter.FailureConverter) converter.FailureConverter {
	return typedFailureConverter{fc}
}

type typedFailureConverter struct{ converter.FailureConverter }

func (t typedFailureConverter) ErrorToFailure(err error) *failurepb.Failure {
	if err != nil && causedByUndecodable(err) {
		err = temporal.NewNonRetryableApplicationError(err.Error(), UndecodableType, nil,
			undecodableDetails{Family: "workspace", Kind: UndecodableType})
	}
	return t.FailureConverter.ErrorToFailure(err)
}

func causedByUndecodable(err error) bool {
	var (
		app      *temporal.ApplicationError
		act      *temporal.ActivityError
		child    *temporal.ChildWorkflowExecutionError
		canceled *temporal.CanceledError
		timeout  *temporal.TimeoutError
	)
	if errors.As(err, &app) || errors.As(err, &act) || errors.As(err, &child) || errors.As(err, &canceled) || errors.As(err, &timeout) {
		return false
	}
	for _, e := range undecodable {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
