package hostworker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func networkConfig(t *testing.T, env map[string]string) (Config, error) {
	t.Helper()
	if _, ok := env["SANDBOX_DATA_DIR"]; !ok {
		env["SANDBOX_DATA_DIR"] = t.TempDir()
	}
	return ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func TestNetworkConfig(t *testing.T) {
	c, err := networkConfig(t, map[string]string{})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.NetworkLimited, c.RuntimeNetwork)
	assert.Equal(t, sandboxapi.NetworkLimited, c.NetworkMax, "the default maximum is limited")
	assert.Equal(t, egress.DefaultAllow, c.NetworkAllow, "the package registries by default")

	c, err = networkConfig(t, map[string]string{"SANDBOX_RUNTIME_NETWORK": "default"})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.NetworkDefault, c.NetworkMax, "the maximum follows a wider default")

	c, err = networkConfig(t, map[string]string{"SANDBOX_RUNTIME_NETWORK": "none", "SANDBOX_NETWORK_MAX": "default",
		"SANDBOX_NETWORK_ALLOW": " Registry.Corp.Example:4873, 10.0.0.0/8\n*.mirror.example ,10.0.0.0/8"})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.NetworkNone, c.RuntimeNetwork)
	assert.Equal(t, sandboxapi.NetworkDefault, c.NetworkMax)
	assert.Equal(t, []string{"registry.corp.example:4873", "10.0.0.0/8", "*.mirror.example"}, c.NetworkAllow)

	c, err = networkConfig(t, map[string]string{"SANDBOX_NETWORK_ALLOW": ""})
	require.NoError(t, err)
	assert.Empty(t, c.NetworkAllow, "set and empty: no entries of the worker's own")

	for name, env := range map[string]map[string]string{
		"SANDBOX_RUNTIME_NETWORK": {"SANDBOX_RUNTIME_NETWORK": "open"},
		"SANDBOX_NETWORK_MAX":     {"SANDBOX_NETWORK_MAX": "all"},
		"SANDBOX_NETWORK_ALLOW":   {"SANDBOX_NETWORK_ALLOW": "ok.example, http://bad.example/"},
	} {
		_, err := networkConfig(t, env)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), name)
		assert.Equal(t, name, ce.Variable)
	}
	_, err = networkConfig(t, map[string]string{"SANDBOX_RUNTIME_NETWORK": "default", "SANDBOX_NETWORK_MAX": "limited"})
	var ce *ConfigError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "SANDBOX_RUNTIME_NETWORK", ce.Variable)
	assert.Contains(t, ce.Reason, "above SANDBOX_NETWORK_MAX=limited")
}
