// Package certtest is test support for TLS: it makes certificate authorities
// and the server and client certificates they sign with crypto/x509 (ECDSA
// P-256), in memory or written to PEM files. It is imported by tests only;
// every helper fails the test (t.Fatalf) on error.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority with its key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate in PEM form.
	PEM []byte
}

// NewCA makes a self-signed CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"sandboxcore tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("certtest: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certtest: parse CA: %v", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf is an issued certificate and its key, in PEM form.
type Leaf struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// TLS returns the leaf as a tls.Certificate.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatalf("certtest: key pair: %v", err)
	}
	return c
}

// Options shape an issued certificate.
type Options struct {
	// CommonName of the subject.
	CommonName string
	// DNSNames and IPs are the subject alternative names; a server
	// certificate with none gets 127.0.0.1 and localhost.
	DNSNames []string
	IPs      []net.IP
	// Client adds the client-authentication usage; Server (the default when
	// neither is set) the server-authentication usage.
	Client, Server bool
	// NotAfter defaults to a day from now; NotBefore to an hour ago.
	NotBefore, NotAfter time.Time
}

// Issue signs a new certificate with a fresh key.
func (ca *CA) Issue(t testing.TB, o Options) Leaf {
	t.Helper()
	if !o.Client && !o.Server {
		o.Server = true
	}
	if o.Server && len(o.DNSNames) == 0 && len(o.IPs) == 0 {
		o.DNSNames, o.IPs = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	var usage []x509.ExtKeyUsage
	if o.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("certtest: issue %q: %v", o.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certtest: parse: %v", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("certtest: marshal key: %v", err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		Cert:    cert,
	}
}

// Pool returns a pool holding the CA only.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA certificate to dir/name.pem and returns the path.
func (ca *CA) WriteCA(t testing.TB, dir, name string) string {
	t.Helper()
	return write(t, filepath.Join(dir, name+".pem"), ca.PEM)
}

// Write writes the leaf to dir/name.pem and dir/name-key.pem (0600) and
// returns both paths.
func (l Leaf) Write(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	return write(t, filepath.Join(dir, name+".pem"), l.CertPEM), write(t, filepath.Join(dir, name+"-key.pem"), l.KeyPEM)
}

// Replace overwrites the files Write wrote with l, the way a certificate
// manager rotates them (a new file renamed over the old one).
func (l Leaf) Replace(t testing.TB, certPath, keyPath string) {
	t.Helper()
	for path, b := range map[string][]byte{keyPath: l.KeyPEM, certPath: l.CertPEM} {
		tmp := path + ".new"
		write(t, tmp, b)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatalf("certtest: %v", err)
		}
	}
}

func write(t testing.TB, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("certtest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certtest: key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("certtest: serial: %v", err)
	}
	return n
}
