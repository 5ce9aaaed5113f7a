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
		p, err := runtimeProvider(ctx, cfg, nil, nil, quiet)
		require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable, name)
		assert.Nil(t, p, name)
		if c.provider == "auto" {
			assert.Contains(t, err.Error(), "bubblewrap", name)
			assert.Contains(t, err.Error(), "SANDBOX_RUNTIME_PROVIDER=local", name)
		}
	}

	cfg.RuntimeProvider = "local"
	p, err := runtimeProvider(ctx, cfg, nil, nil, quiet)
	require.NoError(t, err)
	assert.Equal(t, "local", p.Kind())

	cfg.RuntimeProvider = "subprocess"
	_, err = runtimeProvider(ctx, cfg, nil, nil, quiet)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "SANDBOX_RUNTIME_PROVIDER", ce.Variable)
}

// TestAutoPicksBubblewrap: with bubblewrap usable, auto takes it.
func TestAutoPicksBubblewrap(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	p, err := runtimeProvider(context.Background(), Config{DataDir: t.TempDir(), RuntimeProvider: "auto", SupervisorBinary: supervisortest.Binary(t)}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	assert.Equal(t, "bwrap", p.Kind())
}
