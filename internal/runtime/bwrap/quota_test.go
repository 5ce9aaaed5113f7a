package bwrap_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// quotaRuntime is a runtime with a disk quota of 1 GiB and the host
// directories its commands write: the worktree and the scratch /tmp.
func quotaRuntime(t *testing.T) (sandbox.Runtime, []string) {
	scratch := scratchDir(t)
	_, _, spec, rt := setup(t, bwrap.Options{ScratchDir: scratch}, func(s *sandbox.RuntimeSpec) {
		s.Resources = &sandbox.ResourceHints{DiskGB: 1}
	})
	return rt, []string{spec.Mounts[0].Source, filepath.Join(scratch, spec.ID)}
}

// TestDiskQuotaStopsAWriterAndKeepsItsFiles: a command writing files of
// 64 MiB in turn into the worktree and /tmp (none near the file size
// limit) is killed soon after both together pass the quota of 1 GiB, with a
// notice; what it wrote stays; a command removing files may run (a runtime
// over its quota may shrink), and then the runtime works as before.
func TestDiskQuotaStopsAWriterAndKeepsItsFiles(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `
		i=0
		while [ $i -lt 64 ]; do
			head -c 67108864 /dev/zero > /workspace/f$i || exit 7
			head -c 67108864 /dev/zero > /tmp/t$i || exit 7
			i=$((i+1))
		done
		echo survived`}, TimeoutS: 300})
	require.NoError(t, err)
	require.Equal(t, 137, res.ExitCode, "stdout=%q stderr=%q", res.Stdout, res.Stderr)
	require.Contains(t, string(res.Stderr), "disk quota was exceeded")
	require.Contains(t, string(res.Stderr), "of 1.00 GiB")
	require.NotContains(t, string(res.Stdout), "survived")
	u, err := diskquota.Measure(ctx, dirs...)
	require.NoError(t, err)
	t.Logf("killed at %s (the command would have written 8 GiB)", u.Describe(diskquota.LimitOf(1)))
	require.Greater(t, u.Bytes, int64(1<<30), "killed before the quota was reached")
	require.Less(t, u.Bytes, int64(4<<30), "the quota did not stop the writer")
	st, err := os.Stat(filepath.Join(dirs[0], "f0"))
	require.NoError(t, err, "the files written stay")
	require.Equal(t, int64(64<<20), st.Size())

	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "rm -f /workspace/f* /tmp/t*"))
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "head -c 1048576 /dev/zero > /workspace/small && echo fits"))
	u, err = diskquota.Measure(ctx, dirs...)
	require.NoError(t, err)
	require.Less(t, u.Bytes, int64(16<<20))
}

// TestDiskQuotaLimitsOneFileAtOnce: the kernel stops one file at the quota
// (RLIMIT_FSIZE), before any measurement.
func TestDiskQuotaLimitsOneFileAtOnce(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "head -c 1200M /dev/zero > /tmp/big"}, TimeoutS: 300})
	require.NoError(t, err)
	// 153: SIGXFSZ (or, rarely, 137: the measurement saw the other files
	// pass the quota first).
	require.Contains(t, []int{153, 137}, res.ExitCode, "stderr=%q", res.Stderr)
	require.Contains(t, string(res.Stderr), "disk quota")
	st, err := os.Stat(filepath.Join(dirs[1], "big"))
	require.NoError(t, err)
	require.LessOrEqual(t, st.Size(), int64(1<<30))
	require.Greater(t, st.Size(), int64(512<<20))
}

// TestDiskQuotaStopsABackgroundWriter: a background process passing the
// quota is killed as a command is (exit 137), and the runtime runs commands
// after it.
func TestDiskQuotaStopsABackgroundWriter(t *testing.T) {
	rt, _ := quotaRuntime(t)
	ctx := t.Context()
	pr := rt.(sandbox.ProcessRuntime)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sh", "-c",
		`i=0; while [ $i -lt 64 ]; do head -c 67108864 /dev/zero > /tmp/b$i || exit 7; i=$((i+1)); done`}})
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Minute)
	for !info.Exited && time.Now().Before(deadline) {
		info, err = pr.WaitProcess(ctx, info.ID, 10*time.Second)
		require.NoError(t, err)
	}
	require.True(t, info.Exited)
	require.Equal(t, 137, info.ExitCode, "reason %s", info.ExitReason)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "rm /tmp/b* && echo ok"))
}
