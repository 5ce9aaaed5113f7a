package temporalconn

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/certtest"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestLoadPrecedenceAndSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(`
[profile.default]
address = "file-default:7233"

[profile.prod]
address = "prod.example.com:7233"
namespace = "tenant-a"
api_key = "file-api-key"
[profile.prod.tls]
server_name = "frontend.example.com"
`), 0o600))

	s, err := Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file}), Overrides{})
	require.NoError(t, err)
	assert.Equal(t, "file-default:7233", s.Address())
	assert.Equal(t, "default", s.Namespace())
	assert.False(t, s.TLSEnabled())

	s, err = Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "tenant-b"}), Overrides{})
	require.NoError(t, err)
	assert.Equal(t, "prod.example.com:7233", s.Address())
	assert.Equal(t, "tenant-b", s.Namespace(), "the environment wins over the profile")
	assert.True(t, s.HasAPIKey())
	assert.True(t, s.TLSEnabled())
	assert.Equal(t, "tls.server_name in profile \"prod\" of "+file, s.source(sServerName))
	assert.Equal(t, "TEMPORAL_NAMESPACE", s.source(sNamespace))

	s, err = Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_ADDRESS": "env:1"}),
		Overrides{Profile: "prod", Address: "flag:2", Namespace: "tenant-c", TLS: new(bool)})
	require.NoError(t, err)
	assert.Equal(t, "flag:2", s.Address(), "a flag wins over the environment")
	assert.Equal(t, "tenant-c", s.Namespace())
	assert.False(t, s.TLSEnabled(), "--tls=false disables TLS even with an API key")
	assert.Equal(t, "--address", s.source(sAddress))

	_, err = Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "nope"}), Overrides{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TEMPORAL_PROFILE")
	assert.Contains(t, err.Error(), "nope")

	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("[profile.default\naddress="), 0o600))
	_, err = Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": bad}), Overrides{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TEMPORAL_CONFIG_FILE ("+bad+")")

	// A missing file is no error (as in every Temporal SDK).
	s, err = Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "none.toml")}), Overrides{})
	require.NoError(t, err)
	assert.Equal(t, "", s.Address())
}

func TestSettingsAreChecked(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		o    Overrides
		want string
	}{
		"cert without key":     {map[string]string{"TEMPORAL_TLS_CLIENT_CERT_PATH": "/c"}, Overrides{}, "TEMPORAL_TLS_CLIENT_CERT_PATH: a client certificate needs its key: set TEMPORAL_TLS_CLIENT_KEY_PATH"},
		"key without cert":     {nil, Overrides{TLSKeyPath: "/k"}, "--tls-key-path: a client key needs its certificate"},
		"path and data":        {map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/ca", "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "x"}, Overrides{}, "TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot be used together with TEMPORAL_TLS_SERVER_CA_CERT_DATA"},
		"flag path over data":  {map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_DATA": "x"}, Overrides{TLSCAPath: "/ca"}, ""},
		"tls disabled ignores": {map[string]string{"TEMPORAL_TLS": "false", "TEMPORAL_TLS_CLIENT_CERT_PATH": "/c"}, Overrides{}, ""},
	} {
		_, err := Load(env(c.env), c.o)
		if c.want == "" {
			assert.NoError(t, err, name)
			continue
		}
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
}

func TestSecretsAreNeverPrinted(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	leaf := ca.Issue(t, certtest.Options{CommonName: "client", Client: true})
	s, err := Load(env(map[string]string{
		"TEMPORAL_ADDRESS": "x:1", "TEMPORAL_API_KEY": "super-secret-api-key",
		"TEMPORAL_TLS_CLIENT_CERT_DATA": string(leaf.CertPEM), "TEMPORAL_TLS_CLIENT_KEY_DATA": string(leaf.KeyPEM),
	}), Overrides{})
	require.NoError(t, err)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{s, *s, struct{ S *Settings }{s}} {
			out := fmt.Sprintf(verb, v)
			assert.NotContains(t, out, "super-secret-api-key", verb)
			assert.NotContains(t, out, "PRIVATE KEY", verb)
			assert.NotContains(t, out, string(leaf.KeyPEM[30:60]), verb)
		}
	}
	var logs bytes.Buffer
	opts, err := s.ClientOptions(slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	assert.NotNil(t, opts.Credentials, "the API key becomes SDK credentials")
	assert.NotContains(t, logs.String(), "super-secret-api-key")
}

func TestAPIKeyImpliesTLS(t *testing.T) {
	s, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233", "TEMPORAL_API_KEY": "k"}), Overrides{})
	require.NoError(t, err)
	opts, err := s.ClientOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS)
	assert.Equal(t, "ns.acct.tmprl.cloud", opts.ConnectionOptions.TLS.ServerName)
	assert.NotNil(t, opts.ConnectionOptions.TLS.VerifyConnection, "verified against the system's CAs")

	var logs bytes.Buffer
	s, err = Load(env(map[string]string{"TEMPORAL_ADDRESS": "h:1", "TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"}), Overrides{})
	require.NoError(t, err)
	opts, err = s.ClientOptions(slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	assert.Nil(t, opts.ConnectionOptions.TLS)
	assert.True(t, opts.ConnectionOptions.TLSDisabled)
	assert.Contains(t, logs.String(), "without TLS (TEMPORAL_TLS disables it)")

	s, err = Load(env(map[string]string{"TEMPORAL_ADDRESS": "h:1"}), Overrides{})
	require.NoError(t, err)
	assert.False(t, s.TLSEnabled())
	assert.True(t, s.With("", "", true).TLSEnabled(), "RequireTLS turns TLS on")
	assert.False(t, s.TLSEnabled(), "With copies")
}

// tlsServer accepts TLS connections with the given config and records the
// common name of each client certificate it sees ("" for none).
type tlsServer struct {
	addr string
	mu   sync.Mutex
	conf *tls.Config
	seen []string
}

func startTLSServer(t *testing.T, conf *tls.Config) *tlsServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &tlsServer{addr: l.Addr().String(), conf: conf}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			tc := tls.Server(c, s.conf)
			s.mu.Unlock()
			go func() {
				defer tc.Close()
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() != nil {
					return
				}
				cn := ""
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					cn = pc[0].Subject.CommonName
				}
				s.mu.Lock()
				s.seen = append(s.seen, cn)
				s.mu.Unlock()
				_, _ = tc.Write([]byte("ok"))
			}()
		}
	}()
	return s
}

func (s *tlsServer) setConfig(c *tls.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conf = c
}

func (s *tlsServer) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return "<none>"
	}
	return s.seen[len(s.seen)-1]
}

// handshake dials addr with conf and reads the server's "ok".
func handshake(addr string, conf *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if string(buf) != "ok" {
		return fmt.Errorf("read %q", buf)
	}
	return nil
}

func serverConfig(t *testing.T, leaf certtest.Leaf, clientCA *certtest.CA) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{leaf.TLS(t)}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.Pool()
	}
	return c
}

func clientTLS(t *testing.T, vars map[string]string, o Overrides, log *slog.Logger) (*tls.Config, error) {
	t.Helper()
	s, err := Load(env(vars), o)
	if err != nil {
		return nil, err
	}
	opts, err := s.ClientOptions(log)
	if err != nil {
		return nil, err
	}
	require.NotNil(t, opts.ConnectionOptions.TLS)
	return opts.ConnectionOptions.TLS, nil
}

func TestMutualTLSAndRotation(t *testing.T) {
	dir := t.TempDir()
	serverCA := certtest.NewCA(t, "server CA 1")
	clientCA := certtest.NewCA(t, "client CA")
	srv := startTLSServer(t, serverConfig(t, serverCA.Issue(t, certtest.Options{CommonName: "frontend"}), clientCA))
	caPath := serverCA.WriteCA(t, dir, "server-ca")
	certPath, keyPath := clientCA.Issue(t, certtest.Options{CommonName: "worker-1", Client: true}).Write(t, dir, "client")

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	conf, err := clientTLS(t, map[string]string{
		"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": caPath,
		"TEMPORAL_TLS_CLIENT_CERT_PATH": certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH": keyPath,
	}, Overrides{}, log)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", conf.ServerName)
	require.NoError(t, handshake(srv.addr, conf))
	assert.Equal(t, "worker-1", srv.last())

	// The client certificate is rotated on disk: the next connection uses it.
	clientCA.Issue(t, certtest.Options{CommonName: "worker-2", Client: true}).Replace(t, certPath, keyPath)
	require.NoError(t, handshake(srv.addr, conf))
	assert.Equal(t, "worker-2", srv.last())

	// Half a rotation (a key without its certificate) keeps the previous pair.
	next := clientCA.Issue(t, certtest.Options{CommonName: "worker-3", Client: true})
	require.NoError(t, os.WriteFile(keyPath, next.KeyPEM, 0o600))
	require.NoError(t, handshake(srv.addr, conf))
	assert.Equal(t, "worker-2", srv.last())
	assert.Contains(t, logs.String(), "does not load yet")
	require.NoError(t, os.WriteFile(certPath, next.CertPEM, 0o600))
	require.NoError(t, handshake(srv.addr, conf))
	assert.Equal(t, "worker-3", srv.last())

	// The server moves to a certificate from a new CA: refused until the CA
	// file is rotated too, then accepted without a restart.
	serverCA2 := certtest.NewCA(t, "server CA 2")
	srv.setConfig(serverConfig(t, serverCA2.Issue(t, certtest.Options{CommonName: "frontend-2"}), clientCA))
	err = handshake(srv.addr, conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TEMPORAL_TLS_SERVER_CA_CERT_PATH ("+caPath+")")
	assert.Contains(t, err.Error(), `issuer "CN=server CA 2`)
	require.NoError(t, os.WriteFile(caPath+".new", append(append([]byte{}, serverCA.PEM...), serverCA2.PEM...), 0o600))
	require.NoError(t, os.Rename(caPath+".new", caPath))
	require.NoError(t, handshake(srv.addr, conf))
	assert.NotContains(t, logs.String(), "PRIVATE KEY")
}

