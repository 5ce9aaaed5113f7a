package bwrap_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestMain lets the test binary act as a worker (TestProcessesSurviveWorkerKill).
func TestMain(m *testing.M) {
	if os.Getenv("BWRAPTEST_WORKER") == "1" {
		os.Exit(fakeWorker())
	}
	os.Exit(m.Run())
}

// fakeWorker starts a background process in a runtime as a worker would,
// prints its id and waits to be killed.
func fakeWorker() int {
	ctx := context.Background()
	p, err := bwrap.New(ctx, bwrap.Options{ScratchDir: os.Getenv("BWRAPTEST_SCRATCH"), Supervisor: os.Getenv("BWRAPTEST_SUPERVISOR")})
	if err != nil {
		println(err.Error())
		return 1
	}
	spec := specFor(os.Getenv("BWRAPTEST_DIR"))
	spec.ID = os.Getenv("BWRAPTEST_ID")
	rt, err := p.Create(ctx, spec)
	if err != nil {
		println(err.Error())
		return 1
	}
	info, err := rt.(sandbox.ProcessRuntime).StartProcess(ctx, sandbox.ProcessSpec{
		Cmd: []string{"sh", "-c", "echo before; i=0; while [ $i -lt 30 ]; do [ -e /workspace/go ] && break; sleep 0.1; i=$((i+1)); done; echo after; exit 5"},
	})
	if err != nil {
		println(err.Error())
		return 1
	}
	os.Stdout.WriteString(info.ID + "\n")
	time.Sleep(time.Hour)
	return 0
}

// TestProcessesSurviveWorkerKill: a background process and its output
// outlive a worker killed with SIGKILL (its whole process group); a new
// worker's Create reattaches, reads the backlog from offset 0 and gets the
// exit code of a process that ended meanwhile.
func TestProcessesSurviveWorkerKill(t *testing.T) {
	scratch := scratchDir(t)
	newProvider(t, bwrap.Options{ScratchDir: scratch}) // skips without bwrap
	// Orphans of the killed worker (its bwrap) come back to this process to
	// be reaped, not to an init that may not reap.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	dir := t.TempDir()
	id := runtimetest.NewID("bwrap")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BWRAPTEST_WORKER=1", "BWRAPTEST_SCRATCH="+scratch, "BWRAPTEST_DIR="+dir, "BWRAPTEST_ID="+id,
		"BWRAPTEST_SUPERVISOR="+supervisorBin(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	procID := strings.TrimSpace(line)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()

	// The process runs on without any worker; it ends meanwhile.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o644))
	time.Sleep(500 * time.Millisecond)

	p2 := newProvider(t, bwrap.Options{ScratchDir: scratch})
	spec := specFor(dir)
	spec.ID = id
	ctx := context.Background()
	rt, err := p2.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p2.Destroy(context.Background(), id)
		reapOrphans()
	})
	pr := rt.(sandbox.ProcessRuntime)
	require.True(t, pr.ProcessSupport().Durable)
	got, last := runtimetest.ReadUntil(t, ctx, pr, procID, "", 10*time.Second, func([]byte) bool { return false })
	require.Equal(t, "before\nafter\n", string(got), "the backlog from offset 0")
	require.True(t, last.Process.Exited)
	require.Equal(t, 5, last.Process.ExitCode, "the exit code of a process that ended while no worker ran")
	res := runtimetest.Sh(t, ctx, rt, "echo still works")
	require.Equal(t, "still works\n", string(res.Stdout))
}

