package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// TestReattachAfterWorkerKill: on the durable runtimes (Docker, bubblewrap)
// a worker killed with SIGKILL while a command and a background process run
// loses neither: the next worker's exec activity re-attaches to the same
// command (run once) and returns its whole output and exit code, and
// process_read continues from the client's offset with the backlog written
// meanwhile and the exit code of a process that ended while no worker ran.
func TestReattachAfterWorkerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	for _, provider := range []string{"bwrap", "docker"} {
		t.Run(provider, func(t *testing.T) { reattachAfterKill(t, provider) })
	}
}

func reattachAfterKill(t *testing.T, provider string) {
	img := os.Getenv("SANDBOX_TEST_IMAGE")
	if img == "" {
		img = "sandboxcore-test:latest"
	}
	switch provider {
	case "docker":
		ctx := ctxFor(t, time.Minute)
		p, err := docker.New(ctx, docker.Options{Image: img, Supervisor: os.Getenv("SANDBOX_SUPERVISOR_BINARY")})
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("docker runtime unavailable: %v", err)
			}
			t.Skipf("docker runtime unavailable: %v", err)
		}
		_ = p.Close()
	case "bwrap":
		if _, err := exec.LookPath("bwrap"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("bwrap is not installed")
			}
			t.Skip("bwrap is not installed")
		}
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	destroyLeftSandboxes(t, dataDir)
	host := "kill-" + provider
	queue := uniq(t, "q-kill")
	env := append(os.Environ(), workerProcessEnv+"=1", "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_DATA_DIR="+dataDir,
		"SANDBOX_HOST_ID="+host, "SANDBOX_TASK_QUEUE="+queue, "SANDBOX_ALLOW_FILE_URLS=1", "SANDBOX_SESSION_ON_HOST_QUEUE=1",
		"SANDBOX_EVICTION_INTERVAL=0", "SANDBOX_RUNTIME_PROVIDER="+provider, "SANDBOX_RUNTIME_IMAGE="+img)
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "worker ready" {
					close(ready)
				}
			}
		}()
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			t.Fatal("the worker did not start")
		}
		return cmd
	}
	w1 := startWorker()
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	client := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: queue})
	ctx := ctxFor(t, 5*time.Minute)
	s, hd, err := client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	if provider == "docker" {
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if p, err := docker.New(cctx, docker.Options{Image: img, Supervisor: os.Getenv("SANDBOX_SUPERVISOR_BINARY"), StateDir: filepath.Join(dataDir, "runtimes", "docker")}); err == nil {
				_ = p.Destroy(cctx, sandboxapi.RuntimeIDFor(hd.WorkspaceID))
				_ = p.Close()
			}
		})
	}

	// A background process that writes a backlog and ends while no worker runs.
	bg, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: sh(`echo bg-start; sleep 3; seq 1 2000; exit 5`)})
	require.NoError(t, err)
	r, err := s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: bg.ProcessID, WaitMS: 10_000})
	require.NoError(t, err)
	require.Equal(t, "bg-start\n", string(r.Data))
	offset := r.NextOffset

	// A command that runs across the kill.
	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(`echo run >> runs; seq 1 3000; sleep 6; echo exec-end; exit 7`), TimeoutS: 120})
		done <- outcome{res, err}
	}()
	runs := filepath.Join(hd.LocalPath, "runs")
	require.Eventually(t, func() bool { _, err := os.Stat(runs); return err == nil }, time.Minute, 20*time.Millisecond, "the command started")
	time.Sleep(time.Second) // past the fast path: the exec activity waits now
	require.NoError(t, syscall.Kill(w1.Process.Pid, syscall.SIGKILL))
	_, _ = w1.Process.Wait()
	time.Sleep(4 * time.Second) // the background process ends meanwhile
	startWorker()

	var o outcome
	select {
	case o = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the exec did not return after the worker restarted")
	}
	require.NoError(t, o.err)
	assert.Equal(t, 7, o.res.ExitCode)
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	want.WriteString("exec-end\n")
	assert.Equal(t, want.String(), string(o.res.Stdout), "the whole output, across the kill")
	data, err := os.ReadFile(runs)
	require.NoError(t, err)
	assert.Equal(t, "run\n", string(data), "the command ran once")

	var backlog strings.Builder
	for {
		r, err = s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: bg.ProcessID, Offset: offset, WaitMS: 10_000})
		require.NoError(t, err)
		backlog.Write(r.Data)
		offset = r.NextOffset
		if r.EOF {
			break
		}
	}
	var wantBG strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&wantBG, "%d\n", i)
	}
	assert.Equal(t, wantBG.String(), backlog.String(), "the backlog from the client's offset")
	assert.True(t, r.Exited)
	assert.Equal(t, 5, r.ExitCode, "the exit code of a process that ended while no worker ran")
}
