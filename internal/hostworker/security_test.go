package hostworker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/certtest"
)

func securityEnv(t *testing.T, vars map[string]string) (Config, error) {
	t.Helper()
	base := map[string]string{"TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "none.toml")}
	for k, v := range vars {
		base[k] = v
	}
	return authEnv(t, base)
}

func keyFile(t *testing.T, dir, name string) (path string, secret []byte) {
	t.Helper()
	secret = make([]byte, 32)
	_, _ = rand.Read(secret)
	path = filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(secret)), 0o600))
	return path, secret
}

func TestSecurityConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	cert, key := ca.Issue(t, certtest.Options{CommonName: "frontend"}).Write(t, dir, "server")
	caFile := ca.WriteCA(t, dir, "ca")
	k1, secret := keyFile(t, dir, "k1")
	k0, _ := keyFile(t, dir, "k0")

	c, err := securityEnv(t, nil)
	require.NoError(t, err)
	assert.Equal(t, "", c.TemporalAddress, "nothing set: the embedded server")
	assert.Equal(t, "default", c.Namespace)
	assert.Nil(t, c.Security.DevTLS)
	assert.Nil(t, c.Security.Payloads)
	assert.Equal(t, DefaultCodecPort, c.Security.CodecPort)

	c, err = securityEnv(t, map[string]string{
		"SANDBOX_TEMPORAL_TLS_CERT": cert, "SANDBOX_TEMPORAL_TLS_KEY": key, "SANDBOX_TEMPORAL_TLS_CLIENT_CA": caFile,
		"SANDBOX_PAYLOAD_KEYS": "new=" + k1 + ",old=" + k0, "SANDBOX_CODEC_TOKEN": strings.Repeat("t", 40), "SANDBOX_CODEC_PORT": "0",
	})
	require.NoError(t, err)
	require.NotNil(t, c.Security.DevTLS)
	assert.Equal(t, caFile, c.Security.DevTLS.ClientCAFile)
	assert.Equal(t, []string{"new", "old"}, c.Security.Payloads.KeyIDs())
	assert.Equal(t, 0, c.Security.CodecPort)
	assert.Equal(t, "SANDBOX_CODEC_TOKEN", c.Security.CodecTokenSource)
	assert.False(t, c.Security.RequirePayloadEncryption, "plaintext payloads are read unless asked (no flag day)")
	assert.Same(t, c.Security.Payloads, c.Security.WorkerCodec())

	// SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION=1: the worker's codec refuses
	// plaintext; the one the codec server gets (Payloads) does not.
	for v, want := range map[string]bool{"1": true, "true": true, "0": false, "": false} {
		c, err = securityEnv(t, map[string]string{"SANDBOX_PAYLOAD_KEYS": "new=" + k1, EnvRequirePayloadEncryption: v})
		require.NoError(t, err, v)
		assert.Equal(t, want, c.Security.RequirePayloadEncryption, v)
		assert.Equal(t, want, c.Security.WorkerCodec().Options().RequireEncryption, v)
		assert.False(t, c.Security.Payloads.Options().RequireEncryption, v)
	}
	c, err = securityEnv(t, map[string]string{EnvRequirePayloadEncryption: "0"})
	require.NoError(t, err, "off without keys is no error")
	assert.Nil(t, c.Security.WorkerCodec())
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		out := fmt.Sprintf(verb, c)
		assert.NotContains(t, out, strings.Repeat("t", 40), "the codec token is never printed")
		assert.NotContains(t, out, base64.StdEncoding.EncodeToString(secret))
		assert.NotContains(t, out, fmt.Sprint(secret[:4]))
	}

	// A profile names the server: no embedded server, its namespace.
	profile := filepath.Join(dir, "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte("[profile.prod]\naddress = \"temporal.example.com:7233\"\nnamespace = \"tenant-a\"\napi_key = \"secret-api-key\"\n"), 0o600))
	c, err = securityEnv(t, map[string]string{"TEMPORAL_CONFIG_FILE": profile, "TEMPORAL_PROFILE": "prod"})
	require.NoError(t, err)
	assert.Equal(t, "temporal.example.com:7233", c.TemporalAddress)
	assert.Equal(t, "tenant-a", c.Namespace)
	assert.True(t, c.Security.Temporal.TLSEnabled(), "an API key implies TLS")
	assert.False(t, c.SessionOnHostQueue, "a remote Temporal: sessions stay on the shared queue")
	assert.NotContains(t, fmt.Sprintf("%+v", c), "secret-api-key")

	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("junk"), 0o600))
	for name, c := range map[string]struct {
		vars     map[string]string
		variable string
		reason   string
	}{
		"client CA alone":          {map[string]string{"SANDBOX_TEMPORAL_TLS_CLIENT_CA": caFile}, "SANDBOX_TEMPORAL_TLS_CLIENT_CA", "needs SANDBOX_TEMPORAL_TLS_CERT"},
		"cert without key":         {map[string]string{"SANDBOX_TEMPORAL_TLS_CERT": cert}, "SANDBOX_TEMPORAL_TLS_KEY", "required"},
		"key without cert":         {map[string]string{"SANDBOX_TEMPORAL_TLS_KEY": key}, "SANDBOX_TEMPORAL_TLS_CERT", "required"},
		"junk certificate":         {map[string]string{"SANDBOX_TEMPORAL_TLS_CERT": junk, "SANDBOX_TEMPORAL_TLS_KEY": key}, "SANDBOX_TEMPORAL_TLS_CERT", "not a PEM certificate"},
		"junk client CA":           {map[string]string{"SANDBOX_TEMPORAL_TLS_CERT": cert, "SANDBOX_TEMPORAL_TLS_KEY": key, "SANDBOX_TEMPORAL_TLS_CLIENT_CA": junk}, "SANDBOX_TEMPORAL_TLS_CLIENT_CA", "holds no PEM certificate"},
		"embedded TLS, remote":     {map[string]string{"SANDBOX_TEMPORAL_TLS_CERT": cert, "SANDBOX_TEMPORAL_TLS_KEY": key, "TEMPORAL_ADDRESS": "h:1"}, "SANDBOX_TEMPORAL_TLS_CERT", "embedded server"},
		"embedded TLS, tls off":    {map[string]string{"SANDBOX_TEMPORAL_TLS_CERT": cert, "SANDBOX_TEMPORAL_TLS_KEY": key, "TEMPORAL_TLS": "false"}, "TEMPORAL_TLS", "cannot disable"},
		"TLS to a plain embedded":  {map[string]string{"TEMPORAL_TLS": "true"}, "TEMPORAL_TLS", "embedded server runs without TLS"},
		"API key, plain embedded":  {map[string]string{"TEMPORAL_API_KEY": "k"}, "TEMPORAL_TLS", "embedded server runs without TLS"},
		"missing client cert file": {map[string]string{"TEMPORAL_ADDRESS": "h:1", "TEMPORAL_TLS_CLIENT_KEY_PATH": key}, "TEMPORAL_TLS_CLIENT_KEY_PATH", "needs its certificate"},
		"unknown profile":          {map[string]string{"TEMPORAL_CONFIG_FILE": profile, "TEMPORAL_PROFILE": "nope"}, "TEMPORAL_PROFILE/--profile nope", "nope"},
		"bad payload keys":         {map[string]string{"SANDBOX_PAYLOAD_KEYS": "k1=" + junk}, "SANDBOX_PAYLOAD_KEYS", `entry "k1=` + junk + `": key file holds 4 bytes`},
		"repeated key id":          {map[string]string{"SANDBOX_PAYLOAD_KEYS": "a=" + k1 + ",a=" + k0}, "SANDBOX_PAYLOAD_KEYS", "appears twice"},
		"require, bad value":       {map[string]string{"SANDBOX_PAYLOAD_KEYS": "k1=" + k1, EnvRequirePayloadEncryption: "yes"}, EnvRequirePayloadEncryption, "want 1 or 0"},
		"require without keys":     {map[string]string{EnvRequirePayloadEncryption: "1"}, EnvRequirePayloadEncryption, "needs SANDBOX_PAYLOAD_KEYS"},
		"bad codec port":           {map[string]string{"SANDBOX_CODEC_PORT": "http"}, "SANDBOX_CODEC_PORT", "TCP port"},
		"short codec token":        {map[string]string{"SANDBOX_CODEC_TOKEN": "short"}, "SANDBOX_CODEC_TOKEN", "at least 32 bytes"},
		"missing codec token file": {map[string]string{"SANDBOX_CODEC_TOKEN_FILE": filepath.Join(dir, "none")}, "SANDBOX_CODEC_TOKEN_FILE", "no such file"},
	} {
		_, err := securityEnv(t, c.vars)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, c.variable, ce.Variable, name)
		assert.Contains(t, ce.Reason, c.reason, name)
		assert.NotContains(t, err.Error(), "BEGIN", name)
		assert.NotContains(t, err.Error(), "short", "%s: a token is never echoed", name)
	}
}
