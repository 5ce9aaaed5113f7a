package temporalconn

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"
)

// Dial connects with opts (from ClientOptions, plus the caller's logger and
// converters) and checks the connection (the SDK calls GetSystemInfo). A
// failure is returned with a hint naming the setting to change when the
// cause is recognizable: a server that wants a client certificate, refuses
// this one, or does not speak the same protocol (TLS or plaintext).
func Dial(ctx context.Context, s *Settings, opts client.Options) (client.Client, error) {
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, s.explain(err)
	}
	return c, nil
}

// DialError is a failed connection to Temporal with its hint.
type DialError struct {
	Address string
	Hint    string // "" when nothing more specific can be said
	Err     error
}

// Error renders "Temporal at ADDR: cause (hint)".
func (e *DialError) Error() string {
	msg := fmt.Sprintf("Temporal at %s: %v", e.Address, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap returns the SDK's error.
func (e *DialError) Unwrap() error { return e.Err }

func (s *Settings) explain(err error) error {
	msg := err.Error()
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(msg, sub) {
				return true
			}
		}
		return false
	}
	hint := ""
	switch {
	case has("certificate required") && !s.HasClientCertificate():
		hint = "the server requires a client certificate (mutual TLS): set " + sCertPath.env + " and " + sKeyPath.env
	case has("certificate required", "bad certificate", "unknown certificate authority", "certificate unknown", "expired certificate", "unsupported certificate"):
		if s.HasClientCertificate() {
			hint = "the server refused the client certificate from " + s.certSource() + ": it must be signed by a CA the server trusts for clients, hold the client-authentication usage and be valid now"
		} else {
			hint = "the server requires a client certificate (mutual TLS): set " + sCertPath.env + " and " + sKeyPath.env
		}
	case s.TLSEnabled() && !s.HasClientCertificate() && has("broken pipe", "connection reset by peer", "error reading server preface: EOF"):
		// TLS 1.3: the server checks the client's certificate after the
		// client's side of the handshake, and may just close the connection.
		hint = "the server may require a client certificate (mutual TLS): set " + sCertPath.env + " and " + sKeyPath.env
	case has("first record does not look like a TLS handshake"):
		hint = "the server does not speak TLS: unset the TLS settings, or set " + sTLS.env + "=false"
	case !s.TLSEnabled() && has("error reading server preface", "connection closed before server preface", "EOF", "http2: frame too large"):
		hint = "the server may require TLS: set " + sTLS.env + "=true, with " + sCAPath.env + " for a private CA"
	}
	return &DialError{Address: s.profile.Address, Hint: hint, Err: err}
}
