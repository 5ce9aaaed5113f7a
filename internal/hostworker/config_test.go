package hostworker

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SANDBOX_PROCESS_MAX_IDLE: 2h by default, a duration, positive.
func TestProcessMaxIdleConfig(t *testing.T) {
	cfg, err := authEnv(t, nil)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.DefaultProcessMaxIdle, cfg.ProcessMaxIdle)
	cfg, err = authEnv(t, map[string]string{"SANDBOX_PROCESS_MAX_IDLE": "45m"})
	require.NoError(t, err)
	assert.Equal(t, 45*time.Minute, cfg.ProcessMaxIdle)
	for _, bad := range []string{"0", "soon", "-1h"} {
		_, err := authEnv(t, map[string]string{"SANDBOX_PROCESS_MAX_IDLE": bad})
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%q: %v", bad, err)
		assert.Equal(t, "SANDBOX_PROCESS_MAX_IDLE", ce.Variable)
	}
}

// SANDBOX_WORKFLOW_CACHE_SIZE: DefaultWorkflowCacheSize by default, a whole
// number from 1 to MaxWorkflowCacheSize.
func TestWorkflowCacheSizeConfig(t *testing.T) {
	cfg, err := authEnv(t, nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultWorkflowCacheSize, cfg.WorkflowCacheSize)
	cfg, err = authEnv(t, map[string]string{"SANDBOX_WORKFLOW_CACHE_SIZE": "250"})
	require.NoError(t, err)
	assert.Equal(t, 250, cfg.WorkflowCacheSize)
	for _, bad := range []string{"0", "-5", "many", "2.5", "1000001", "99999999999999999999"} {
		_, err := authEnv(t, map[string]string{"SANDBOX_WORKFLOW_CACHE_SIZE": bad})
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%q: %v", bad, err)
		assert.Equal(t, "SANDBOX_WORKFLOW_CACHE_SIZE", ce.Variable)
	}
}
