package bwrap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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

// TestDiskQuotaHoldsAgainstShortCommands: commands each too short for the
// measurement's pace cannot pass the quota one after another: once the
// runtime is over it, the next commands (and background processes) start
// unable to make any file larger, with a notice; removing files works, and
// then writing does again.
func TestDiskQuotaHoldsAgainstShortCommands(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	blocked := 0
	for i := range 8 {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", fmt.Sprintf("head -c 314572800 /dev/zero > /tmp/s%d", i)}, TimeoutS: 120})
		require.NoError(t, err)
		if strings.Contains(string(res.Stderr), "over its disk quota") {
			blocked++
			require.NotEqual(t, 0, res.ExitCode, "a blocked command cannot write: %q", res.Stderr)
		}
	}
	u, err := diskquota.Measure(ctx, dirs...)
	require.NoError(t, err)
	t.Logf("8 commands of 300 MiB each left %s", u.Describe(diskquota.LimitOf(1)))
	require.GreaterOrEqual(t, blocked, 3, "the commands after the quota was passed")
	require.Less(t, u.Bytes, int64(1<<30+400<<20), "at most one command's writes past the quota")

	pr := rt.(sandbox.ProcessRuntime)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sh", "-c", "printf x > /tmp/bg"}})
	require.NoError(t, err)
	for !info.Exited {
		info, err = pr.WaitProcess(ctx, info.ID, 10*time.Second)
		require.NoError(t, err)
	}
	require.NotEqual(t, 0, info.ExitCode, "a background process started over the quota cannot write either")

	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "rm /tmp/s* && echo removed"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%q", res.Stderr)
	require.Equal(t, "removed\n", string(res.Stdout))
	res = runtimetest.Sh(t, ctx, rt, "printf again > /tmp/after && cat /tmp/after")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "again", string(res.Stdout))
	require.NotContains(t, string(res.Stderr), "quota")
}

// TestDiskQuotaRefusesFallocate: fallocate, which reserves gigabytes in a
// moment (past the file size limit with --keep-size), fails with
// EOPNOTSUPP in every mode but punching a hole; glibc's posix_fallocate
// falls back to writing.
func TestDiskQuotaRefusesFallocate(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	res := runtimetest.Sh(t, ctx, rt, `
		fallocate -l 2G /tmp/a 2>&1; echo "plain $?"
		fallocate --keep-size -l 2G /tmp/b 2>&1; echo "keep-size $?"
		fallocate --zero-range -o 0 -l 2G /tmp/b 2>&1; echo "zero-range $?"
		head -c 1048576 /dev/zero > /tmp/h && fallocate --punch-hole -o 0 -l 524288 /tmp/h; echo "punch-hole $?"
		python3 -c 'import os; fd = os.open("/tmp/p", os.O_CREAT | os.O_WRONLY); os.posix_fallocate(fd, 0, 1 << 20); print("posix_fallocate", os.fstat(fd).st_size)'`)
	runtimetest.RequireOK(t, res)
	out := string(res.Stdout)
	for _, mode := range []string{"plain", "keep-size", "zero-range"} {
		require.Contains(t, out, mode+" 1\n", out)
	}
	require.Contains(t, out, "Operation not supported", out)
	require.Contains(t, out, "punch-hole 0\n", out)
	require.Contains(t, out, "posix_fallocate 1048576\n", out)
	u, err := diskquota.Measure(ctx, dirs...)
	require.NoError(t, err)
	require.Less(t, u.Bytes, int64(8<<20), "nothing was reserved")
}

