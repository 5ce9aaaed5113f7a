package hostworker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestAutoNeverFallsBackToTheHost: SANDBOX_RUNTIME_PROVIDER=auto with neither
// bubblewrap nor Docker usable refuses to start with ErrRuntimeUnavailable
// naming both reasons and the explicit way out (never a silent
// fallback to the host subprocess); local only when named.
func TestAutoNeverFallsBackToTheHost(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{DataDir: t.TempDir()}

	// No bwrap on PATH, and a Docker endpoint that does not exist.
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))

	for name, c := range map[string]struct{ provider, image string }{
		"auto, no image":           {"auto", ""},
		"auto, daemon unreachable": {"auto", "sandboxcore-test:latest"},
		"bwrap missing":            {"bwrap", ""},
		"docker unreachable":       {"docker", "sandboxcore-test:latest"},
	} {
		cfg.RuntimeProvider, cfg.RuntimeImage = c.provider, c.image
		p, err := runtimeProvider(ctx, cfg, nil, hostParts{}, quiet)
		require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable, name)
		assert.Nil(t, p, name)
		if c.provider == "auto" {
			assert.Contains(t, err.Error(), "bubblewrap", name)
			assert.Contains(t, err.Error(), "SANDBOX_RUNTIME_PROVIDER=local", name)
		}
	}

	cfg.RuntimeProvider = "local"
	p, err := runtimeProvider(ctx, cfg, nil, hostParts{}, quiet)
	require.NoError(t, err)
	assert.Equal(t, "local", p.Kind())

	cfg.RuntimeProvider = "subprocess"
	_, err = runtimeProvider(ctx, cfg, nil, hostParts{}, quiet)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "SANDBOX_RUNTIME_PROVIDER", ce.Variable)
}

// TestAutoPicksBubblewrap: with bubblewrap usable, auto takes it.
func TestAutoPicksBubblewrap(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	p, err := runtimeProvider(context.Background(), Config{DataDir: t.TempDir(), RuntimeProvider: "auto", SupervisorBinary: supervisortest.Binary(t)}, nil, hostParts{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	assert.Equal(t, "bwrap", p.Kind())
}

// TestRuntimeCatalog: the catalog is the one list of runtime kinds. The
// published list (sandboxapi.RuntimeKinds, hence the schema's enum of
// runtime_kind) is the catalog's, in order; every kind is accepted by the
// configuration and nothing else is, and the refusal lists them all.
func TestRuntimeCatalog(t *testing.T) {
	var kinds []string
	for _, b := range runtimeBackends {
		kinds = append(kinds, b.kind)
		require.NotNil(t, b.build, b.kind)
	}
	assert.Equal(t, sandboxapi.RuntimeKinds, kinds)

	for _, kind := range append([]string{autoProvider}, kinds...) {
		_, err := ConfigFromEnv(func(name string) (string, bool) {
			v, ok := map[string]string{"SANDBOX_DATA_DIR": t.TempDir(), "SANDBOX_HOST_ID": "h1", "SANDBOX_RUNTIME_PROVIDER": kind}[name]
			return v, ok
		})
		var ce *ConfigError
		if errors.As(err, &ce) {
			// A backend with settings of its own refuses their absence,
			// never the kind.
			assert.NotEqual(t, "SANDBOX_RUNTIME_PROVIDER", ce.Variable, kind)
		}
	}
	_, err := ConfigFromEnv(func(name string) (string, bool) {
		v, ok := map[string]string{"SANDBOX_DATA_DIR": t.TempDir(), "SANDBOX_HOST_ID": "h1", "SANDBOX_RUNTIME_PROVIDER": "subprocess"}[name]
		return v, ok
	})
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "SANDBOX_RUNTIME_PROVIDER", ce.Variable)
	assert.Equal(t, "want auto, local, bwrap, docker, daytona or e2b", ce.Reason)
}