// reapOrphans reaps the exited children this (subreaper) process adopted.
func reapOrphans() {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil {
			return // no children left
		}
		if pid == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestControlChannelIsUnreachable: nothing a command can do inside the
// sandbox reaches the supervisor's control socket or its descriptors.
func TestControlChannelIsUnreachable(t *testing.T) {
	ctx, _, _, rt := setup(t, bwrap.Options{}, nil)
	// Start a background process so that a busy shim exists too.
	_, err := rt.(sandbox.ProcessRuntime).StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "60"}})
	require.NoError(t, err)
	res := runtimetest.Sh(t, ctx, rt, `
		echo "init=$(cat /proc/1/comm)"
		for p in /proc/[0-9]*; do
			n=${p#/proc/}
			[ "$n" = "$$" ] && continue
			for f in "$p"/fd/*; do readlink "$f" >/dev/null 2>&1 && { echo "fds-readable: $n $(cat $p/comm)"; break; }; done
			cat "$p/environ" >/dev/null 2>&1 && echo "environ-readable: $n $(cat $p/comm)"
			head -c1 "$p/exe" >/dev/null 2>&1 && echo "exe-readable: $n $(cat $p/comm)"
		done
		ls -l /proc/self/fd | grep -c socket || true
		find / -xdev -type s 2>/dev/null | head
		find /tmp /workspace -name '*.sock' 2>/dev/null
		echo end`)
	runtimetest.RequireOK(t, res)
	out := string(res.Stdout)
	require.Contains(t, out, "init=sandbox-supervi", "the supervisor is the sandbox's init")
	require.Contains(t, string(runtimetest.Sh(t, ctx, rt, "cat /proc/*/comm").Stdout), "sandbox-shim", "shims are there to probe")
	// Only the probing shell's own children (ls, cat) may show up.
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "-readable:") {
			require.NotContains(t, l, "sandbox-supervi", "a supervisor or shim is reachable: %s", l)
		}
	}
	require.Contains(t, out, "\n0\n", "the command holds no socket")
	require.True(t, strings.HasSuffix(out, "end\n") && !strings.Contains(out, ".sock"), "no socket file is visible: %q", out)
	t.Logf("probe: %s", out)
	// Killing every process it may signal does not take the supervisor down.
	res = runtimetest.Sh(t, ctx, rt, `kill -TERM 1; kill -KILL 1; kill -SEGV 1; kill -HUP -1; sleep 0.2; echo alive`)
	require.Contains(t, string(res.Stdout), "alive")
	res = runtimetest.Sh(t, ctx, rt, `echo after`)
	require.Equal(t, "after\n", string(res.Stdout), "the sandbox still serves commands")
}

// TestCancelAndTimeoutKillTheTreeWithinASecond: children that left the
// command's session and group die with it within a second of a timeout or
// a cancellation.
func TestCancelAndTimeoutKillTheTreeWithinASecond(t *testing.T) {
	ctx, _, spec, rt := setup(t, bwrap.Options{}, nil)
	escape := `setsid sh -c 'echo $$ >> "$0"; exec sleep 300' "$1" &
		(sh -c 'echo $$ >> "$0"; exec sleep 300' "$1" &)
		exec sleep 300`
	alive := func(file string) string {
		res := runtimetest.Sh(t, ctx, rt, `n=0; for p in $(cat `+file+`); do kill -0 "$p" 2>/dev/null && n=$((n+1)); done; echo $n`)
		return strings.TrimSpace(string(res.Stdout))
	}
	waitPids := func(file string) {
		for i := 0; i < 100; i++ {
			if b, _ := os.ReadFile(filepath.Join(spec.Mounts[0].Source, file)); strings.Count(string(b), "\n") >= 2 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("the children never started")
	}
	// Cancellation.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(cctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", escape, "sh", "c.pids"}, TimeoutS: 60})
		done <- err
	}()
	waitPids("c.pids")
	require.Equal(t, "2", alive("c.pids"))
	start := time.Now()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	for alive("c.pids") != "0" && time.Since(start) < 3*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	require.Less(t, time.Since(start), time.Second, "the tree outlived the cancellation by a second")

	// Timeout.
	go func() {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", escape, "sh", "t.pids"}, TimeoutS: 2})
		if err == nil && !res.TimedOut {
			err = os.ErrInvalid
		}
		done <- err
	}()
	waitPids("t.pids")
	require.NoError(t, <-done)
	start = time.Now()
	for alive("t.pids") != "0" && time.Since(start) < 3*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	require.Less(t, time.Since(start), time.Second, "the tree outlived the timeout by a second")
}