// TestDiskQuotaCountsAnUnmeasurableTreeAsOver: a tree the measurement
// refuses (deeper than diskquota.MaxDepth, far past PATH_MAX) counts as
// over the quota: commands start unable to grow files, with a notice that
// names the cause in the sandbox's paths, until the tree is removed.
func TestDiskQuotaCountsAnUnmeasurableTreeAsOver(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"python3", "-c", fmt.Sprintf(
		`import os
os.chdir("/workspace")
for _ in range(%d):
    os.mkdir("d")
    os.chdir("d")`, diskquota.MaxDepth+100)}, TimeoutS: 300})
	require.NoError(t, err)
	require.Contains(t, []int{0, 137}, res.ExitCode, "%q", res.Stderr)
	_, err = diskquota.Measure(ctx, dirs...)
	require.ErrorContains(t, err, "deeper than")

	// Within a measurement interval of the tree's making, commands start
	// blocked (the shell's redirection dies of SIGXFSZ: 153).
	// (the first command may be killed instead, at the first failed
	// measurement, if it ran before it)
	res2 := probeWrite(t, rt, func(r sandboxapi.ExecResult) bool {
		return strings.Contains(string(r.Stderr), "over its disk quota (its use cannot be measured")
	}, "blocked: the tree cannot be measured")
	require.Equal(t, "wrote 153\n", string(res2.Stdout), "%q", res2.Stderr)
	require.Contains(t, string(res2.Stderr), "/workspace/d/d/")
	require.NotContains(t, string(res2.Stderr), dirs[0], "no host path")
	_, err = os.Stat(filepath.Join(dirs[1], "x"))
	require.NoError(t, err, "creating an empty file works")

	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "rm -rf /workspace/d"))
	// Unblocked at the next measurement: the one after the rm, which a
	// command started at once may not wait for on a loaded host.
	require.Eventually(t, func() bool {
		res = runtimetest.Sh(t, ctx, rt, "printf x > /tmp/x && echo wrote")
		return res.ExitCode == 0 && !strings.Contains(string(res.Stderr), "quota")
	}, 15*time.Second, 250*time.Millisecond, "writing again once the tree is gone: %q", res.Stderr)
}

// TestSharedMemoryIsSmall: /dev/shm, a tmpfs the disk quota does not
// measure, holds ShmBytes and no more, for everyone in the sandbox; /dev
// itself takes no file, its devices and terminals work.
func TestSharedMemoryIsSmall(t *testing.T) {
	rt, _ := quotaRuntime(t)
	res := runtimetest.Sh(t, t.Context(), rt, `stat -c %a /dev/shm; head -c 100M /dev/zero > /dev/shm/x; echo "rc $?"; stat -c %s /dev/shm/x
		(echo big > /dev/big) 2>/dev/null; echo "dev $?"; echo z > /dev/null && echo null
		python3 -c 'import os, pty; m, s = pty.openpty(); os.write(s, b"hi"); print("pty", os.read(m, 2).decode())'`)
	runtimetest.RequireOK(t, res)
	require.Equal(t, fmt.Sprintf("1777\nrc 1\n%d\ndev 2\nnull\npty hi\n", bwrap.ShmBytes), string(res.Stdout), "%q", res.Stderr)
}

// TestDiskQuotaCountsHolesAndNames: a sparse file counts its length (its
// holes fill through mmap, which no file size limit checks), and every
// hard link counts as a name: neither is a way past the quota.
func TestDiskQuotaCountsHolesAndNames(t *testing.T) {
	rt, dirs := quotaRuntime(t)
	ctx := t.Context()
	// (each file stays within the file size limit: the quota)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "truncate -s 900M /workspace/sparse1 /workspace/sparse2"))
	res := probeWrite(t, rt, func(r sandboxapi.ExecResult) bool {
		return strings.Contains(string(r.Stderr), "over its disk quota (1.76 GiB of 1.00 GiB")
	}, "sparse files of 1.76 GiB")
	require.Equal(t, "wrote 153\n", string(res.Stdout))
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "rm /workspace/sparse1 /workspace/sparse2"))

	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"python3", "-c", `
import os
os.mkdir("/tmp/links")
for j in range(3):  # ext4 takes 65,000 links per file
    open("/tmp/links/f%d" % j, "w").close()
    for i in range(47000):
        os.link("/tmp/links/f%d" % j, "/tmp/links/l%d-%d" % (j, i))`}, TimeoutS: 120})
	require.NoError(t, err)
	require.Contains(t, []int{0, 137}, res.ExitCode, "%q", res.Stderr)
	u, err := diskquota.Measure(ctx, dirs...)
	require.NoError(t, err)
	require.Greater(t, u.Files, diskquota.LimitOf(1).Files, "every link is a name")
	res = probeWrite(t, rt, func(r sandboxapi.ExecResult) bool {
		return strings.Contains(string(r.Stderr), "over its disk quota (")
	}, "141,000 hard links")
	require.Equal(t, "wrote 153\n", string(res.Stdout))
}

