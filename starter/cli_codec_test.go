package main

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/certtest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestCodecToken(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	tok := strings.Repeat("k", 40)
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SANDBOX_CODEC_TOKEN_FILE", "")
	t.Setenv("SANDBOX_CODEC_TOKEN", "")
	if got, src, err := codecToken(p); err != nil || got != tok || src != "--token-file" {
		t.Errorf("--token-file: %q from %q, %v", got, src, err)
	}
	if _, _, err := codecToken(""); !sandboxapi.IsInvalidArgument(err) || !strings.Contains(err.Error(), "no token") {
		t.Errorf("no token: %v", err)
	}
	t.Setenv("SANDBOX_CODEC_TOKEN", tok)
	if got, src, err := codecToken(""); err != nil || got != tok || src != "SANDBOX_CODEC_TOKEN" {
		t.Errorf("SANDBOX_CODEC_TOKEN: %q from %q, %v", got, src, err)
	}
	t.Setenv("SANDBOX_CODEC_TOKEN", "short")
	if _, _, err := codecToken(""); !sandboxapi.IsInvalidArgument(err) {
		t.Errorf("short SANDBOX_CODEC_TOKEN: %v", err)
	}
}

func TestCodecTLS(t *testing.T) {
	c, _, _, _ := testCLI(false)
	for _, tc := range []struct {
		listen, cert, key string
		plain             bool
		ok                bool
	}{
		{"127.0.0.1:8234", "", "", false, true},
		{"localhost:8234", "", "", false, true},
		{"0.0.0.0:8234", "", "", true, true}, // --insecure-plain-http
		{"0.0.0.0:8234", "", "", false, false},
		{"example.com:8234", "", "", false, false},
		{"8234", "", "", false, false},
		{"127.0.0.1:8234", "cert.pem", "", false, false}, // cert without key
		{"127.0.0.1:8234", filepath.Join(t.TempDir(), "c.pem"), filepath.Join(t.TempDir(), "k.pem"), false, false}, // unreadable pair
	} {
		conf, err := c.codecTLS(tc.listen, tc.cert, tc.key, tc.plain)
		if tc.ok && (err != nil || conf != nil) {
			t.Errorf("%+v: %v, %v", tc, conf, err)
		}
		if !tc.ok && !sandboxapi.IsInvalidArgument(err) {
			t.Errorf("%+v: %v, want InvalidArgument", tc, err)
		}
	}
}

// TestCodecTLSServesTheCertificate: with a certificate pair, off loopback
// too, the configuration serves that certificate.
func TestCodecTLSServesTheCertificate(t *testing.T) {
	c, _, _, _ := testCLI(false)
	leaf := certtest.NewCA(t, "codec CA").Issue(t, certtest.Options{CommonName: "codec"})
	certPath, keyPath := leaf.Write(t, t.TempDir(), "codec")
	conf, err := c.codecTLS("0.0.0.0:8234", certPath, keyPath, false)
	if err != nil || conf == nil || conf.MinVersion != tls.VersionTLS12 {
		t.Fatalf("%v, %v", conf, err)
	}
	got, err := conf.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || !bytes.Equal(got.Certificate[0], leaf.TLS(t).Certificate[0]) {
		t.Errorf("served certificate: %v", err)
	}
}
