package hostworker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/sandboxcore/sandboxcore/internal/codecserver"
	"github.com/sandboxcore/sandboxcore/internal/devserver"
	"github.com/sandboxcore/sandboxcore/internal/temporalconn"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
)

// DefaultCodecPort is the embedded Web UI's codec server port.
const DefaultCodecPort = 8234

// SecurityConfig is the Temporal connection and payload encryption part of
// Config (README.md "Configuration"; docs/SECURITY.md "Connecting to
// Temporal", "Payload encryption").
type SecurityConfig struct {
	// Temporal is the client profile the worker dials with: a TOML profile
	// (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) under the TEMPORAL_ADDRESS,
	// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY and TEMPORAL_TLS* variables, as
	// go.temporal.io/sdk/contrib/envconfig reads them; Config.TemporalAddress
	// and Config.Namespace win over its address and namespace. nil: no TLS,
	// no API key.
	Temporal *temporalconn.Settings
	// DevTLS makes the embedded server speak TLS (SANDBOX_TEMPORAL_TLS_CERT,
	// SANDBOX_TEMPORAL_TLS_KEY; with SANDBOX_TEMPORAL_TLS_CLIENT_CA it requires
	// client certificates); nil: plaintext on loopback.
	DevTLS *devserver.TLS
	// Payloads encrypts every payload the worker writes and decrypts what it
	// reads (SANDBOX_PAYLOAD_KEYS); nil: payloads are plaintext.
	Payloads *payloadcodec.Codec
	// RequirePayloadEncryption makes the worker's codec refuse every payload
	// that carries no encryption metadata (payloadcodec.ErrPlaintext), so a
	// client without the keys cannot drive the worker with plaintext
	// arguments (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION; needs Payloads). The
	// codec server keeps reading plaintext. WorkerCodec applies it.
	RequirePayloadEncryption bool
	// CodecPort is the port of the codec server the embedded Web UI is pointed
	// at when Payloads is set (SANDBOX_CODEC_PORT; 0: none).
	CodecPort int
	// CodecToken is that codec server's token (SANDBOX_CODEC_TOKEN_FILE or
	// SANDBOX_CODEC_TOKEN); "" means <data dir>/codec-token, made on first
	// start. Never printed.
	CodecToken       string
	CodecTokenSource string // the variable CodecToken came from
}

// Format prints no secret, whatever the verb.
func (s SecurityConfig) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "hostworker.SecurityConfig{Temporal:%v DevTLS:%t Payloads:%v RequirePayloadEncryption:%t CodecPort:%d CodecToken:%t}",
		s.Temporal, s.DevTLS != nil, s.Payloads, s.RequirePayloadEncryption, s.CodecPort, s.CodecToken != "")
}

// EnvRequirePayloadEncryption is the worker setting behind
// SecurityConfig.RequirePayloadEncryption: 1 or 0 (default 0).
const EnvRequirePayloadEncryption = "SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION"

// WorkerCodec is the codec the worker's data and failure converters use:
// Payloads, refusing plaintext payloads when RequirePayloadEncryption is
// set; nil without Payloads. A Client passed in Options must use its
// converters (DataConverter, FailureConverter).
func (s SecurityConfig) WorkerCodec() *payloadcodec.Codec {
	if s.Payloads == nil || !s.RequirePayloadEncryption {
		return s.Payloads
	}
	return s.Payloads.WithOptions(payloadcodec.Options{RequireEncryption: true})
}

