package hostworker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsAddrFromEnv(t *testing.T) {
	cfg, err := authEnv(t, nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.MetricsAddr, "unset: no metrics")
	for _, ok := range []string{":9464", "127.0.0.1:9464", "[::1]:0", "0.0.0.0:0"} {
		cfg, err := authEnv(t, map[string]string{"SANDBOX_METRICS_ADDR": ok})
		require.NoError(t, err, ok)
		assert.Equal(t, ok, cfg.MetricsAddr)
	}
	for _, bad := range []string{"9464", "host:", "host:http", ":70000", "a:b:c"} {
		_, err := authEnv(t, map[string]string{"SANDBOX_METRICS_ADDR": bad})
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%q: %v", bad, err)
		assert.Equal(t, "SANDBOX_METRICS_ADDR", ce.Variable)
	}
}
