package runtimetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RunProcesses is the conformance suite of sandbox.ProcessRuntime (the
// runtime side of background processes, docs/SECURITY.md "Process model")
// for a backend whose runtimes implement it; the Factory is Run's. Subtests: BackgroundServerOverLoopback, ReadByOffsets,
// StdinAndExit, PTYShell, SignalKillsTree, DaemonizedChildOnlySurvivesAsBackground,
// ProcessLimit, StopRecordsRuntimeStopped, ExecStreamLossless, ExecProcesses.
func RunProcesses(t *testing.T, f Factory, opts ProcessOptions) {
	s := &suite{f: f, popts: opts}
	t.Run("BackgroundServerOverLoopback", s.bgServer)
	t.Run("ReadByOffsets", s.readOffsets)
	t.Run("StdinAndExit", s.stdinExit)
	t.Run("PTYShell", s.ptyShell)
	t.Run("SignalKillsTree", s.signalTree)
	t.Run("DaemonizedChildOnlySurvivesAsBackground", s.daemonized)
	t.Run("ProcessLimit", s.processLimit)
	t.Run("StopRecordsRuntimeStopped", s.stopRecords)
	t.Run("ExecStreamLossless", s.execLossless)
	t.Run("ExecProcesses", s.execProcesses)
}

// The suite needs perl or python3 in the runtime (BackgroundServerOverLoopback).

// ProcessOptions adjust RunProcesses to what a backend declares.
type ProcessOptions struct {
	// ExecLeavesEscapees, when non-empty, is why an Exec's children that
	// leave its session (setsid) may outlive it on this backend: that half
	// of DaemonizedChildOnlySurvivesAsBackground is skipped.
	ExecLeavesEscapees string
}

func (s *suite) procRuntime(t *testing.T) (context.Context, Env, sandbox.Runtime, sandbox.ProcessRuntime) {
	t.Helper()
	ctx, env, rt := s.setup(t, nil)
	pr, ok := rt.(sandbox.ProcessRuntime)
	require.True(t, ok, "the runtime does not implement sandbox.ProcessRuntime")
	sup := pr.ProcessSupport()
	require.Equal(t, sandboxapi.MaxProcesses, sup.MaxProcesses)
	require.Positive(t, sup.BufferBytes)
	return ctx, env, rt, pr
}

// ReadUntil reads stream of process id from offset until cond holds for
// everything read or the process's stream ends, within limit; it returns
// the bytes and the last read.
func ReadUntil(t *testing.T, ctx context.Context, pr sandbox.ProcessRuntime, id, stream string, limit time.Duration, cond func([]byte) bool) ([]byte, sandbox.ProcessOutput) {
	t.Helper()
	return ReadFrom(t, ctx, pr, id, stream, 0, limit, cond)
}

// ReadFrom is ReadUntil from offset off.
func ReadFrom(t *testing.T, ctx context.Context, pr sandbox.ProcessRuntime, id, stream string, off int64, limit time.Duration, cond func([]byte) bool) ([]byte, sandbox.ProcessOutput) {
	t.Helper()
	var got []byte
	deadline := time.Now().Add(limit)
	for {
		out, err := pr.ReadProcess(ctx, id, sandbox.ProcessReadRequest{Stream: stream, Offset: off, Wait: 2 * time.Second})
		require.NoError(t, err)
		got = append(got, out.Data...)
		off = out.NextOffset
		if cond(got) || out.EOF || time.Now().After(deadline) {
			return got, out
		}
	}
}

func (s *suite) bgServer(t *testing.T) {
	ctx, _, rt, pr := s.procRuntime(t)
	// A server in the background, reached by a later exec over the
	// runtime's own loopback (network none still has one).
	script := `command -v perl >/dev/null && exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1:18923", Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "hi\n"; close $c }'
exec python3 -m http.server 18923 --bind 127.0.0.1`
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(script), Tag: "server"})
	require.NoError(t, err)
	require.NotEmpty(t, info.ID)
	require.False(t, info.Exited)
	var res sandboxapi.ExecResult
	for i := 0; i < 100; i++ {
		res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(netProbeScript, "18923"), TimeoutS: 10})
		if res.ExitCode == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	requireExit(t, res, 0)
	list, err := pr.ListProcesses(ctx)
	require.NoError(t, err)
	found := false
	for _, p := range list {
		if p.ID == info.ID {
			found = true
			require.Equal(t, "server", p.Tag)
			require.False(t, p.Exited)
		}
	}
	require.True(t, found, "the process is listed")
	require.NoError(t, pr.SignalProcess(ctx, info.ID, "KILL"))
	_, out := ReadUntil(t, ctx, pr, info.ID, sandboxapi.StreamStdout, 10*time.Second, func([]byte) bool { return false })
	require.True(t, out.Process.Exited)
	require.Equal(t, 137, out.Process.ExitCode)
}

