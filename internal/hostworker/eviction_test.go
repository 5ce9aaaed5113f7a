package hostworker

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

func envOf(m map[string]string) func(name, def string) string {
	return func(name, def string) string {
		if v, ok := m[name]; ok {
			return v
		}
		return def
	}
}

func TestEvictionConfigDefaults(t *testing.T) {
	c, err := evictionFromEnv(envOf(nil))
	require.NoError(t, err)
	assert.Equal(t, DefaultEvictionInterval, c.Interval)
	assert.Equal(t, eviction.DefaultPolicy(), c.Policy)
	assert.Zero(t, c.DiskBudgetBytes)
	assert.Equal(t, 1.0, c.DiskBudgetFraction)
}

func TestEvictionConfigValues(t *testing.T) {
	c, err := evictionFromEnv(envOf(map[string]string{
		"SANDBOX_EVICTION_INTERVAL":     "0",
		"SANDBOX_EVICTION_HIGH_WATER":   "90%",
		"SANDBOX_EVICTION_LOW_WATER":    "0.5",
		"SANDBOX_EVICTION_SEVERE_WATER": "1",
		"SANDBOX_EVICTION_TTL_EDIT":     "720h",
		"SANDBOX_DISK_BUDGET_BYTES":     "1073741824",
		"SANDBOX_DISK_BUDGET_FRACTION":  "80%",
	}))
	require.NoError(t, err)
	assert.Zero(t, c.Interval)
	assert.InDelta(t, 0.9, c.Policy.HighWater, 1e-9)
	assert.InDelta(t, 0.5, c.Policy.LowWater, 1e-9)
	assert.InDelta(t, 1.0, c.Policy.SevereWater, 1e-9)
	assert.Equal(t, 720*time.Hour, c.Policy.EditTTL)
	assert.Equal(t, int64(1<<30), c.DiskBudgetBytes)
	assert.InDelta(t, 0.8, c.DiskBudgetFraction, 1e-9)
}

func TestEvictionConfigErrorsNameTheVariable(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"SANDBOX_EVICTION_INTERVAL":     {"SANDBOX_EVICTION_INTERVAL": "soon"},
		"SANDBOX_EVICTION_TTL_TASK":     {"SANDBOX_EVICTION_TTL_TASK": "0"},
		"SANDBOX_EVICTION_HIGH_WATER":   {"SANDBOX_EVICTION_HIGH_WATER": "120%"},
		"SANDBOX_EVICTION_LOW_WATER":    {"SANDBOX_EVICTION_LOW_WATER": "0.9"},
		"SANDBOX_DISK_BUDGET_BYTES":     {"SANDBOX_DISK_BUDGET_BYTES": "10G"},
		"SANDBOX_DISK_BUDGET_FRACTION":  {"SANDBOX_DISK_BUDGET_FRACTION": "0"},
		"SANDBOX_EVICTION_RUNTIME_STOP": {"SANDBOX_EVICTION_RUNTIME_STOP": "-1m"},
	} {
		_, err := evictionFromEnv(envOf(env))
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		assert.Equal(t, name, ce.Variable)
	}
}

func TestRuntimeResourcesFromEnv(t *testing.T) {
	lookup := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == "SANDBOX_DATA_DIR" {
				return t.TempDir(), true
			}
			v, ok := m[k]
			return v, ok
		}
	}
	cfg, err := ConfigFromEnv(lookup(nil))
	require.NoError(t, err)
	assert.Nil(t, cfg.RuntimeResources, "no hints unless set")
	assert.Equal(t, [2]uint32{65534, 65534}, [2]uint32{cfg.SandboxUID, cfg.SandboxGID}, "a root worker's sandboxes: nobody/nogroup")
	cfg, err = ConfigFromEnv(lookup(map[string]string{"SANDBOX_RUNTIME_UID": "4000", "SANDBOX_RUNTIME_GID": "4001"}))
	require.NoError(t, err)
	assert.Equal(t, [2]uint32{4000, 4001}, [2]uint32{cfg.SandboxUID, cfg.SandboxGID})

	cfg, err = ConfigFromEnv(lookup(map[string]string{"SANDBOX_RUNTIME_CPUS": "0.5", "SANDBOX_RUNTIME_MEMORY_MB": "1024", "SANDBOX_RUNTIME_PIDS": "256", "SANDBOX_RUNTIME_DISK_GB": "20"}))
	require.NoError(t, err)
	require.NotNil(t, cfg.RuntimeResources)
	assert.Equal(t, sandbox.ResourceHints{CPU: 0.5, MemoryMB: 1024, Pids: 256, DiskGB: 20}, *cfg.RuntimeResources)

	for _, kv := range [][2]string{{"SANDBOX_RUNTIME_CPUS", "-1"}, {"SANDBOX_RUNTIME_CPUS", "1e-300"}, {"SANDBOX_RUNTIME_CPUS", "0.001"},
		{"SANDBOX_RUNTIME_CPUS", "NaN"}, {"SANDBOX_RUNTIME_CPUS", "100000"}, {"SANDBOX_RUNTIME_MEMORY_MB", "lots"},
		{"SANDBOX_RUNTIME_MEMORY_MB", "1"}, {"SANDBOX_RUNTIME_PIDS", "0"}, {"SANDBOX_RUNTIME_DISK_GB", "0"}, {"SANDBOX_RUNTIME_DISK_GB", "1.5"},
		{"SANDBOX_RUNTIME_UID", "0"}, {"SANDBOX_RUNTIME_GID", "0"}, {"SANDBOX_RUNTIME_UID", "-1"}, {"SANDBOX_RUNTIME_UID", "4294967295"}, {"SANDBOX_RUNTIME_GID", "x"}} {
		k, v := kv[0], kv[1]
		_, err := ConfigFromEnv(lookup(map[string]string{k: v}))
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s=%s: %v", k, v, err)
		assert.Equal(t, k, ce.Variable)
	}
}
