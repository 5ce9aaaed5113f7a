package devserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"time"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/server/common/config"
)

// TLS makes the embedded frontend speak TLS (docs/SECURITY.md "Connecting to
// Temporal").
type TLS struct {
	// CertFile and KeyFile are the frontend's certificate (PEM; with its
	// chain) and key (SANDBOX_TEMPORAL_TLS_CERT, SANDBOX_TEMPORAL_TLS_KEY),
	// re-read every RefreshInterval.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the frontend require a client certificate
	// signed by a CA in this PEM file (SANDBOX_TEMPORAL_TLS_CLIENT_CA).
	ClientCAFile string
}

// RefreshInterval is how often the server re-reads its TLS files.
const RefreshInterval = 30 * time.Second

// internalName is the TLS name of the server's own connections (services
// to each other, the system worker and the Web UI to the frontend); ".invalid"
// never resolves (RFC 6761), so it names nothing else.
const internalName = "internal.sandboxcore.invalid"

// TLSError names the variable of a TLS file that does not load.
type TLSError struct {
	Variable string // SANDBOX_TEMPORAL_TLS_CERT, _KEY or _CLIENT_CA
	Reason   string
}

// Error renders "VARIABLE: reason".
func (e *TLSError) Error() string { return e.Variable + ": " + e.Reason }

// Check verifies that the files load: a certificate matching its key, a
// client CA file holding PEM certificates. Errors: *TLSError.
func (t *TLS) Check() error {
	switch {
	case t.CertFile == "":
		return &TLSError{"SANDBOX_TEMPORAL_TLS_CERT", "required with SANDBOX_TEMPORAL_TLS_KEY"}
	case t.KeyFile == "":
		return &TLSError{"SANDBOX_TEMPORAL_TLS_KEY", "required with SANDBOX_TEMPORAL_TLS_CERT"}
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		return &TLSError{"SANDBOX_TEMPORAL_TLS_CERT", "with SANDBOX_TEMPORAL_TLS_KEY, not a PEM certificate and its key: " + err.Error()}
	}
	if t.ClientCAFile != "" {
		b, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return &TLSError{"SANDBOX_TEMPORAL_TLS_CLIENT_CA", err.Error()}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return &TLSError{"SANDBOX_TEMPORAL_TLS_CLIENT_CA", "holds no PEM certificate"}
		}
	}
	return nil
}

// internalPKI is an ephemeral CA made at each start, whose key lives only in
// this process, and the one certificate it signs: the server's services
// present it to each other (mutual TLS), and the system worker and the Web UI
// present it to the frontend, which answers them (by SNI internalName) with
// that certificate too. So turning TLS on leaves no plaintext or
// unauthenticated port behind, and the operator's client CA never has to sign
// anything for the server itself.
type internalPKI struct {
	caPEM, certPEM, keyPEM []byte
}

func newInternalPKI() (*internalPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "sandboxcore embedded Temporal internal CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
		PermittedDNSDomainsCritical: true, PermittedDNSDomains: []string{internalName},
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: internalName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: []string{internalName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &internalPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// serverTLS fills the server's TLS configuration: internode mutual TLS with
// the internal PKI; the frontend with the operator's certificate (and client
// CA), plus the internal certificate for SNI internalName; the system worker
// presenting the internal certificate.
func (p *internalPKI) serverTLS(t *TLS) config.RootTLS {
	internal := config.ServerTLS{CertData: b64(p.certPEM), KeyData: b64(p.keyPEM), ClientCAData: []string{b64(p.caPEM)}, RequireClientAuth: true}
	client := config.ClientTLS{ServerName: internalName, RootCAData: []string{b64(p.caPEM)}}
	front := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile}
	if t.ClientCAFile != "" {
		front.ClientCAFiles, front.RequireClientAuth = []string{t.ClientCAFile}, true
	}
	return config.RootTLS{
		Internode: config.GroupTLS{Server: internal, Client: client},
		Frontend: config.GroupTLS{Server: front,
			PerHostOverrides: map[string]config.ServerTLS{internalName: internal}},
		SystemWorker:    config.WorkerTLS{CertData: b64(p.certPEM), KeyData: b64(p.keyPEM), Client: client},
		RefreshInterval: RefreshInterval,
	}
}

// uiTLS is the Web UI's connection to the frontend: the internal certificate.
func (p *internalPKI) uiTLS() uiconfig.TLS {
	return uiconfig.TLS{CaData: b64(p.caPEM), CertData: b64(p.certPEM), KeyData: b64(p.keyPEM),
		ServerName: internalName, EnableHostVerification: true}
}