func (s *suite) readOffsets(t *testing.T) {
	ctx, _, _, pr := s.procRuntime(t)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(`printf 'one\n'; printf 'err\n' >&2; sleep 0.5; printf 'two\n'; exit 3`)})
	require.NoError(t, err)
	start := time.Now()
	out, err := pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Offset: 0, Wait: 10 * time.Second})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "a read returns as soon as there is output")
	require.Equal(t, "one\n", string(out.Data))
	require.Equal(t, int64(4), out.NextOffset)
	got, last := ReadFrom(t, ctx, pr, info.ID, sandboxapi.StreamStdout, out.NextOffset, 10*time.Second, func(b []byte) bool { return false })
	require.Equal(t, "two\n", string(got), "a read continues from its offset")
	require.True(t, last.Process.Exited)
	require.Equal(t, 3, last.Process.ExitCode)
	require.Equal(t, sandboxapi.ExitReasonExited, last.Process.ExitReason)
	// Everything is still there for a client that starts over.
	again, err := pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Offset: 0})
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(again.Data))
	require.True(t, again.EOF)
	e, err := pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Stream: sandboxapi.StreamStderr})
	require.NoError(t, err)
	require.Equal(t, "err\n", string(e.Data), "stderr apart")

	// A buffer that wrapped reports what was dropped.
	sup := pr.ProcessSupport()
	big := sup.BufferBytes + 100000
	info, err = pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo END", big))})
	require.NoError(t, err)
	var wrapped sandbox.ProcessOutput
	for i := 0; i < 100; i++ {
		wrapped, err = pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Offset: 0, Wait: time.Second})
		require.NoError(t, err)
		if wrapped.Process.Exited && wrapped.DroppedBytes > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, int64(big+4-sup.BufferBytes), wrapped.DroppedBytes)
	require.Equal(t, wrapped.DroppedBytes, wrapped.Offset)
	require.Equal(t, int64(big+4), wrapped.Process.StdoutBytes)

	_, err = pr.ReadProcess(ctx, "proc-missing", sandbox.ProcessReadRequest{})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	_, err = pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Stream: "bogus"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{Wait: time.Hour})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

func (s *suite) stdinExit(t *testing.T) {
	ctx, env, _, pr := s.procRuntime(t)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(`read a; echo "a=$a"; cat > rest.txt; echo done`), Stdin: true})
	require.NoError(t, err)
	n, err := pr.WriteProcess(ctx, info.ID, []byte("first\nsecond\n"), false)
	require.NoError(t, err)
	require.Equal(t, 13, n)
	_, err = pr.WriteProcess(ctx, info.ID, []byte("third\n"), true)
	require.NoError(t, err)
	got, last := ReadUntil(t, ctx, pr, info.ID, "", 10*time.Second, func(b []byte) bool { return false })
	require.Equal(t, "a=first\ndone\n", string(got))
	require.Equal(t, 0, last.Process.ExitCode)
	data := readFile(t, env, "rest.txt")
	require.Equal(t, "second\nthird\n", data)
	_, err = pr.WriteProcess(ctx, info.ID, []byte("late"), false)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "stdin is closed")

	for name, spec := range map[string]sandbox.ProcessSpec{
		"empty cmd":  {},
		"bad cwd":    {Cmd: []string{"true"}, Cwd: "../x"},
		"bad env":    {Cmd: []string{"true"}, Env: map[string]string{"A=B": "x"}},
		"huge pty":   {Cmd: []string{"true"}, PTY: &sandboxapi.TerminalSize{Rows: 5000, Cols: 80}},
		"tag ctl":    {Cmd: []string{"true"}, Tag: "a\nb"},
		"NUL in cmd": {Cmd: []string{"tr\x00ue"}},
	} {
		_, err := pr.StartProcess(ctx, spec)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	nf, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"runtimetest-no-such-command"}})
	require.NoError(t, err, "a command that cannot start is an exited process, not an error")
	_, last = ReadUntil(t, ctx, pr, nf.ID, sandboxapi.StreamStderr, 5*time.Second, func([]byte) bool { return false })
	require.True(t, last.Process.Exited)
	require.Equal(t, 127, last.Process.ExitCode)
}

