package payloadcodec_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func codecWith(t *testing.T, id string) *payloadcodec.Codec {
	t.Helper()
	secret := make([]byte, payloadcodec.KeySize)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	k, err := payloadcodec.NewKey(id, secret)
	require.NoError(t, err)
	c, err := payloadcodec.New(k)
	require.NoError(t, err)
	return c
}

// A payload the worker cannot decode — encrypted with a key it does not
// hold, or refused by the data converter (an encrypted payload reaching a
// worker without keys, JSON that does not decode) — is reported as the
// contract's non-retryable InvalidArgument with its ErrorDetails, with and
// without keys; errors of other causes and Temporal errors keep their type.
func TestUndecodablePayloadsAreInvalidArgument(t *testing.T) {
	a, b := codecWith(t, "a"), codecWith(t, "b")
	encB, err := b.DataConverter().ToPayload(map[string]string{"path": "README.md"})
	require.NoError(t, err)
	var v map[string]string
	wrongKey := a.DataConverter().FromPayload(encB, &v)
	require.ErrorIs(t, wrongKey, payloadcodec.ErrUnknownKey)
	noKeys := converter.GetDefaultDataConverter().FromPayload(encB, &v)
	require.Error(t, noKeys)
	notJSON, err := converter.GetDefaultDataConverter().ToPayload("text")
	require.NoError(t, err)
	var n int
	badJSON := converter.GetDefaultDataConverter().FromPayload(notJSON, &n)
	require.Error(t, badJSON)

	plain := payloadcodec.TypedFailureConverter(temporal.GetDefaultFailureConverter())
	for name, c := range map[string]struct {
		fc  converter.FailureConverter
		err error
	}{
		"wrong key":          {a.FailureConverter(), wrongKey},
		"encrypted, no keys": {plain, noKeys},
		"not the type":       {plain, badJSON},
	} {
		// As the SDK reports an update argument it could not decode.
		err := fmt.Errorf("unable to decode the input for update %q: %w", "read_file", c.err)
		back := c.fc.FailureToError(c.fc.ErrorToFailure(err))
		var app *temporal.ApplicationError
		require.True(t, errors.As(back, &app), name)
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type(), name)
		assert.True(t, app.NonRetryable(), name)
		var d sandboxapi.ErrorDetails
		require.NoError(t, app.Details(&d), name)
		assert.Equal(t, sandboxapi.ErrInvalidArgument.Details(), d, name)
		assert.True(t, sandboxapi.IsInvalidArgument(sandboxapi.FromTemporal(back)), name)
	}

	other := plain.FailureToError(plain.ErrorToFailure(errors.New("disk on fire")))
	var app *temporal.ApplicationError
	require.True(t, errors.As(other, &app))
	assert.NotEqual(t, sandboxapi.ErrInvalidArgument.Type, app.Type(), "only decoding failures are retyped")
	typed := plain.FailureToError(plain.ErrorToFailure(temporal.NewApplicationError("x", "FileNotFound", wrongKey)))
	require.True(t, errors.As(typed, &app))
	assert.Equal(t, "FileNotFound", app.Type(), "an application error keeps its type")
}
