package hostworker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/credentials"
)

func authEnv(t *testing.T, vars map[string]string) (Config, error) {
	t.Helper()
	base := map[string]string{"SANDBOX_DATA_DIR": t.TempDir(), "SANDBOX_HOST_ID": "h1", "SANDBOX_RUNTIME_PROVIDER": "local"}
	for k, v := range vars {
		base[k] = v
	}
	return ConfigFromEnv(func(k string) (string, bool) { v, ok := base[k]; return v, ok })
}

func TestAuthConfigFromEnv(t *testing.T) {
	c, err := authEnv(t, nil)
	require.NoError(t, err)
	assert.Equal(t, AuthConfig{AccessTTL: credentials.DefaultAccessTTL}, c.Auth)

	dir := t.TempDir()
	key := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(key, []byte("x"), 0o600))
	c, err = authEnv(t, map[string]string{
		"SANDBOX_GIT_CREDENTIALS_DIR": dir, "SANDBOX_GITHUB_API_URL": "https://ghe.example.com",
		"SANDBOX_GITHUB_APP_ID": "12", "SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE": key, "SANDBOX_ACCESS_CHECK_TTL": "0",
	})
	require.NoError(t, err)
	assert.Equal(t, dir, c.Auth.CredentialsDir)
	assert.Equal(t, "https://ghe.example.com/api/v3/", c.Auth.GitHubAPIURL)
	assert.Equal(t, int64(12), c.Auth.GitHubAppID)
	assert.Negative(t, c.Auth.AccessTTL, "0 = check every acquire")
	assert.Equal(t, []string{dir, key}, c.Auth.secretPaths())

	for name, vars := range map[string]map[string]string{
		"SANDBOX_GIT_CREDENTIALS_DIR":         {"SANDBOX_GIT_CREDENTIALS_DIR": filepath.Join(dir, "missing")},
		"SANDBOX_GITHUB_API_URL":              {"SANDBOX_GITHUB_API_URL": "http://127.0.0.1:9/api/v3"},
		"SANDBOX_GITHUB_HOST":                 {"SANDBOX_GITHUB_HOST": "bad host"},
		"SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE": {"SANDBOX_GITHUB_APP_ID": "12"},
		"SANDBOX_GITHUB_APP_ID":               {"SANDBOX_GITHUB_APP_INSTALLATION_ID": "3"},
		"SANDBOX_ACCESS_CHECK_TTL":            {"SANDBOX_ACCESS_CHECK_TTL": "soon"},
	} {
		_, err := authEnv(t, vars)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, name, ce.Variable)
	}
	c, err = authEnv(t, map[string]string{"SANDBOX_GITHUB_API_URL": "http://127.0.0.1:9", "SANDBOX_ALLOW_HTTP_URLS": "1"})
	require.NoError(t, err, "plain http only for test servers")
	assert.Equal(t, "http://127.0.0.1:9/api/v3/", c.Auth.GitHubAPIURL)

	c.Auth.GitHubAppID, c.Auth.GitHubAppKeyFile = 1, key
	_, err = buildAuth(c, nil, nil)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "an unparsable App key stops the worker: %v", err)
	assert.Equal(t, "SANDBOX_GITHUB_APP_PRIVATE_KEY_FILE", ce.Variable)
}