// securityFromEnv reads SecurityConfig and returns the Temporal address and
// namespace the profile gives. Errors are *ConfigError naming the variable
// (or the profile key); secrets are never in them.
func securityFromEnv(lookup func(string) (string, bool), get func(name, def string) string) (SecurityConfig, string, string, error) {
	var s SecurityConfig
	conn, err := temporalconn.Load(lookup, temporalconn.Overrides{})
	if err != nil {
		var le *temporalconn.LoadError
		if errors.As(err, &le) {
			return s, "", "", &ConfigError{le.Source, "<set>", le.Reason}
		}
		return s, "", "", &ConfigError{"TEMPORAL_CONFIG_FILE", "<set>", err.Error()}
	}
	s.Temporal = conn
	addr, ns := conn.Address(), conn.Namespace()

	cert, key, clientCA := get("SANDBOX_TEMPORAL_TLS_CERT", ""), get("SANDBOX_TEMPORAL_TLS_KEY", ""), get("SANDBOX_TEMPORAL_TLS_CLIENT_CA", "")
	switch {
	case cert == "" && key == "" && clientCA != "":
		return s, "", "", &ConfigError{"SANDBOX_TEMPORAL_TLS_CLIENT_CA", clientCA, "needs SANDBOX_TEMPORAL_TLS_CERT and SANDBOX_TEMPORAL_TLS_KEY (client certificates are checked over TLS)"}
	case cert == "" && key != "":
		return s, "", "", &ConfigError{"SANDBOX_TEMPORAL_TLS_CERT", "", "required with SANDBOX_TEMPORAL_TLS_KEY"}
	case cert != "" && key == "":
		return s, "", "", &ConfigError{"SANDBOX_TEMPORAL_TLS_KEY", "", "required with SANDBOX_TEMPORAL_TLS_CERT"}
	case cert != "":
		if addr != "" {
			return s, "", "", &ConfigError{"SANDBOX_TEMPORAL_TLS_CERT", cert, "configures the embedded server, which does not run when TEMPORAL_ADDRESS (or the Temporal profile) names a server"}
		}
		s.DevTLS = &devserver.TLS{CertFile: abs(cert), KeyFile: abs(key), ClientCAFile: abs(clientCA)}
		if err := s.DevTLS.Check(); err != nil {
			var te *devserver.TLSError
			if errors.As(err, &te) {
				return s, "", "", &ConfigError{te.Variable, get(te.Variable, ""), te.Reason}
			}
			return s, "", "", &ConfigError{"SANDBOX_TEMPORAL_TLS_CERT", cert, err.Error()}
		}
		if conn.TLSExplicitlyDisabled() {
			return s, "", "", &ConfigError{"TEMPORAL_TLS", "false", "the embedded server speaks TLS (SANDBOX_TEMPORAL_TLS_CERT): the worker's connection cannot disable it"}
		}
	default:
		if addr == "" && conn.TLSEnabled() {
			return s, "", "", &ConfigError{"TEMPORAL_TLS", "<set>", "TLS (or an API key) is configured but the embedded server runs without TLS: set SANDBOX_TEMPORAL_TLS_CERT and SANDBOX_TEMPORAL_TLS_KEY, or TEMPORAL_ADDRESS"}
		}
	}

	if s.Payloads, err = payloadcodec.FromEnv(lookup); err != nil {
		return s, "", "", &ConfigError{payloadcodec.EnvKeys, get(payloadcodec.EnvKeys, ""), trimKeysPrefix(err)}
	}
	if v := get(EnvRequirePayloadEncryption, "0"); v != "0" {
		b, err := strconv.ParseBool(v)
		switch {
		case err != nil:
			return s, "", "", &ConfigError{EnvRequirePayloadEncryption, v, "want 1 or 0"}
		case b && s.Payloads == nil:
			return s, "", "", &ConfigError{EnvRequirePayloadEncryption, v, "needs SANDBOX_PAYLOAD_KEYS: without keys every payload is plaintext, so the worker would refuse them all"}
		}
		s.RequirePayloadEncryption = b
	}
	if s.CodecPort, err = port(get("SANDBOX_CODEC_PORT", strconv.Itoa(DefaultCodecPort)), true); err != nil {
		return s, "", "", &ConfigError{"SANDBOX_CODEC_PORT", get("SANDBOX_CODEC_PORT", ""), err.Error()}
	}
	if s.CodecToken, s.CodecTokenSource, err = codecserver.TokenFromEnv(lookup); err != nil {
		return s, "", "", &ConfigError{s.CodecTokenSource, "<set>", err.Error()}
	}
	return s, addr, ns, nil
}

func trimKeysPrefix(err error) string {
	var ke *payloadcodec.KeysError
	if errors.As(err, &ke) {
		if ke.Entry != "" {
			return fmt.Sprintf("entry %q: %s", ke.Entry, ke.Reason)
		}
		return ke.Reason
	}
	return err.Error()
}

func abs(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// startUICodec starts the codec server the embedded Web UI is pointed at,
// when payloads are encrypted and both the UI and SANDBOX_CODEC_PORT are on.
// Its token is SANDBOX_CODEC_TOKEN(_FILE), else <data dir>/codec-token (made
// on first start, mode 0600). Returns nil when there is nothing to start.
func (h *Host) startUICodec(cfg Config, log *slog.Logger) error {
	sec := cfg.Security
	if sec.Payloads == nil || cfg.UIPort == 0 || sec.CodecPort == 0 {
		return nil
	}
	token := sec.CodecToken
	h.CodecTokenSource = sec.CodecTokenSource
	if token == "" {
		path := filepath.Join(cfg.DataDir, "codec-token")
		var err error
		if token, err = codecserver.EnsureTokenFile(path); err != nil {
			return fmt.Errorf("codec server token: %w", err)
		}
		h.CodecTokenSource = path
	}
	ip := "127.0.0.1"
	uiOrigins := []string{"http://" + net.JoinHostPort(ip, strconv.Itoa(cfg.UIPort)), "http://" + net.JoinHostPort("localhost", strconv.Itoa(cfg.UIPort))}
	hd, err := codecserver.New(codecserver.Options{Codec: sec.Payloads, Token: token, AllowedOrigins: uiOrigins, Logger: log.With("component", "codec-server")})
	if err != nil {
		return err
	}
	srv, err := codecserver.Start(net.JoinHostPort(ip, strconv.Itoa(sec.CodecPort)), hd, nil)
	if err != nil {
		return fmt.Errorf("%w (set SANDBOX_CODEC_PORT to another port, or 0 for none)", err)
	}
	h.Codec = srv
	log.Info("codec server for the Web UI", "endpoint", srv.URL, "login", srv.URL+"/login", "token_from", h.CodecTokenSource)
	return nil
}
