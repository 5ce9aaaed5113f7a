package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// ClientOptions builds the SDK client options of these settings: address,
// namespace, API key (sent as a bearer token; TLS implied), gRPC metadata,
// authority, and TLS whose client certificate and server CA are re-read
// whenever their files change (checked at each TLS handshake, so a rotated
// certificate is used from the next connection on). log receives warnings
// (a rotated file that does not load, disabled verification); nil discards
// them. Logger, DataConverter and FailureConverter are left to the caller.
// Errors: *LoadError naming the setting (an unreadable or malformed
// certificate, key or CA; an address the server name cannot be taken from).
func (s *Settings) ClientOptions(log *slog.Logger) (client.Options, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// envconfig builds the options (address, namespace, API key, gRPC
	// metadata, authority); the TLS configuration is built below, one that
	// follows certificate rotation and names the settings in its errors.
	base := s.profile
	base.TLS = nil
	opts, err := base.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, &LoadError{"Temporal client settings", err.Error()}
	}
	opts.ConnectionOptions.TLS = nil
	if isLoopback(s.profile.Address) {
		// gzip only costs CPU on a loopback connection (the embedded dev
		// server): ≈ 7 % of a session operation's CPU (docs/BENCHMARKS.md).
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if !s.TLSEnabled() {
		opts.ConnectionOptions.TLSDisabled = s.TLSExplicitlyDisabled()
		if s.profile.APIKey != "" {
			log.Warn("a Temporal API key is sent without TLS (" + s.source(sTLS) + " disables it): anyone on the network path can read it")
		}
		return opts, nil
	}
	opts.ConnectionOptions.TLSDisabled = false
	tc, err := s.tlsConfig(log)
	if err != nil {
		return client.Options{}, err
	}
	opts.ConnectionOptions.TLS = tc
	return opts, nil
}

// isLoopback reports whether a host:port address names this machine
// (localhost or a loopback IP).
func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverName is the name the server's certificate must hold: the configured
// server name, else the authority's host, else the address's host.
func (s *Settings) serverName() (string, string, error) {
	t := s.profile.TLS
	if t != nil && t.ServerName != "" {
		return t.ServerName, s.source(sServerName), nil
	}
	if a := s.profile.Authority; a != "" {
		if h, _, err := net.SplitHostPort(a); err == nil {
			return h, s.source(sAuthority), nil
		}
		return a, s.source(sAuthority), nil
	}
	addr := s.profile.Address
	if i := strings.Index(addr, ":///"); i >= 0 {
		addr = addr[i+4:]
	}
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return "", "", &LoadError{s.source(sAddress), fmt.Sprintf("cannot tell the TLS server name from the address %q: set %s", s.profile.Address, sServerName.env)}
	}
	return h, s.source(sAddress), nil
}

func (s *Settings) tlsConfig(log *slog.Logger) (*tls.Config, error) {
	t := s.profile.TLS
	if t == nil {
		t = &envconfig.ClientConfigTLS{}
	}
	name, nameSource, err := s.serverName()
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}

	switch {
	case len(t.ClientCertData) > 0:
		cert, err := tls.X509KeyPair(t.ClientCertData, t.ClientKeyData)
		if err != nil {
			return nil, &LoadError{s.certSource() + " / " + s.keySource(), "not a PEM certificate and its matching key: " + err.Error()}
		}
		conf.Certificates = []tls.Certificate{cert}
	case t.ClientCertPath != "":
		kp, err := NewKeyPairFile(t.ClientCertPath, t.ClientKeyPath, s.certSource()+" / "+s.keySource(), log)
		if err != nil {
			return nil, err
		}
		conf.GetClientCertificate = kp.GetClientCertificate
	}

	if t.DisableHostVerification {
		log.Warn("the Temporal server's certificate is not verified (" + s.source(sNoVerify) + "): anyone on the network path can impersonate it")
		conf.InsecureSkipVerify = true
		return conf, nil
	}
	v := &verifier{name: name, nameSource: nameSource}
	switch {
	case len(t.ServerCACertData) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.ServerCACertData) {
			return nil, &LoadError{s.caSource(), "holds no PEM certificate"}
		}
		v.static, v.caSource = pool, s.caSource()
	case t.ServerCACertPath != "":
		v.file = &caFile{path: t.ServerCACertPath, source: s.caSource(), log: log}
		if _, err := v.file.load(); err != nil {
			return nil, err
		}
		v.caSource = s.caSource() + " (" + t.ServerCACertPath + ")"
	default:
		v.caSource = "the system's trusted CAs (set " + sCAPath.env + " for a private CA)"
	}
	// Verification is done by VerifyConnection against the CA as it is now
	// (crypto/tls would verify against a pool fixed at start); it follows the
	// standard checks (chain, validity, server-auth usage, host name) as
	// crypto/tls documents for Config.VerifyConnection.
	conf.InsecureSkipVerify = true
	conf.VerifyConnection = v.verify
	return conf, nil
}

