package bwrap_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestRootWorkerSandboxIsUnprivileged: a root worker's sandbox of a
// root-owned worktree runs as the unprivileged sandbox user on the host
// (never uid 0, whose sysctl writes the kernel honours without any
// capability), still writes its worktree, and what it writes is root's on
// the host; it cannot make a user namespace, and the seccomp filter refuses
// what DeniedSyscalls lists.
func TestRootWorkerSandboxIsUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs a root worker")
	}
	ctx, _, spec, rt := setup(t, bwrap.Options{}, nil)
	wt := spec.Mounts[0].Source
	require.NoError(t, os.WriteFile(filepath.Join(wt, "by-host"), []byte("host\n"), 0o644))

	res := runtimetest.Sh(t, ctx, rt, "id -u; id -g; echo more >> by-host; echo x > f; mkdir d; echo y > d/g; grep '^Seccomp:' /proc/self/status")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "65534\n65534\nSeccomp:\t2\n", string(res.Stdout))
	data, err := os.ReadFile(filepath.Join(wt, "by-host"))
	require.NoError(t, err)
	require.Equal(t, "host\nmore\n", string(data), "the sandbox writes a file the worker wrote")
	for _, p := range []string{"by-host", "f", "d", "d/g"} {
		fi, err := os.Lstat(filepath.Join(wt, p))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "%s is root's on the host", p)
	}

	// The host's view of a command: its real, effective and saved uids.
	token := "7." + strconv.Itoa(os.Getpid())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sleep", token}, TimeoutS: 30})
	}()
	pid := findProcess(t, "sleep\x00"+token+"\x00", 10*time.Second)
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	uids := statusLine(string(status), "Uid:")
	require.Equal(t, []string{"65534", "65534", "65534", "65534"}, uids, "the command's host uids")
	require.Equal(t, "0000000000000000", statusLine(string(status), "CapEff:")[0])
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-done

	// No user namespace inside, and the filter's refusals.
	keyctl, ioUringSetup := 250, 425
	if runtime.GOARCH == "arm64" {
		keyctl = 219
	}
	res = runtimetest.Sh(t, ctx, rt, "unshare -U true 2>/dev/null && echo userns; "+
		"perl -e 'for (@ARGV) { $! = 0; my $r = syscall($_, 0, 0, 0, 0, 0); print \"$_ $r \", ($!+0), \"\\n\" }' "+
		strconv.Itoa(keyctl)+" "+strconv.Itoa(ioUringSetup))
	require.Equal(t, 0, res.ExitCode, "stderr=%s", res.Stderr)
	require.Equal(t, strconv.Itoa(keyctl)+" -1 1\n"+strconv.Itoa(ioUringSetup)+" -1 1\n", string(res.Stdout),
		"no user namespace; keyctl and io_uring_setup refused with EPERM (1)")
}

// findProcess returns the host pid of the process whose command line is
// cmdline (NUL-separated), waiting up to limit.
func findProcess(t *testing.T, cmdline string, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no process %q within %s", strings.ReplaceAll(cmdline, "\x00", " "), limit)
	return 0
}

// statusLine returns the fields after key in a /proc/<pid>/status text.
func statusLine(status, key string) []string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, key) {
			return strings.Fields(strings.TrimPrefix(l, key))
		}
	}
	return nil
}