// TestDiskQuotaKeepsTheHostsReserve: a file deleted while open is found by
// no walk; the host's reserve of free space catches it: once the file
// system has less than Options.DiskReserve free, the runtime counts as
// over its quota, so its processes — the one holding the file among them —
// are killed and the space comes back.
func TestDiskQuotaKeepsTheHostsReserve(t *testing.T) {
	scratch := scratchDir(t)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(scratch, &st))
	free := int64(st.Bavail) * st.Bsize
	if free < 4<<30 {
		t.Skipf("%d MiB free: too little to take 900 MiB of it", free>>20)
	}
	ctx, _, _, rt := setup(t, bwrap.Options{ScratchDir: scratch, DiskReserve: free - 600<<20}, func(s *sandbox.RuntimeSpec) {
		s.Resources = &sandbox.ResourceHints{DiskGB: 1}
	})
	pr := rt.(sandbox.ProcessRuntime)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"python3", "-c", `
import os, time
fd = os.open("/tmp", os.O_TMPFILE | os.O_WRONLY)
block = b"\0" * (1 << 20)
for _ in range(900):
    os.write(fd, block)
os.fsync(fd)
time.sleep(600)`}})
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Minute)
	for !info.Exited && time.Now().Before(deadline) {
		info, err = pr.WaitProcess(ctx, info.ID, 10*time.Second)
		require.NoError(t, err)
	}
	require.True(t, info.Exited, "the holder of the deleted file was never stopped")
	require.Equal(t, 137, info.ExitCode, "reason %s", info.ExitReason)
	require.Eventually(t, func() bool {
		require.NoError(t, unix.Statfs(scratch, &st))
		return int64(st.Bavail)*st.Bsize > free-300<<20
	}, 30*time.Second, 200*time.Millisecond, "the deleted file's space came back")
}

// TestDiskQuotaSharedCacheApart: a dependency cache two runtimes share
// (Mount.Shared) counts toward neither's own quota, so one's cache growth
// does not stop the other's commands; it has a quota of its own, past
// which the writer is stopped with a notice naming the cache, and the
// sharers' commands start unable to grow files until it shrinks.
func TestDiskQuotaSharedCacheApart(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, bwrap.Options{ScratchDir: scratchDir(t), SharedDiskGB: 1})
	cache := filepath.Join(t.TempDir(), "cache")
	openUp(t, cache)
	mk := func() sandbox.Runtime {
		spec := specFor(t.TempDir())
		spec.Resources = &sandbox.ResourceHints{DiskGB: 1}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: cache, Target: cache, Writable: true, Shared: true})
		spec.Env = map[string]string{"CACHE": cache}
		rt, err := p.Create(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		return rt
	}
	a, b := mk(), mk()
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, b, "head -c 700M /dev/zero > /tmp/own"))
	bg, err := b.(sandbox.ProcessRuntime).StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "600"}})
	require.NoError(t, err)

	// 600 MiB into the cache: B's own 700 MiB and the cache together pass
	// B's quota, but the cache is not B's: its process runs on.
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, a, `head -c 600M /dev/zero > "$CACHE/one"`))
	time.Sleep(2 * diskquota.MaxInterval)
	info, err := b.(sandbox.ProcessRuntime).WaitProcess(ctx, bg.ID, 0)
	require.NoError(t, err)
	require.False(t, info.Exited, "another workspace's cache growth stopped B: exit %d", info.ExitCode)
	res := runtimetest.Sh(t, ctx, b, "printf x > /tmp/small && echo wrote")
	runtimetest.RequireOK(t, res)
	require.NotContains(t, string(res.Stderr), "quota")

	// 600 MiB more: the cache passes its own quota.
	res, err = a.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `head -c 600M /dev/zero > "$CACHE/two"; sleep 5`}, TimeoutS: 60})
	require.NoError(t, err)
	require.Equal(t, 137, res.ExitCode, "%q", res.Stderr)
	require.Contains(t, string(res.Stderr), "the dependency cache, which other workspaces share, holds 1.")
	res = probeWrite(t, b, func(r sandboxapi.ExecResult) bool {
		return strings.Contains(string(r.Stderr), "over its disk quota (") && strings.Contains(string(r.Stderr), "dependency cache")
	}, "B's commands start blocked while the cache is over its quota")
	require.Equal(t, "wrote 153\n", string(res.Stdout))
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, a, `rm "$CACHE/two"`))
	probeWrite(t, b, func(r sandboxapi.ExecResult) bool { return string(r.Stdout) == "wrote 0\n" }, "writing again once the cache shrank")
}

// probeWrite runs a command that writes one byte to /tmp (its stdout
// "wrote <exit status>": 153 when the write died of SIGXFSZ) until done
// says the result is the one awaited, for at most 5 s (the watcher's next
// look), and returns that result.
func probeWrite(t *testing.T, rt sandbox.Runtime, done func(sandboxapi.ExecResult) bool, what string) sandboxapi.ExecResult {
	t.Helper()
	var res sandboxapi.ExecResult
	require.Eventually(t, func() bool {
		res = runtimetest.Sh(t, t.Context(), rt, "sh -c 'printf x > /tmp/x'; echo wrote $?")
		return done(res)
	}, 5*time.Second, 50*time.Millisecond, what)
	return res
}
