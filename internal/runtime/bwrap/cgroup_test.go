package bwrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// limited returns a runtime with resource hints, skipping (failing under
// CI=true) where no cgroup hierarchy can be written.
func limited(t *testing.T, hints sandbox.ResourceHints) (*bwrap.Provider, sandbox.Runtime) {
	t.Helper()
	p := newProvider(t, bwrap.Options{})
	if ok, why := p.ResourceLimits(); !ok {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("no cgroup limits for a root worker: %s", why)
		}
		t.Skipf("no cgroup limits here: %s", why)
	}
	_, _, _, rt := setup(t, bwrap.Options{}, func(s *sandbox.RuntimeSpec) { s.Resources = &hints })
	return p, rt
}

// TestForkBombIsStoppedByThePidsLimit: a fork bomb whose processes retry
// every failed fork (bash) fills the runtime's pids limit and no more, as
// the kernel counts it in the sandbox's cgroup; the bomb's tree is gone
// within a second of its command's end; the runtime then works as before.
func TestForkBombIsStoppedByThePidsLimit(t *testing.T) {
	const limit = 64
	_, rt := limited(t, sandbox.ResourceHints{Pids: limit})
	ctx := t.Context()
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
	// A background process started before the bomb must live through it:
	// the supervisor is outside the commands' pids limit.
	pr := rt.(sandbox.ProcessRuntime)
	bg, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "60"}})
	require.NoError(t, err)
	pidsDir := filepath.Join(cgroupDirOf(t, rt, "pids"), "cmds")
	current := func() int { return atoi(t, strings.TrimSpace(readCg(t, pidsDir, "pids.current"))) }
	base := current()

	done := make(chan sandboxapi.ExecResult, 1)
	var execErr error
	start := time.Now()
	go func() {
		// sleep first, while forks still work; the leader then only waits.
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"bash", "-c", `
			sleep 3 & s=$!
			( bomb() { while :; do bomb & done; }; bomb ) 2>/dev/null &
			wait $s; echo leader-done`}, TimeoutS: 60})
		execErr = err
		done <- res
	}()
	peak := 0
	var res sandboxapi.ExecResult
	for waiting := true; waiting; {
		select {
		case res = <-done:
			waiting = false
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, current())
		}
	}
	ended := time.Now()
	require.NoError(t, execErr)
	require.Contains(t, string(res.Stdout), "leader-done", "exit %d, stderr=%q", res.ExitCode, res.Stderr)
	t.Logf("fork bomb: tasks %d before, peak %d of %d, %s; command took %v", base, peak, limit, strings.TrimSpace(readCg(t, pidsDir, "pids.events")), ended.Sub(start))
	require.LessOrEqual(t, peak, limit, "the kernel kept the sandbox within its pids limit")
	require.GreaterOrEqual(t, peak, limit-8, "the bomb filled the limit")
	require.Contains(t, readCg(t, pidsDir, "pids.events"), "max ", "forks were refused at the limit")
	for current() > base+4 && time.Since(ended) < 5*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	require.Less(t, time.Since(ended), time.Second, "the bomb's tree outlived its command by a second (tasks %d, %d before)", current(), base)
	res = runtimetest.Sh(t, ctx, rt, "echo alive")
	require.Equal(t, "alive\n", string(res.Stdout))
	list, err := pr.ListProcesses(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, bg.ID, list[0].ID)
	require.False(t, list[0].Exited, "the background process lived through the bomb")
}

// cgroupDirOf is the directory of controller's cgroup of rt's sandbox, as
// the kernel reports it for the sandbox's init (pid file in the control
// directory).
func cgroupDirOf(t *testing.T, rt sandbox.Runtime, controller string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "*", "*", "scratch", ".ctl", rt.ID()+".*.pid"))
	require.Len(t, files, 1, "the sandbox's pid file (one network mode in use)")
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	pid := strings.Fields(string(b))[0]
	cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
	require.NoError(t, err)
	for _, l := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", controller, parts[2])
			}
		}
		if parts[1] == "" && parts[0] == "0" {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", parts[2], controller+".max")); err == nil {
				return filepath.Join("/sys/fs/cgroup", parts[2])
			}
		}
	}
	t.Fatalf("no %s cgroup in %q", controller, cg)
	return ""
}