func (s *suite) ptyShell(t *testing.T) {
	ctx, _, _, pr := s.procRuntime(t)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(`stty size; [ -t 0 ] && echo tty-yes; read line; echo "got:$line"`), PTY: &sandboxapi.TerminalSize{Rows: 30, Cols: 100}})
	require.NoError(t, err)
	got, _ := ReadUntil(t, ctx, pr, info.ID, sandboxapi.StreamPTY, 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("tty-yes")) })
	require.Contains(t, string(got), "30 100")
	_, err = pr.WriteProcess(ctx, info.ID, []byte("hello\n"), false)
	require.NoError(t, err)
	got, _ = ReadUntil(t, ctx, pr, info.ID, sandboxapi.StreamPTY, 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("got:hello")) })
	require.Contains(t, string(got), "got:hello")

	info, err = pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(`sleep 0.3; stty size`), PTY: &sandboxapi.TerminalSize{Rows: 10, Cols: 20}})
	require.NoError(t, err)
	require.NoError(t, pr.ResizeProcess(ctx, info.ID, 50, 132))
	got, _ = ReadUntil(t, ctx, pr, info.ID, sandboxapi.StreamPTY, 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("50 132")) })
	require.Contains(t, string(got), "50 132")
	plain, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "5"}})
	require.NoError(t, err)
	require.ErrorIs(t, pr.ResizeProcess(ctx, plain.ID, 10, 10), sandboxapi.ErrCommandRejected, "no terminal")
}

// liveCount counts, with a later exec, how many of the pids written to
// file are alive.
func liveCount(t *testing.T, ctx context.Context, rt sandbox.Runtime, file string) string {
	t.Helper()
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(`n=0; for p in $(cat ` + file + `); do kill -0 "$p" 2>/dev/null && n=$((n+1)); done; echo $n`)})
	return strings.TrimSpace(string(res.Stdout))
}

// escapeScript starts two children that leave the command's session and
// group (setsid, a double fork), writes their pids to $1, and waits.
const escapeScript = `setsid sh -c 'echo $$ >> "$0"; exec sleep 300' "$1" &
(sh -c 'echo $$ >> "$0"; exec sleep 300' "$1" &) 
i=0; while [ "$(wc -l < "$1" 2>/dev/null || echo 0)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo ready; `

func (s *suite) signalTree(t *testing.T) {
	ctx, _, rt, pr := s.procRuntime(t)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(escapeScript+"exec sleep 300", "pids-sig")})
	require.NoError(t, err)
	ReadUntil(t, ctx, pr, info.ID, "", 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("ready")) })
	require.Equal(t, "2", liveCount(t, ctx, rt, "pids-sig"))
	start := time.Now()
	require.NoError(t, pr.SignalProcess(ctx, info.ID, "KILL"))
	for liveCount(t, ctx, rt, "pids-sig") != "0" && time.Since(start) < 5*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	require.Less(t, time.Since(start), time.Second+500*time.Millisecond, "KILL ends the whole tree, escaped children too, within about a second")
	require.ErrorIs(t, pr.SignalProcess(ctx, info.ID, "BOGUS"), sandboxapi.ErrInvalidArgument)
}

