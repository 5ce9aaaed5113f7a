package hostworker

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
)

// SANDBOX_RUNTIME_PATH defaults to the worker's PATH less relative entries,
// duplicates and the data directory; an explicit one must be absolute clean
// directories outside the data directory. SANDBOX_CACHE_SCOPE is user by
// default, else repo or workspace.
func TestEnvironmentConfig(t *testing.T) {
	data := t.TempDir()
	cfg, err := authEnv(t, map[string]string{"SANDBOX_DATA_DIR": data,
		"PATH": "/usr/local/go/bin:bin::" + filepath.Join(data, "runtimes") + ":/usr/bin:/usr/local/go/bin/:/usr/bin"})
	require.NoError(t, err)
	assert.Equal(t, "/usr/local/go/bin:/usr/bin", cfg.Environment.RuntimePath)
	assert.Equal(t, depcache.ScopeUser, cfg.Environment.CacheScope)
	assert.False(t, cfg.Environment.NoSetup, "setup runs by default")
	assert.Equal(t, map[string]string{"PATH": "/usr/local/go/bin:/usr/bin"}, cfg.Environment.baseEnv())

	cfg, err = authEnv(t, map[string]string{"PATH": ""})
	require.NoError(t, err)
	assert.Equal(t, procexec.BasePath, cfg.Environment.RuntimePath, "nothing usable: the fixed base PATH")

	cfg, err = authEnv(t, map[string]string{"SANDBOX_RUNTIME_PATH": "/opt/node/bin:/usr/bin", "SANDBOX_CACHE_SCOPE": "workspace"})
	require.NoError(t, err)
	assert.Equal(t, "/opt/node/bin:/usr/bin", cfg.Environment.RuntimePath)
	assert.Equal(t, depcache.ScopeWorkspace, cfg.Environment.CacheScope)
	cfg, err = authEnv(t, map[string]string{"SANDBOX_SETUP": "off"})
	require.NoError(t, err)
	assert.True(t, cfg.Environment.NoSetup)
	assert.Empty(t, cfg.Environment.RepoImages, "no repository image runs by default")
	cfg, err = authEnv(t, map[string]string{"SANDBOX_REPO_IMAGES": " node:* , registry.example.com/team/*,"})
	require.NoError(t, err)
	assert.Equal(t, []string{"node:*", "registry.example.com/team/*"}, cfg.Environment.RepoImages)

	for v, vars := range map[string]map[string]string{
		"SANDBOX_RUNTIME_PATH": {"SANDBOX_RUNTIME_PATH": "bin:/usr/bin"},
		"SANDBOX_CACHE_SCOPE":  {"SANDBOX_CACHE_SCOPE": "everyone"},
		"SANDBOX_SETUP":        {"SANDBOX_SETUP": "maybe"},
		"SANDBOX_REPO_IMAGES":  {"SANDBOX_REPO_IMAGES": "node:[*"},
	} {
		_, err := authEnv(t, vars)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%v: %v", vars, err)
		assert.Equal(t, v, ce.Variable)
	}
	for _, bad := range []string{"/usr/bin/../bin", "/usr/bin:", "/usr//bin", data + "/x"} {
		_, err := authEnv(t, map[string]string{"SANDBOX_DATA_DIR": data, "SANDBOX_RUNTIME_PATH": bad})
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%q: %v", bad, err)
		assert.Equal(t, "SANDBOX_RUNTIME_PATH", ce.Variable)
	}
}