func TestServerVerification(t *testing.T) {
	dir := t.TempDir()
	serverCA := certtest.NewCA(t, "server CA")
	other := certtest.NewCA(t, "some other CA")
	srv := startTLSServer(t, serverConfig(t, serverCA.Issue(t, certtest.Options{CommonName: "frontend", DNSNames: []string{"frontend.internal"}}), nil))
	right, wrong := serverCA.WriteCA(t, dir, "right"), other.WriteCA(t, dir, "wrong")

	// A wrong CA is refused, naming the variable, the flag or the profile key.
	conf, err := clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": wrong, "TEMPORAL_TLS_SERVER_NAME": "frontend.internal"}, Overrides{}, nil)
	require.NoError(t, err)
	err = handshake(srv.addr, conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not signed by TEMPORAL_TLS_SERVER_CA_CERT_PATH ("+wrong+")")
	conf, err = clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_NAME": "frontend.internal"}, Overrides{TLSCAData: string(other.PEM)}, nil)
	require.NoError(t, err)
	assert.ErrorContains(t, handshake(srv.addr, conf), "is not signed by --tls-ca-data")
	conf, err = clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_NAME": "frontend.internal", "TEMPORAL_TLS": "true"}, Overrides{}, nil)
	require.NoError(t, err)
	assert.ErrorContains(t, handshake(srv.addr, conf), "is not signed by the system's trusted CAs (set TEMPORAL_TLS_SERVER_CA_CERT_PATH")

	// The right CA but a name the certificate does not hold.
	conf, err = clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": right}, Overrides{}, nil)
	require.NoError(t, err)
	err = handshake(srv.addr, conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `not valid for "127.0.0.1" (from TEMPORAL_ADDRESS)`)
	assert.Contains(t, err.Error(), "set TEMPORAL_TLS_SERVER_NAME")

	conf, err = clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": right, "TEMPORAL_TLS_SERVER_NAME": "frontend.internal"}, Overrides{}, nil)
	require.NoError(t, err)
	require.NoError(t, handshake(srv.addr, conf))
	assert.Equal(t, "", srv.last(), "no client certificate configured, none sent")

	// An expired server certificate is refused.
	expired := startTLSServer(t, serverConfig(t, serverCA.Issue(t, certtest.Options{CommonName: "old", DNSNames: []string{"frontend.internal"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), nil))
	err = handshake(expired.addr, conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expired")

	// Disabled verification accepts anything (and says so).
	var logs bytes.Buffer
	conf, err = clientTLS(t, map[string]string{"TEMPORAL_ADDRESS": srv.addr, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true"}, Overrides{}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	require.NoError(t, handshake(srv.addr, conf))
	assert.Contains(t, logs.String(), "not verified (TEMPORAL_TLS_DISABLE_HOST_VERIFICATION)")
}

func TestBadTLSFilesNameTheirSetting(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	certPath, keyPath := ca.Issue(t, certtest.Options{CommonName: "c", Client: true}).Write(t, dir, "c")
	_, otherKey := ca.Issue(t, certtest.Options{CommonName: "d", Client: true}).Write(t, dir, "d")
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	for name, c := range map[string]struct {
		vars map[string]string
		want string
	}{
		"missing CA":        {map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": filepath.Join(dir, "none.pem")}, "TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot load the server CA"},
		"junk CA":           {map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": junk}, "TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot load the server CA: holds no PEM certificate"},
		"junk CA data":      {map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_DATA": "junk"}, "TEMPORAL_TLS_SERVER_CA_CERT_DATA: holds no PEM certificate"},
		"missing cert":      {map[string]string{"TEMPORAL_TLS_CLIENT_CERT_PATH": filepath.Join(dir, "none.pem"), "TEMPORAL_TLS_CLIENT_KEY_PATH": keyPath}, "TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH: cannot load"},
		"mismatched key":    {map[string]string{"TEMPORAL_TLS_CLIENT_CERT_PATH": certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH": otherKey}, "TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH: cannot load"},
		"junk data":         {map[string]string{"TEMPORAL_TLS_CLIENT_CERT_DATA": "x", "TEMPORAL_TLS_CLIENT_KEY_DATA": "y"}, "TEMPORAL_TLS_CLIENT_CERT_DATA / TEMPORAL_TLS_CLIENT_KEY_DATA: not a PEM certificate"},
		"no name from addr": {map[string]string{"TEMPORAL_ADDRESS": "dns:///no-port", "TEMPORAL_TLS": "1"}, "TEMPORAL_ADDRESS: cannot tell the TLS server name"},
	} {
		vars := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:7233"}
		for k, v := range c.vars {
			vars[k] = v
		}
		_, err := clientTLS(t, vars, Overrides{}, nil)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
		assert.NotContains(t, err.Error(), "BEGIN", name)
		var le *LoadError
		assert.ErrorAs(t, err, &le, name)
	}
}

// TestAddressWithoutPort: a bare host would be dialed on port 443 (gRPC's
// default), far from any frontend; it is refused before dialing, naming
// where it came from.
func TestAddressWithoutPort(t *testing.T) {
	for _, a := range []string{"localhost", "127.0.0.1", "host:", "[::1]"} {
		_, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": a}), Overrides{})
		var le *LoadError
		require.ErrorAs(t, err, &le, a)
		assert.Equal(t, "TEMPORAL_ADDRESS", le.Source, a)
		assert.Contains(t, err.Error(), "want host:port, such as 127.0.0.1:7233", a)
	}
	_, err := Load(env(nil), Overrides{Address: "localhost"})
	assert.ErrorContains(t, err, "--address: address \"localhost\"")
	for _, a := range []string{"localhost:7233", "[::1]:7233", "ns.acct.tmprl.cloud:7233", "dns:///frontend:7233"} {
		_, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": a}), Overrides{})
		assert.NoError(t, err, a)
	}
}

func TestDialHints(t *testing.T) {
	s, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": "h:1", "TEMPORAL_TLS": "1"}), Overrides{})
	require.NoError(t, err)
	hint := func(s *Settings, msg string) string {
		var de *DialError
		require.ErrorAs(t, s.explain(fmt.Errorf("%s", msg)), &de)
		return de.Hint
	}
	assert.Contains(t, hint(s, "remote error: tls: certificate required"), "requires a client certificate (mutual TLS): set TEMPORAL_TLS_CLIENT_CERT_PATH")
	assert.Contains(t, hint(s, "tls: first record does not look like a TLS handshake"), "does not speak TLS")
	withCert, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": "h:1", "TEMPORAL_TLS_CLIENT_CERT_PATH": "/c", "TEMPORAL_TLS_CLIENT_KEY_PATH": "/k"}), Overrides{})
	require.NoError(t, err)
	assert.Contains(t, hint(withCert, "remote error: tls: unknown certificate authority"), "refused the client certificate from TEMPORAL_TLS_CLIENT_CERT_PATH")
	plain, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": "h:1"}), Overrides{})
	require.NoError(t, err)
	assert.Contains(t, hint(plain, "error reading server preface: EOF"), "set TEMPORAL_TLS=true")
	assert.Equal(t, "", hint(plain, "connection refused"))
	assert.True(t, strings.HasPrefix(plain.explain(fmt.Errorf("x")).Error(), "Temporal at h:1: x"))
}

// A loopback server (the embedded dev server) is spoken to without gzip;
// any other keeps the SDK's default (gzip).
func TestLoopbackConnectionsAreNotCompressed(t *testing.T) {
	for addr, none := range map[string]bool{
		"127.0.0.1:7233": true, "localhost:7233": true, "[::1]:7233": true, "127.8.9.10:1": true,
		"temporal.example.com:7233": false, "10.0.0.1:7233": false, "[2001:db8::1]:7233": false,
	} {
		s, err := Load(env(map[string]string{"TEMPORAL_ADDRESS": addr, "TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "none.toml")}), Overrides{})
		require.NoError(t, err, addr)
		opts, err := s.ClientOptions(nil)
		require.NoError(t, err, addr)
		_, isNone := opts.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone)
		assert.Equal(t, none, isNone, addr)
		if !none {
			assert.Nil(t, opts.ConnectionOptions.GrpcCompression, addr)
		}
	}
}