func (s *suite) daemonized(t *testing.T) {
	ctx, _, rt, pr := s.procRuntime(t)
	if s.popts.ExecLeavesEscapees == "" {
		// An exec whose children escape its session: they die with it.
		res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(escapeScript, "pids-exec"), TimeoutS: 30})
		requireExit(t, res, 0)
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, "0", liveCount(t, ctx, rt, "pids-exec"), "a daemonized child survived its exec")
	} else {
		t.Logf("not checked: %s", s.popts.ExecLeavesEscapees)
	}
	// The same as a background process: they outlive the leader.
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(escapeScript, "pids-bg")})
	require.NoError(t, err)
	_, last := ReadUntil(t, ctx, pr, info.ID, "", 10*time.Second, func(b []byte) bool { return false })
	require.True(t, last.Process.Exited)
	require.Equal(t, "2", liveCount(t, ctx, rt, "pids-bg"), "a background process's children outlive it")
	list, err := pr.ListProcesses(ctx)
	require.NoError(t, err)
	for _, p := range list {
		if p.ID == info.ID {
			require.True(t, p.Lingering)
		}
	}
	require.NoError(t, pr.SignalProcess(ctx, info.ID, "KILL"))
	start := time.Now()
	for liveCount(t, ctx, rt, "pids-bg") != "0" && time.Since(start) < 5*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, "0", liveCount(t, ctx, rt, "pids-bg"))
}

// processLimit: MaxProcesses background processes per runtime, counted
// over every network a runtime with a network per command runs them in
// (one supervisor per mode: before, the cap held per mode, 128-192 per
// workspace).
func (s *suite) processLimit(t *testing.T) {
	ctx, env, _, pr := s.procRuntime(t)
	perCommand := env.Provider.Capabilities().PerCommandNetwork
	network := func(i int) sandboxapi.Network {
		if perCommand && i%2 == 1 {
			return sandboxapi.NetworkNone
		}
		return ""
	}
	for i := 0; i < sandboxapi.MaxProcesses; i++ {
		_, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "60"}, Network: network(i)})
		require.NoError(t, err, "process %d", i+1)
	}
	for i := 0; i < 2; i++ {
		_, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "60"}, Network: network(i)})
		require.ErrorIs(t, err, sandboxapi.ErrResourceLimit, "process %d (network %q)", sandboxapi.MaxProcesses+1, network(i))
	}
}

func (s *suite) stopRecords(t *testing.T) {
	ctx, _, rt, pr := s.procRuntime(t)
	info, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: sh(`echo started; exec sleep 300`), Tag: "long"})
	require.NoError(t, err)
	ReadUntil(t, ctx, pr, info.ID, "", 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("started")) })
	require.NoError(t, rt.Stop(ctx))
	out, err := pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{})
	require.NoError(t, err, "a stopped runtime's processes stay readable")
	require.Equal(t, "started\n", string(out.Data))
	require.True(t, out.Process.Exited)
	require.Equal(t, sandboxapi.ExitReasonRuntimeStopped, out.Process.ExitReason)
	list, err := pr.ListProcesses(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, list)
	require.ErrorIs(t, pr.SignalProcess(ctx, info.ID, "TERM"), sandboxapi.ErrCommandRejected)
	// A new process starts the runtime again.
	info2, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"echo", "again"}})
	require.NoError(t, err)
	got, _ := ReadUntil(t, ctx, pr, info2.ID, "", 10*time.Second, func([]byte) bool { return false })
	require.Equal(t, "again\n", string(got))
	out, err = pr.ReadProcess(ctx, info.ID, sandbox.ProcessReadRequest{})
	require.NoError(t, err)
	require.Equal(t, sandboxapi.ExitReasonRuntimeStopped, out.Process.ExitReason)
}