func readCg(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	return string(b)
}

// TestMemoryHogIsKilledByTheMemoryLimit: a process that allocates without
// bound dies by the memory limit (137, with a notice), the runtime lives on.
func TestMemoryHogIsKilledByTheMemoryLimit(t *testing.T) {
	_, rt := limited(t, sandbox.ResourceHints{MemoryMB: 64})
	ctx := t.Context()
	start := time.Now()
	// tail buffers a line that never ends.
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"tail", "/dev/zero"}, TimeoutS: 60})
	require.NoError(t, err)
	require.Equal(t, 137, res.ExitCode, "stderr=%q", res.Stderr)
	require.Contains(t, string(res.Stderr), "memory limit")
	require.Less(t, time.Since(start), 30*time.Second)
	res = runtimetest.Sh(t, ctx, rt, "echo alive")
	require.Equal(t, "alive\n", string(res.Stdout))
}

// TestCPULimitThrottles: a busy loop in a runtime limited to a tenth of a
// core gets about that much CPU time.
func TestCPULimitThrottles(t *testing.T) {
	_, rt := limited(t, sandbox.ResourceHints{CPU: 0.1})
	ctx := t.Context()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `
		sh -c 'while :; do :; done' & pid=$!
		sleep 2; kill -STOP $pid
		# utime+stime in clock ticks (100 per second)
		set -- $(sed 's/.*) //' /proc/$pid/stat); echo $(( ${12} + ${13} ))
		kill -9 $pid`}, TimeoutS: 60})
	require.NoError(t, err)
	runtimetest.RequireOK(t, res)
	ticks := atoi(t, strings.TrimSpace(string(res.Stdout)))
	t.Logf("a busy loop got %d ticks of CPU in 2 s at 0.1 core", ticks)
	require.Less(t, ticks, 100, "more than half a core-second in 2 s: not throttled to 0.1 core")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', "not a number: %q", s)
		n = n*10 + int(c-'0')
	}
	return n
}

// TestForkBombEndsWithItsTimeout: a fork bomb whose members retry every
// failed fork, under the default limits, is gone within seconds of its
// command's timeout (the killer stops the whole tree before killing it, so
// the bomb cannot refill the pids that killing frees), and the runtime
// works afterwards.
func TestForkBombEndsWithItsTimeout(t *testing.T) {
	_, rt := limited(t, sandbox.ResourceHints{})
	ctx := t.Context()
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
	pidsDir := filepath.Join(cgroupDirOf(t, rt, "pids"), "cmds")
	current := func() int { return atoi(t, strings.TrimSpace(readCg(t, pidsDir, "pids.current"))) }
	base := current()
	const timeout = 5
	start := time.Now()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"bash", "-c", `bomb() { while :; do bomb & done; }; bomb 2>/dev/null`}, TimeoutS: timeout})
	took := time.Since(start)
	require.NoError(t, err)
	require.True(t, res.TimedOut, "exit %d", res.ExitCode)
	ended := time.Now()
	for current() > base && time.Since(ended) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("fork bomb with a %ds timeout: the call took %v, its tree was gone %v later (%s)", timeout, took, time.Since(ended), strings.TrimSpace(readCg(t, pidsDir, "pids.events")))
	require.Less(t, took, (timeout+10)*time.Second, "the call ended long after its timeout")
	require.LessOrEqual(t, current(), base, "the bomb's tree outlived its command")
	require.Equal(t, "alive\n", string(runtimetest.Sh(t, ctx, rt, "echo alive").Stdout))
}
