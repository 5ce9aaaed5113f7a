package bwrap_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
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

// TestForkBombIsStoppedByThePidsLimit: the bomb never exceeds the runtime's
// pids limit, fails to fork as soon as it reaches it, and its tree is gone
// when the command ends; the runtime then works as before.
func TestForkBombIsStoppedByThePidsLimit(t *testing.T) {
	_, rt := limited(t, sandbox.ResourceHints{Pids: 64})
	ctx := t.Context()
	start := time.Now()
	// The bomb starts in a subshell (whose own failed forks end it); the
	// leader then only uses builtins, so the exhausted limit cannot stop it.
	res, err := rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", `
		( bomb() { bomb | bomb & }; bomb ) 2>/dev/null
		max=0; i=0
		while [ $i -lt 400 ]; do set -- /proc/[0-9]*; [ $# -gt $max ] && max=$#; i=$((i+1)); done
		echo "max=$max"`}, TimeoutS: 60})
	require.NoError(t, err)
	elapsed := time.Since(start)
	out := string(res.Stdout) + string(res.Stderr)
	t.Logf("fork bomb: exit %d: %s (%v)", res.ExitCode, strings.TrimSpace(out), elapsed)
	var peak int
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if v, ok := strings.CutPrefix(l, "max="); ok {
			peak = atoi(t, v)
		}
	}
	// Threads of the supervisor and its shims count too, so fewer than 64
	// processes fill the limit.
	require.GreaterOrEqual(t, peak, 30, "the bomb grew up to the limit: %q", out)
	require.LessOrEqual(t, peak, 64, "the whole sandbox stays within its pids limit")
	require.Less(t, elapsed, 20*time.Second, "the bomb is contained, not waited out")
	res = runtimetest.Sh(t, ctx, rt, `ls -d /proc/[0-9]* | wc -l`)
	runtimetest.RequireOK(t, res)
	require.Less(t, atoi(t, strings.TrimSpace(string(res.Stdout))), 10, "the bomb's tree is gone after its command")
}

// TestMemoryHogIsKilledByTheMemoryLimit: a process that allocates without
// bound dies by the memory limit (137, with a notice), the runtime lives on.
func TestMemoryHogIsKilledByTheMemoryLimit(t *testing.T) {
	_, rt := limited(t, sandbox.ResourceHints{MemoryMB: 64})
	ctx := t.Context()
	start := time.Now()
	// tail buffers a line that never ends.
	res, err := rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"tail", "/dev/zero"}, TimeoutS: 60})
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
	res, err := rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", `
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