// execLossless: 20 MiB written as fast as possible, consumed slowly, arrive
// exactly through ExecStream.
func (s *suite) execLossless(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	const size = 20 << 20
	h := sha256.New()
	var n int64
	chunks := 0
	res, err := rt.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf("head -c %d /dev/urandom | tee /tmp/lossless.bin | head -c %d", size, size)), TimeoutS: 120},
		func(c sandboxapi.ExecChunk) {
			if c.Stream != "stdout" {
				return
			}
			h.Write(c.Data)
			n += int64(len(c.Data))
			if chunks++; chunks%50 == 0 {
				time.Sleep(5 * time.Millisecond) // a slow consumer
			}
		})
	require.NoError(t, err)
	requireExit(t, res, 0)
	require.Equal(t, int64(size), n)
	require.Equal(t, int64(size), res.StdoutBytes)
	sum := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("sha256sum /tmp/lossless.bin | cut -d' ' -f1; rm -f /tmp/lossless.bin")})
	require.Equal(t, fmt.Sprintf("%x", h.Sum(nil)), strings.TrimSpace(string(sum.Stdout)), "the streamed bytes are the output")
}

// execProcesses: an exec's command as a process (ProcessSpec.Exec) runs
// once per id, gets its stdin, keeps its head, is neither listed nor
// counted toward the limit, dies with its leader, and ends cancelled or
// timed out; WaitProcess waits for its end, a Both read returns both
// streams, and its record survives Stop.
func (s *suite) execProcesses(t *testing.T) {
	ctx, env, rt, pr := s.procRuntime(t)
	execRunsOnce(t, ctx, env, pr)
	execHeadSurvivesTheWrap(t, ctx, pr)
	execBeyondTheProcessLimit(t, ctx, pr)
	execCancelAndTimeout(t, ctx, rt, pr)
	execRecordAfterStop(t, ctx, rt, pr)
	execBadIDAndMissing(t, ctx, pr)
}

// execRunsOnce: an exec process runs once whatever the starts naming it,
// its background child dies with it, its streams are apart and complete,
// and it is not listed.
func execRunsOnce(t *testing.T, ctx context.Context, env Env, pr sandbox.ProcessRuntime) {
	spec := sandbox.ProcessSpec{ID: "exec-conformance-1", Exec: true, Cmd: sh(`echo run >> runs.txt; cat; echo oops >&2; sleep 300 & echo done`), StdinData: []byte("in\n"), HeadBytes: 64}
	a, err := pr.StartProcess(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, spec.ID, a.ID)
	b, err := pr.StartProcess(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, a.ID, b.ID, "a start naming a held process returns it")
	start := time.Now()
	info, err := pr.WaitProcess(ctx, a.ID, 20*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 10*time.Second, "the background child dies with the leader")
	require.True(t, info.Exited)
	require.Zero(t, info.ExitCode)
	require.False(t, info.Lingering)
	require.Equal(t, "run\n", readFile(t, env, "runs.txt"), "the command ran once")
	out, err := pr.ReadProcess(ctx, a.ID, sandbox.ProcessReadRequest{Both: true, Peek: true})
	require.NoError(t, err)
	require.Equal(t, "in\ndone\n", string(out.Data))
	require.NotNil(t, out.Stderr)
	require.Equal(t, "oops\n", string(out.Stderr.Data))
	require.True(t, out.EOF)
	require.True(t, out.Stderr.EOF)
	list, err := pr.ListProcesses(ctx)
	require.NoError(t, err)
	for _, p := range list {
		require.NotEqual(t, a.ID, p.ID, "exec processes are not listed")
	}
}

// execHeadSurvivesTheWrap: the head survives the buffer's wrap.
func execHeadSurvivesTheWrap(t *testing.T, ctx context.Context, pr sandbox.ProcessRuntime) {
	big := pr.ProcessSupport().BufferBytes * 2
	h, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "exec-conformance-head", Exec: true, HeadBytes: 16, Cmd: sh(fmt.Sprintf("printf 'FIRST'; head -c %d /dev/zero; printf 'LAST'", big))})
	require.NoError(t, err)
	info, err := pr.WaitProcess(ctx, h.ID, 20*time.Second)
	require.NoError(t, err)
	total := info.StdoutBytes
	require.Equal(t, int64(big+9), total)
	head, err := pr.ReadProcess(ctx, h.ID, sandbox.ProcessReadRequest{MaxBytes: 16, Peek: true})
	require.NoError(t, err)
	require.Equal(t, "FIRST", string(head.Data[:5]))
	tail, err := pr.ReadProcess(ctx, h.ID, sandbox.ProcessReadRequest{Offset: total - 4, Peek: true})
	require.NoError(t, err)
	require.Equal(t, "LAST", string(tail.Data))
}

