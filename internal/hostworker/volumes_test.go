package hostworker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/volume"
)

// TestDiskVolumesMountedAgainAtStart: a reboot unmounts every volume; the
// host's start mounts them again before anything uses their directories.
// SANDBOX_DISK_VOLUMES is checked, and off makes none.
func TestDiskVolumesMountedAgainAtStart(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	data := t.TempDir()
	vols, err := volume.New(ctx, filepath.Join(data, "volumes"), nil)
	if errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes here: %v", err)
	}
	require.NoError(t, err)
	wt := filepath.Join(data, "repos", "wt")
	require.NoError(t, vols.Attach(ctx, wt, volume.MinBytes))
	t.Cleanup(func() { _ = vols.Detach(wt) })
	require.NoError(t, os.WriteFile(filepath.Join(wt, "work"), []byte("kept"), 0o644))
	require.NoError(t, syscall.Unmount(wt, 0)) // the reboot

	// Off would serve the empty directory beneath the volume: refused.
	var ce *ConfigError
	_, err = diskVolumes(ctx, Config{DataDir: data, DiskVolumes: "off"}, quiet)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "SANDBOX_DISK_VOLUMES", ce.Variable)
	assert.Contains(t, ce.Error(), wt)
	assert.False(t, volume.Mounted(wt))
	off, err := diskVolumes(ctx, Config{DataDir: t.TempDir(), DiskVolumes: "off"}, quiet)
	require.NoError(t, err, "no volumes held")
	assert.Nil(t, off)

	// A quota no image can have.
	huge := Config{DataDir: data, DiskVolumes: "on", RuntimeResources: &sandbox.ResourceHints{DiskGB: 100000}}
	_, err = diskVolumes(ctx, huge, quiet)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "SANDBOX_RUNTIME_DISK_GB", ce.Variable)
	assert.False(t, volume.Mounted(wt))

	on, err := diskVolumes(ctx, Config{DataDir: data, DiskVolumes: "on"}, quiet)
	require.NoError(t, err)
	require.NotNil(t, on)
	b, err := os.ReadFile(filepath.Join(wt, "work"))
	require.NoError(t, err)
	assert.Equal(t, "kept", string(b))

	_, err = ConfigFromEnv(func(name string) (string, bool) {
		if name == "SANDBOX_DISK_VOLUMES" {
			return "yes", true
		}
		if name == "SANDBOX_DATA_DIR" {
			return data, true
		}
		return "", false
	})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "SANDBOX_DISK_VOLUMES", ce.Variable)
}
