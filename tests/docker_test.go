package tests

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestDockerEndToEnd is the Docker runtime end to end: acquire →
// git status inside → edit → commit → hibernate (container stopped, worktree
// intact) → exec again (resumed) → the edit is still there. Skips without a
// daemon or image unless CI=true.
func TestDockerEndToEnd(t *testing.T) {
	img := os.Getenv("SANDBOX_TEST_IMAGE")
	if img == "" {
		img = "sandboxcore-test:latest"
	}
	ctx := ctxFor(t, 3*time.Minute)
	if p, err := docker.New(ctx, docker.Options{Image: img, Supervisor: os.Getenv("SANDBOX_SUPERVISOR_BINARY")}); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker runtime unavailable: %v", err)
		}
		t.Skipf("docker runtime unavailable: %v", err)
	} else {
		_ = p.Close()
	}
	h := startHost(t, "docker", func(c *hostworker.Config) {
		c.RuntimeProvider, c.RuntimeImage = "docker", img
		c.RuntimeResources = &sandbox.ResourceHints{CPU: 0.5, MemoryMB: 512, Pids: 300} // SANDBOX_RUNTIME_CPUS/_MEMORY_MB/_PIDS
	})
	require.Equal(t, "docker", h.Activities.Runtimes.Kind())
	s, hd, _ := newEditSession(t, h)

	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"git", "status", "--porcelain", "--branch"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "git status inside the container: %s", res.Stderr)
	require.Contains(t, string(res.Stdout), "## agent/")

	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo edited > edit.txt && git status --porcelain"}})
	require.NoError(t, err)
	require.Equal(t, "?? edit.txt\n", string(res.Stdout))
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"git", "add", "edit.txt"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, res.ExitCode, "the repo cache is read-only in the container")
	require.Contains(t, string(res.Stderr), "Read-only file system")

	c, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: edit"})
	require.NoError(t, err)
	require.False(t, c.NothingToCommit)
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"git", "log", "-1", "--format=%H %s"}})
	require.NoError(t, err)
	require.Equal(t, c.Commit+" agent: edit\n", string(res.Stdout), "git inside sees the commit")

	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	defer cli.Close()
	name := docker.ContainerName(sandboxapi.RuntimeIDFor(hd.WorkspaceID))
	hib, err := s.Hibernate(ctx)
	require.NoError(t, err)
	require.True(t, hib.Stopped)
	info, err := cli.ContainerInspect(ctx, name)
	require.NoError(t, err)
	require.False(t, info.State.Running, "hibernate stops the container")
	ws, err := h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(ws.LocalPath, "edit.txt"))
	require.NoError(t, err)
	require.Equal(t, "edited\n", string(data), "the worktree is intact while hibernated")

	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "cat edit.txt && git status --porcelain"}})
	require.NoError(t, err)
	require.Equal(t, "edited\n", string(res.Stdout), "resumed: the edit is there and committed")
	info, err = cli.ContainerInspect(ctx, name)
	require.NoError(t, err)
	require.True(t, info.State.Running)
	// The worker's resource hints are the container's limits.
	require.Equal(t, int64(500_000_000), info.HostConfig.NanoCPUs)
	require.Equal(t, int64(512<<20), info.HostConfig.Memory)
	require.NotNil(t, info.HostConfig.PidsLimit)
	require.Equal(t, int64(300), *info.HostConfig.PidsLimit)

	// preview_url: a real HTTP server in the container answers through the
	// loopback URL the update returns.
	runtimetest.BuildPreviewServer(t, ws.LocalPath)
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "index.txt"), []byte("served from the container\n"), 0o644))
	// A server outlives the command that starts it only as a background
	// process (an exec's own children end with it: docs/SECURITY.md
	// "Process model").
	srv, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: []string{"./previewserver", "8080"}, Tag: "preview"})
	require.NoError(t, err)
	require.False(t, srv.Process.Exited, "%+v", srv.Process)
	pv, err := s.PreviewURL(ctx, 8080)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(pv.URL, "http://127.0.0.1:"), pv.URL)
	var body string
	require.Eventually(t, func() bool {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(pv.URL + "index")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, "preview /index: served from the container\n", body)
	_, err = s.PreviewURL(ctx, 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "previewserver")))
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "index.txt")))

	_, err = s.Release(ctx, true)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cli.ContainerInspect(context.Background(), name)
		return err != nil && strings.Contains(err.Error(), "No such container")
	}, 30*time.Second, 200*time.Millisecond, "release with destroy removes the container")
	_, err = os.Stat(filepath.Join(ws.LocalPath, "edit.txt"))
	require.NoError(t, err, "destroying the runtime keeps the worktree")
}