// execBeyondTheProcessLimit: execs count toward no limit: with every slot
// taken, one still starts.
func execBeyondTheProcessLimit(t *testing.T, ctx context.Context, pr sandbox.ProcessRuntime) {
	for i := 0; i < sandboxapi.MaxProcesses; i++ {
		_, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sleep", "60"}})
		require.NoError(t, err, "process %d", i+1)
	}
	x, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "exec-conformance-full", Exec: true, Cmd: []string{"echo", "still"}})
	require.NoError(t, err)
	info, err := pr.WaitProcess(ctx, x.ID, 20*time.Second)
	require.NoError(t, err)
	require.True(t, info.Exited)
}

// execCancelAndTimeout: cancel kills the whole tree at once; a timeout does too.
func execCancelAndTimeout(t *testing.T, ctx context.Context, rt sandbox.Runtime, pr sandbox.ProcessRuntime) {
	c, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "exec-conformance-cancel", Exec: true, Cmd: sh(escapeScript+"exec sleep 300", "pids-cancel")})
	require.NoError(t, err)
	ReadUntil(t, ctx, pr, c.ID, "", 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("ready")) })
	start := time.Now()
	require.NoError(t, pr.CancelProcess(ctx, c.ID))
	info, err := pr.WaitProcess(ctx, c.ID, 5*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second+500*time.Millisecond, "cancel ends the tree within about a second")
	require.True(t, info.Exited)
	require.Equal(t, sandboxapi.ExitReasonCancelled, info.ExitReason)
	require.Equal(t, "0", liveCount(t, ctx, rt, "pids-cancel"), "no survivor")
	to, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "exec-conformance-timeout", Exec: true, Timeout: 300 * time.Millisecond, Cmd: []string{"sleep", "300"}})
	require.NoError(t, err)
	info, err = pr.WaitProcess(ctx, to.ID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.ExitReasonTimeout, info.ExitReason)
}

// execRecordAfterStop: a stopped runtime keeps the record: the same id
// returns it, ended.
func execRecordAfterStop(t *testing.T, ctx context.Context, rt sandbox.Runtime, pr sandbox.ProcessRuntime) {
	r, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "exec-conformance-stop", Exec: true, Cmd: sh("echo before; exec sleep 300")})
	require.NoError(t, err)
	ReadUntil(t, ctx, pr, r.ID, "", 10*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("before")) })
	require.NoError(t, rt.Stop(ctx))
	again, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: r.ID, Exec: true, Cmd: sh("echo before; exec sleep 300")})
	require.NoError(t, err)
	require.True(t, again.Exited, "the record of the stopped runtime, not a new run")
	require.Equal(t, sandboxapi.ExitReasonRuntimeStopped, again.ExitReason)
	info, err := pr.WaitProcess(ctx, r.ID, 0)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.ExitReasonRuntimeStopped, info.ExitReason)
}

// execBadIDAndMissing: a malformed id is refused, an unknown one is not found.
func execBadIDAndMissing(t *testing.T, ctx context.Context, pr sandbox.ProcessRuntime) {
	_, err := pr.StartProcess(ctx, sandbox.ProcessSpec{ID: "bad/id", Exec: true, Cmd: []string{"true"}})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = pr.WaitProcess(ctx, "exec-conformance-missing", 0)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
}

func readFile(t *testing.T, env Env, name string) string {
	t.Helper()
	b, err := osReadFile(env.HostDir + "/" + name)
	require.NoError(t, err)
	return string(b)
}
