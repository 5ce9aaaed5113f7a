package sandboxclient

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
)

// Connection overrides the Temporal connection settings of the environment
// and the TOML profile; a zero field keeps them. The fields mirror
// sandboxctl's connection flags, named like the Temporal CLI's (README.md
// "Configuration"). Prefer the environment or a profile for secrets (APIKey,
// TLSKeyData): a command line is visible to every local user.
type Connection struct {
	ConfigFile                 string // TOML file; default TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml
	Profile                    string // profile in it; default TEMPORAL_PROFILE, else "default"
	Address                    string // frontend host:port (TEMPORAL_ADDRESS)
	Namespace                  string // TEMPORAL_NAMESPACE
	APIKey                     string // TEMPORAL_API_KEY (implies TLS)
	TLS                        *bool  // TEMPORAL_TLS
	TLSCertPath, TLSCertData   string // TEMPORAL_TLS_CLIENT_CERT_PATH / _DATA (PEM)
	TLSKeyPath, TLSKeyData     string // TEMPORAL_TLS_CLIENT_KEY_PATH / _DATA (PEM)
	TLSCAPath, TLSCAData       string // TEMPORAL_TLS_SERVER_CA_CERT_PATH / _DATA (PEM)
	TLSServerName              string // TEMPORAL_TLS_SERVER_NAME
	TLSDisableHostVerification *bool  // TEMPORAL_TLS_DISABLE_HOST_VERIFICATION
}

// DialOptions configure Dial.
type DialOptions struct {
	// TaskQueue where sessions start; "" means sandboxapi.DefaultTaskQueue
	// (the worker's SANDBOX_TASK_QUEUE must match).
	TaskQueue string
	// Connection overrides the environment and the profile.
	Connection Connection
	// DefaultAddress is used when nothing sets an address; "" means
	// DefaultAddress (127.0.0.1:7233, sandboxctl's default: README
	// "Configuration"), so errors name the address actually dialled.
	DefaultAddress string
	// Codec encrypts and decrypts payloads; nil reads SANDBOX_PAYLOAD_KEYS
	// (unset: payloads are plaintext). It must hold the key the workers
	// encrypt with (docs/SECURITY.md "Payload encryption").
	Codec *payloadcodec.Codec
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger receives the SDK's log and TLS warnings (a rotated certificate
	// that does not load); nil means slog.Default().
	Logger *slog.Logger
	// Configure, when set, adjusts the SDK options last (interceptors,
	// identity, metrics); the data and failure converters it leaves in place
	// are the codec's.
	Configure func(*client.Options)
}

// DefaultAddress is the Temporal frontend Dial connects to when neither
// DialOptions nor the environment nor a profile names one: the embedded
// server of `make run` (README "Configuration", TEMPORAL_ADDRESS).
const DefaultAddress = "127.0.0.1:7233"

// Dial connects to Temporal from the same environment the worker and
// sandboxctl read — go.temporal.io/sdk/contrib/envconfig's TOML profiles and
// TEMPORAL_* variables (address, namespace, API key, TLS and mTLS, server
// name; certificate files re-read when they change) — with the payload codec
// of SANDBOX_PAYLOAD_KEYS applied to data and failures, and returns a Client
// that owns the connection (Close it). Errors name the variable, flag or
// profile key at fault: a missing or malformed certificate, key, CA or key
// file, an unknown profile, a server certificate the configured CA did not
// sign (TEMPORAL_TLS_SERVER_CA_CERT_PATH), a server that wants a client
// certificate (TEMPORAL_TLS_CLIENT_CERT_PATH).
func Dial(ctx context.Context, o DialOptions) (*Client, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cn := o.Connection
	s, err := temporalconn.Load(o.LookupEnv, temporalconn.Overrides{
		ConfigFile: cn.ConfigFile, Profile: cn.Profile, Address: cn.Address, Namespace: cn.Namespace, APIKey: cn.APIKey,
		TLS: cn.TLS, TLSCertPath: cn.TLSCertPath, TLSCertData: cn.TLSCertData, TLSKeyPath: cn.TLSKeyPath, TLSKeyData: cn.TLSKeyData,
		TLSCAPath: cn.TLSCAPath, TLSCAData: cn.TLSCAData, TLSServerName: cn.TLSServerName, TLSDisableHostVerification: cn.TLSDisableHostVerification,
	})
	if err != nil {
		return nil, err
	}
	if s.Address() == "" {
		if o.DefaultAddress == "" {
			o.DefaultAddress = DefaultAddress
		}
		s = s.With(o.DefaultAddress, "", false)
	}
	codec := o.Codec
	if codec == nil {
		if codec, err = payloadcodec.FromEnv(o.LookupEnv); err != nil {
			return nil, err
		}
	}
	opts, err := s.ClientOptions(o.Logger)
	if err != nil {
		return nil, err
	}
	opts.Logger = sdklog.NewStructuredLogger(o.Logger)
	if codec != nil {
		opts.DataConverter, opts.FailureConverter = codec.DataConverter(), codec.FailureConverter()
	}
	if o.Configure != nil {
		o.Configure(&opts)
	}
	tc, err := temporalconn.Dial(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return New(tc, Options{TaskQueue: o.TaskQueue, DataConverter: opts.DataConverter}), nil
}

// Close closes the Temporal client. Use it on a Client from Dial; a Client
// from New wraps a Temporal client its caller closes.
func (c *Client) Close() { c.tc.Close() }

// payloadHint explains a payload the client cannot decode: encrypted while
// the client has no keys, or with a key it does not hold.
func payloadHint(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, payloadcodec.ErrUnknownKey):
		return " (add that key to " + payloadcodec.EnvKeys + ", after the one that encrypts: docs/SECURITY.md \"Payload encryption\")"
	case strings.Contains(err.Error(), payloadcodec.Encoding):
		return " (the payloads are encrypted: set " + payloadcodec.EnvKeys + " to the workers' keys, docs/SECURITY.md \"Payload encryption\")"
	}
	return ""
}