// stamp identifies a file's version: a rename over it changes the inode, a
// write its size or modification time.
type stamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// KeyPairFile is a certificate and key read from PEM files and read again
// whenever either file changes (a rename over it, or a write), checked at
// each use. A changed pair that does not load (the key written before its
// certificate) keeps the previous one, with a warning, until it does.
type KeyPairFile struct {
	certPath, keyPath, source string
	log                       *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certSt   stamp
	keySt    stamp
	reported string
}

func (k *KeyPairFile) load() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, cerr := stampOf(k.certPath)
	ks, kerr := stampOf(k.keyPath)
	if cerr == nil && kerr == nil && k.cert != nil && cs == k.certSt && ks == k.keySt {
		return k.cert, nil
	}
	err := errors.Join(cerr, kerr)
	var cert tls.Certificate
	if err == nil {
		cert, err = tls.LoadX509KeyPair(k.certPath, k.keyPath)
	}
	if err != nil {
		if k.cert == nil {
			return nil, &LoadError{k.source, "cannot load the certificate and key: " + err.Error()}
		}
		if msg := err.Error(); msg != k.reported {
			k.reported = msg
			k.log.Warn("a rotated certificate does not load yet; still using the previous one",
				"source", k.source, "error", msg)
		}
		return k.cert, nil
	}
	if k.cert != nil {
		k.log.Info("certificate reloaded", "source", k.source)
	}
	k.cert, k.certSt, k.keySt, k.reported = &cert, cs, ks, ""
	return k.cert, nil
}

// NewKeyPairFile loads the pair once; source names the settings the paths
// came from, for messages; log receives reload warnings (nil discards).
// Errors: *LoadError naming source.
func NewKeyPairFile(certPath, keyPath, source string, log *slog.Logger) (*KeyPairFile, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &KeyPairFile{certPath: certPath, keyPath: keyPath, source: source, log: log}
	if _, err := k.load(); err != nil {
		return nil, err
	}
	return k, nil
}

// GetClientCertificate is the tls.Config callback of a client.
func (k *KeyPairFile) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.load()
}

// GetCertificate is the tls.Config callback of a server.
func (k *KeyPairFile) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.load()
}

// caFile is a CA bundle read from a file and read again when it changes.
type caFile struct {
	path, source string
	log          *slog.Logger

	mu       sync.Mutex
	pool     *x509.CertPool
	st       stamp
	reported string
}

func (c *caFile) load() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := stampOf(c.path)
	if err == nil && c.pool != nil && st == c.st {
		return c.pool, nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(c.path)
	}
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(b) {
		err = errors.New("holds no PEM certificate")
	}
	if err != nil {
		if c.pool == nil {
			return nil, &LoadError{c.source, "cannot load the server CA: " + err.Error()}
		}
		if msg := err.Error(); msg != c.reported {
			c.reported = msg
			c.log.Warn("the rotated Temporal server CA does not load; still using the previous one", "source", c.source, "error", msg)
		}
		return c.pool, nil
	}
	if c.pool != nil {
		c.log.Info("Temporal server CA reloaded", "source", c.source)
	}
	c.pool, c.st, c.reported = pool, st, ""
	return pool, nil
}

// verifier checks the server's certificate chain against the CA as it is at
// the handshake, and its name against the expected server name.
type verifier struct {
	name, nameSource string
	static           *x509.CertPool // CA data; nil with a file or the system roots
	file             *caFile
	caSource         string
}

func (v *verifier) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the Temporal server sent no certificate")
	}
	roots := v.static
	if v.file != nil {
		var err error
		if roots, err = v.file.load(); err != nil {
			return err
		}
	}
	opts := x509.VerifyOptions{DNSName: v.name, Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	if err == nil {
		return nil
	}
	var hn x509.HostnameError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &hn):
		return fmt.Errorf("the Temporal server's certificate is not valid for %q (from %s): %v; set %s to a name it holds", v.name, v.nameSource, err, sServerName.env)
	case errors.As(err, &ua):
		return fmt.Errorf("the Temporal server's certificate (%s) is not signed by %s: %v", describe(cs.PeerCertificates[0]), v.caSource, err)
	case errors.As(err, &ci):
		return fmt.Errorf("the Temporal server's certificate (%s) is not valid: %v", describe(cs.PeerCertificates[0]), err)
	}
	return fmt.Errorf("the Temporal server's certificate (%s) does not verify against %s: %v", describe(cs.PeerCertificates[0]), v.caSource, err)
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("subject %q, issuer %q", c.Subject.String(), c.Issuer.String())
}
