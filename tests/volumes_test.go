package tests

import (
	"bufio"
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestDiskVolumesKeepTheQuota: with SANDBOX_DISK_VOLUMES=on, the worktree
// and /tmp are file systems of the quota's size, so what no walk sees —
// files deleted while still open — cannot pass the quota either; the
// space comes back when they close. The dependency cache is a volume of
// its own quota. Destroying the workspace deletes its worktree's and
// /tmp's volumes (docs/SECURITY.md "Disk volumes").
func TestDiskVolumesKeepTheQuota(t *testing.T) {
	if _, err := volume.New(context.Background(), filepath.Join(t.TempDir(), "probe"), nil); errors.Is(err, volume.ErrUnsupported) {
		t.Skipf("no disk volumes on this host: %v", err)
	}
	h := startHost(t, "volumes", func(c *hostworker.Config) {
		c.RuntimeResources = &sandbox.ResourceHints{DiskGB: 1}
		c.DiskVolumes = "on"
	})
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" {
		t.Skipf("the /tmp volume is bubblewrap's; this host runs %s", k)
	}
	// Whatever the test leaves mounted under the host's data directory
	// goes before the directory does (cleanups run last in, first out).
	t.Cleanup(func() { unmountUnder(h.Config.DataDir) })
	ctx := ctxFor(t, 4*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	s, ws, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	require.True(t, volume.Mounted(ws.LocalPath), "the worktree %s is a volume", ws.LocalPath)
	exec := func(script string) sandboxapi.ExecResult {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: 120})
		require.NoError(t, err)
		return res
	}

	// Each is a file system of about the quota's size.
	res := exec("df -P -k . /tmp | tail -n 2")
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	require.Len(t, lines, 2, "%s", res.Stdout)
	for _, l := range lines {
		f := strings.Fields(l)
		require.GreaterOrEqual(t, len(f), 2, l)
		kb, err := strconv.Atoi(f[1])
		require.NoError(t, err, l)
		assert.True(t, kb > 900<<10 && kb <= 1<<20, "a 1 GiB volume less its metadata: %s", l)
	}

	// Two files of 600 MiB each, deleted while open: under the file size
	// limit each, over the quota together, and invisible to any walk.
	for _, dir := range []string{".", "/tmp"} {
		res = exec(`cd ` + dir + ` && exec 3>a 4>b && rm a b && head -c 629145600 /dev/zero >&3; echo "a=$?"; head -c 629145600 /dev/zero >&4; echo "b=$?"`)
		require.Contains(t, string(res.Stdout), "a=0\n", "%s: stderr %q", dir, res.Stderr)
		require.Contains(t, string(res.Stdout), "b=1\n", "%s: the second file passes the volume: stderr %q", dir, res.Stderr)
		require.Contains(t, string(res.Stderr), "No space left on device", dir)
		// Closed with the command: the space is back.
		res = exec("cd " + dir + " && head -c 10485760 /dev/zero > after && wc -c < after && rm after")
		require.Equal(t, 0, res.ExitCode, "%s: stderr %q", dir, res.Stderr)
		require.Equal(t, "10485760\n", string(res.Stdout))
	}

	// The agent's work on the volume is committed as any other.
	res = exec("printf 'kept\\n' > kept.txt")
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "on a volume", Paths: []string{"kept.txt"}})
	require.NoError(t, err)

	images := func() []string {
		m, _ := filepath.Glob(filepath.Join(h.Config.DataDir, "volumes", "*.img"))
		return m
	}
	// The dependency cache the user's workspaces of this repository share
	// is a volume too, of the shared caches' size.
	res = exec(`df -P -k "$(dirname "$(dirname "$GOMODCACHE")")" | tail -n 1`)
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	f := strings.Fields(string(res.Stdout))
	require.GreaterOrEqual(t, len(f), 2, "%s", res.Stdout)
	kb, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	assert.True(t, kb > 35<<20 && kb <= 40<<20, "a 40 GiB volume: %s", res.Stdout)

	require.Len(t, images(), 3, "the worktree's, /tmp's and the dependency cache's")

	// A reboot whose remount failed (the image held by another loop
	// device): no command runs in the empty directory beneath the mount
	// point and nothing is written there; once the image is free, the
	// next command mounts it again and finds the work.
	destroyRuntimes(h.Host) // nothing of the sandbox holds the mount
	require.NoError(t, syscall.Unmount(ws.LocalPath, 0))
	held, err := osexec.Command("losetup", "-f", "--show", "-r", imageOf(t, h.Config.DataDir, ws.LocalPath)).Output()
	require.NoError(t, err)
	loop := strings.TrimSpace(string(held))
	t.Cleanup(func() { _ = osexec.Command("losetup", "-d", loop).Run() })
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo redo > newwork.txt"}, TimeoutS: 60})
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable)
	entries, err := os.ReadDir(ws.LocalPath)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written beneath the volume")
	require.NoError(t, osexec.Command("losetup", "-d", loop).Run())
	res = exec("cat kept.txt")
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	assert.Equal(t, "kept\n", string(res.Stdout))
	require.Len(t, images(), 3)
	_, err = s.Destroy(ctx, true)
	require.NoError(t, err)
	destroyRuntimes(h.Host)
	assert.Len(t, images(), 1, "the worktree's and /tmp's deleted with the workspace and its runtime; the shared cache stays")
	assert.False(t, volume.Mounted(ws.LocalPath))
}

// unmountUnder unmounts (lazily) every mount below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			points = append(points, fs[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// imageOf is the image of the volume mounted at target, found by its
// record under <data>/volumes.
func imageOf(t *testing.T, data, target string) string {
	t.Helper()
	records, err := filepath.Glob(filepath.Join(data, "volumes", "*.target"))
	require.NoError(t, err)
	for _, r := range records {
		if b, err := os.ReadFile(r); err == nil && strings.TrimSpace(string(b)) == target {
			return strings.TrimSuffix(r, ".target") + ".img"
		}
	}
	t.Fatalf("no volume of %s", target)
	return ""
}
