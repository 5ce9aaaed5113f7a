package hostworker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2BConfig: SANDBOX_RUNTIME_PROVIDER=e2b is validated at start, each
// error naming its variable, and the key is never echoed.
func TestE2BConfig(t *testing.T) {
	const key = "e2b_0123456789abcdef0123456789abcdef01234567"
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte(key+"\n"), 0o600))
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{"SANDBOX_DATA_DIR": t.TempDir(), "SANDBOX_RUNTIME_PROVIDER": "e2b"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c, err := ConfigFromEnv(env("E2B_API_KEY", key))
	require.NoError(t, err)
	assert.Equal(t, "https://api.e2b.app", c.E2B.APIURL)
	assert.Equal(t, "base", c.E2B.Template)
	assert.Equal(t, 15*time.Minute, c.E2B.Timeout)
	assert.Equal(t, time.Hour, c.E2B.MaxInstanceLength, "E2B's default tier")
	assert.Equal(t, key, c.E2B.APIKey)
	assert.NotContains(t, fmt.Sprintf("%v %+v %#v", c.E2B, c, c.E2B), key, "the key is never printed")

	c, err = ConfigFromEnv(env("E2B_API_KEY_FILE", keyFile, "E2B_SANDBOX_TIMEOUT", "600", "E2B_TEMPLATE", "my-team/agent:v2",
		"E2B_API_URL", "http://127.0.0.1:4100"))
	require.NoError(t, err)
	assert.Equal(t, key, c.E2B.APIKey)
	assert.Equal(t, 10*time.Minute, c.E2B.Timeout)
	assert.Equal(t, "my-team/agent:v2", c.E2B.Template)

	c, err = ConfigFromEnv(env("E2B_API_KEY", key, "E2B_MAX_INSTANCE_LENGTH", "24", "E2B_SANDBOX_TIMEOUT", "2h"))
	require.NoError(t, err, "a Pro team")
	assert.Equal(t, 24*time.Hour, c.E2B.MaxInstanceLength)
	assert.Equal(t, 2*time.Hour, c.E2B.Timeout)

	for name, c := range map[string]struct {
		env  []string
		want string
	}{
		"no key":        {nil, "E2B_API_KEY"},
		"both keys":     {[]string{"E2B_API_KEY", key, "E2B_API_KEY_FILE", keyFile}, "E2B_API_KEY_FILE"},
		"missing file":  {[]string{"E2B_API_KEY_FILE", keyFile + ".missing"}, "E2B_API_KEY_FILE"},
		"bad timeout":   {[]string{"E2B_API_KEY", key, "E2B_SANDBOX_TIMEOUT", "90000000"}, "E2B_SANDBOX_TIMEOUT"},
		"past the cap":  {[]string{"E2B_API_KEY", key, "E2B_SANDBOX_TIMEOUT", "2h"}, "E2B_SANDBOX_TIMEOUT"},
		"part hours":    {[]string{"E2B_API_KEY", key, "E2B_MAX_INSTANCE_LENGTH", "90m"}, "E2B_MAX_INSTANCE_LENGTH"},
		"over a day":    {[]string{"E2B_API_KEY", key, "E2B_MAX_INSTANCE_LENGTH", "48h"}, "E2B_MAX_INSTANCE_LENGTH"},
		"fractional":    {[]string{"E2B_API_KEY", key, "E2B_SANDBOX_TIMEOUT", "1.5s"}, "E2B_SANDBOX_TIMEOUT"},
		"bad URL":       {[]string{"E2B_API_KEY", key, "E2B_API_URL", "ftp://x"}, "E2B_API_URL"},
		"URL with user": {[]string{"E2B_API_KEY", key, "E2B_API_URL", "https://u:p@api.e2b.app"}, "E2B_API_URL"},
		"bad template":  {[]string{"E2B_API_KEY", key, "E2B_TEMPLATE", "-x y"}, "E2B_TEMPLATE"},
		"key with a NL": {[]string{"E2B_API_KEY", key + "\nX-Evil: 1"}, "E2B_API_KEY"},
	} {
		_, err := ConfigFromEnv(env(c.env...))
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, c.want, ce.Variable, name)
		assert.NotContains(t, err.Error(), key, name)
	}
}
