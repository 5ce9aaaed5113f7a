package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Background processes, cancel and lossless streaming through the session
// (docs/API.md "Processes", "Cancelling a command", "Streaming exec
// output"), on the test host's runtime (SANDBOX_RUNTIME_PROVIDER, unset =
// bubblewrap when usable).

func sh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

// perlServer listens on 127.0.0.1:$1 and answers every connection "hi".
const perlServer = `exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1:$ARGV[0]", Listen => 5, ReuseAddr => 1) or die "listen: $!"; print "listening\n"; $| = 1; while ($c = $s->accept) { print $c "hi\n"; close $c }' "$1"`

// perlClient connects to 127.0.0.1:$1 and prints what it reads.
const perlClient = `exec perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$ARGV[0]") or exit 3; print scalar <$c>' "$1"`

// readUntil reads a process's stream through the stream workflow until
// cond holds for everything read, or it ends, within limit.
func readUntil(t *testing.T, ctx context.Context, s *sandboxclient.Session, id string, limit time.Duration, cond func([]byte) bool) ([]byte, sandboxapi.ProcessReadResult) {
	t.Helper()
	var got []byte
	var off int64
	deadline := time.Now().Add(limit)
	for {
		r, err := s.StreamRead(ctx, sandboxapi.ProcessReadInput{ProcessID: id, Offset: off, WaitMS: 2000})
		require.NoError(t, err)
		got = append(got, r.Data...)
		off = r.NextOffset
		if cond(got) || r.EOF || time.Now().After(deadline) {
			return got, r
		}
	}
}

// TestProcessServerReachedFromALaterExec: a server started in the
// background is reached by a later exec over the runtime's loopback; it is
// listed while it runs, and KILL ends it (exit 137, readable afterwards).
func TestProcessServerReachedFromALaterExec(t *testing.T) {
	h := startHost(t, "proc-server")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	start, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: sh(perlServer, "18931"), Tag: "web"})
	require.NoError(t, err)
	require.NotEmpty(t, start.ProcessID)
	got, _ := readUntil(t, ctx, s, start.ProcessID, 30*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("listening")) })
	require.Contains(t, string(got), "listening")
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(perlClient, "18931"), TimeoutS: 20})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	assert.Equal(t, "hi\n", string(res.Stdout), "the exec reached the background server over loopback")

	list, err := s.ProcessList(ctx)
	require.NoError(t, err)
	var found *sandboxapi.ProcessInfo
	for i, p := range list.Processes {
		if p.ID == start.ProcessID {
			found = &list.Processes[i]
		}
	}
	require.NotNil(t, found, "listed: %+v", list.Processes)
	assert.Equal(t, "web", found.Tag)
	assert.False(t, found.Exited)
	assert.True(t, list.Support.PTY)
	assert.Equal(t, sandboxapi.MaxProcesses, list.Support.MaxProcesses)
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, d.LiveProcesses)

	require.NoError(t, s.ProcessSignal(ctx, start.ProcessID, "KILL"))
	_, last := readUntil(t, ctx, s, start.ProcessID, 20*time.Second, func([]byte) bool { return false })
	require.True(t, last.EOF)
	assert.True(t, last.Exited)
	assert.Equal(t, 137, last.ExitCode)
	assert.Equal(t, sandboxapi.ExitReasonSignaled, last.ExitReason)
	// The session's own read (process_read) gives the same.
	r, err := s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: start.ProcessID})
	require.NoError(t, err)
	assert.Equal(t, "listening\n", string(r.Data))
	assert.True(t, r.EOF)
	_, err = s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: "proc-does-not-exist"})
	assert.True(t, sandboxapi.IsNotFound(err), "%v", err)
}

// TestProcessPTYShellAnswers: a shell on a terminal reads a line and
// answers; the terminal can be resized.
func TestProcessPTYShellAnswers(t *testing.T) {
	h := startHost(t, "proc-pty")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	start, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: sh(`[ -t 0 ] && echo on-a-tty; printf 'name? '; read n; echo "hello $n"; stty size`), PTY: &sandboxapi.TerminalSize{Rows: 24, Cols: 80}})
	require.NoError(t, err)
	got, _ := readUntil(t, ctx, s, start.ProcessID, 30*time.Second, func(b []byte) bool { return bytes.Contains(b, []byte("name?")) })
	require.Contains(t, string(got), "on-a-tty")
	require.NoError(t, s.ProcessResize(ctx, start.ProcessID, 40, 120))
	w, err := s.ProcessWrite(ctx, start.ProcessID, []byte("bob\n"), false)
	require.NoError(t, err)
	assert.Equal(t, 4, w.Written)
	got, last := readUntil(t, ctx, s, start.ProcessID, 30*time.Second, func([]byte) bool { return false })
	assert.Contains(t, string(got), "hello bob")
	assert.Contains(t, string(got), "40 120", "the resized terminal")
	require.True(t, last.EOF)
	assert.Equal(t, 0, last.ExitCode)
}

// TestProcessLimitAndHibernation: the 65th live process is
// SandboxResourceLimit; hibernation stops them all (exit_reason
// runtime_stopped, readable afterwards), and a stopped process refuses input.
func TestProcessLimitAndHibernation(t *testing.T) {
	h := startHost(t, "proc-limit")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	var first string
	for i := 0; i < sandboxapi.MaxProcesses; i++ {
		r, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: sh(`echo up; exec sleep 600`), Stdin: true})
		require.NoError(t, err, "process %d", i+1)
		if first == "" {
			first = r.ProcessID
		}
	}
	_, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: []string{"sleep", "600"}})
	require.Error(t, err)
	assert.True(t, sandboxapi.IsResourceLimit(err), "the 65th: %v", err)
	// An exec still runs: commands count toward no process limit.
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"echo", "still"}})
	require.NoError(t, err)
	assert.Equal(t, "still\n", string(res.Stdout))

	_, err = s.Hibernate(ctx)
	require.NoError(t, err)
	r, err := s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: first})
	require.NoError(t, err)
	assert.Equal(t, "up\n", string(r.Data))
	assert.True(t, r.Exited)
	assert.Equal(t, sandboxapi.ExitReasonRuntimeStopped, r.ExitReason)
	assert.Equal(t, 137, r.ExitCode)
	_, err = s.ProcessWrite(ctx, first, []byte("x"), false)
	assert.True(t, sandboxapi.IsCommandRejected(err), "%v", err)
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Zero(t, d.LiveProcesses)
}

// liveSleeps returns the host's processes running `sleep <marker>` (a
// container's processes are in the host's process table too).
func liveSleeps(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if string(cmd) == "sleep\x00"+marker+"\x00" {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// treeScript starts two sleeps with marker (one escaping the session) and
// writes "started" to the file started.
const treeScript = `setsid sleep "$1" & sleep "$1" & echo started > started; wait`

// TestExecCancel: cancel names a running exec by its update id; its whole
// tree is gone within a second, it returns cancelled (130), and the write
// queued behind it then runs. Cancelling the context of Session.Exec does
// the same (Temporal cannot cancel an update).
func TestExecCancel(t *testing.T) {
	h := startHost(t, "cancel")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	marker := strconv.Itoa(3000 + int(time.Now().UnixNano()%1000))
	started := filepath.Join(hd.LocalPath, "started")

	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	execDone := make(chan outcome, 1)
	go func() {
		r, err := s.Exec(sandboxclient.WithUpdateID(ctx, "cancel-me"), sandboxapi.ExecRequest{Cmd: sh(treeScript, marker)})
		execDone <- outcome{r, err}
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, time.Minute, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(liveSleeps(marker)) == 2 }, 10*time.Second, 20*time.Millisecond)
	writeDone := make(chan error, 1)
	go func() { writeDone <- s.WriteFile(ctx, "after.txt", []byte("queued"), 0) }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-writeDone:
		t.Fatalf("the write did not wait for the exec: %v", err)
	default:
	}
	at := time.Now()
	c, err := s.Cancel(ctx, "cancel-me")
	require.NoError(t, err)
	took := time.Since(at)
	assert.Equal(t, sandboxapi.CancelRunning, c.State)
	assert.True(t, c.Cancelled)
	assert.Empty(t, liveSleeps(marker), "the whole tree is gone when cancel returns")
	assert.Less(t, took, 3*time.Second, "cancel returns about a second after the kill")
	o := <-execDone
	require.NoError(t, o.err)
	assert.True(t, o.res.Cancelled)
	assert.Equal(t, 130, o.res.ExitCode)
	require.NoError(t, <-writeDone, "the queued write ran")
	data, err := os.ReadFile(filepath.Join(hd.LocalPath, "after.txt"))
	require.NoError(t, err)
	assert.Equal(t, "queued", string(data))

	// The context of Session.Exec.
	require.NoError(t, os.Remove(started))
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			if _, err := os.Stat(started); err == nil && len(liveSleeps(marker)) == 2 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res, err := s.Exec(cctx, sandboxapi.ExecRequest{Cmd: sh(treeScript, marker)})
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, res.Cancelled)
	assert.Equal(t, 130, res.ExitCode)
	assert.Empty(t, liveSleeps(marker), "no survivor")

	// Release during a command cancels it rather than waiting.
	require.NoError(t, os.Remove(started))
	go func() {
		r, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(treeScript, marker)})
		execDone <- outcome{r, err}
	}()
	require.Eventually(t, func() bool { return len(liveSleeps(marker)) == 2 }, time.Minute, 20*time.Millisecond)
	at = time.Now()
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	assert.Less(t, time.Since(at), 10*time.Second, "release does not wait for the command")
	o = <-execDone
	require.NoError(t, o.err)
	assert.True(t, o.res.Cancelled)
	assert.Empty(t, liveSleeps(marker))
}

// TestExecWithUpdateIDCancelledByItsContext: an exec sent with
// WithUpdateID whose context ends is cancelled like any other (the cancel
// update has an id of its own: sent with the exec's, Temporal would only
// return the exec's outcome and the command would run on).
func TestExecWithUpdateIDCancelledByItsContext(t *testing.T) {
	h := startHost(t, "cancel-ctx-id")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	marker := strconv.Itoa(5000 + int(time.Now().UnixNano()%1000))
	started := filepath.Join(hd.LocalPath, "started")
	cctx, cancel := context.WithCancel(sandboxclient.WithUpdateID(ctx, "ctx-cancel-me"))
	go func() {
		for {
			if _, err := os.Stat(started); err == nil && len(liveSleeps(marker)) == 2 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res, err := s.Exec(cctx, sandboxapi.ExecRequest{Cmd: sh(treeScript, marker)})
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, res.Cancelled)
	assert.Equal(t, 130, res.ExitCode)
	assert.Empty(t, liveSleeps(marker), "the whole tree is gone")
	// The session goes on: the next command runs.
	out, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("echo after")})
	require.NoError(t, err)
	assert.Equal(t, "after\n", string(out.Stdout))
}

// TestExecStreamIsLossless: 20 MiB written as fast as possible arrive
// through ExecStream exactly (every byte once, in order), stderr apart.
func TestExecStreamIsLossless(t *testing.T) {
	h := startHost(t, "stream-20m")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 5*time.Minute)
	const size = 20 << 20
	var mu sync.Mutex
	out, errs := sha256.New(), &bytes.Buffer{}
	var n int64
	res, err := s.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf("echo begin >&2; head -c %d /dev/urandom | tee out.bin; echo end >&2", size)), TimeoutS: 300},
		func(c sandboxapi.ExecChunk) {
			mu.Lock()
			defer mu.Unlock()
			if c.Stream == "stderr" {
				errs.Write(c.Data)
				return
			}
			out.Write(c.Data)
			n += int64(len(c.Data))
		})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	assert.Equal(t, int64(size), n, "every byte, once")
	assert.Equal(t, int64(size), res.StdoutBytes)
	assert.True(t, res.Truncated, "the result itself stays capped")
	assert.Equal(t, "begin\nend\n", errs.String())
	sum, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("sha256sum out.bin | cut -d' ' -f1; rm -f out.bin")})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%x", out.Sum(nil)), strings.TrimSpace(string(sum.Stdout)), "the streamed bytes are the output")
}

// TestExecCancelKeepOutput: an exec with keep_output runs its command in
// the exec activity, not as a process (docs/API.md "Kept output"); cancel
// still kills its whole tree and it returns cancelled (130).
func TestExecCancelKeepOutput(t *testing.T) {
	h := startHost(t, "cancel-keep")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	marker := strconv.Itoa(5000 + int(time.Now().UnixNano()%1000))
	started := filepath.Join(hd.LocalPath, "started")
	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	execDone := make(chan outcome, 1)
	go func() {
		r, err := s.Exec(sandboxclient.WithUpdateID(ctx, "cancel-kept"), sandboxapi.ExecRequest{Cmd: sh(treeScript, marker), KeepOutput: true})
		execDone <- outcome{r, err}
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, time.Minute, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(liveSleeps(marker)) == 2 }, 10*time.Second, 20*time.Millisecond)
	c, err := s.Cancel(ctx, "cancel-kept")
	require.NoError(t, err)
	assert.True(t, c.Cancelled)
	o := <-execDone
	require.NoError(t, o.err)
	assert.True(t, o.res.Cancelled)
	assert.Equal(t, 130, o.res.ExitCode)
	assert.Eventually(t, func() bool { return len(liveSleeps(marker)) == 0 }, 2*time.Second, 20*time.Millisecond, "no survivor of the tree")
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"echo", "next"}})
	require.NoError(t, err)
	assert.Equal(t, "next\n", string(res.Stdout))
}

// TestProcessListAfterHibernateListsEachProcessOnce: after hibernation,
// process_list shows every process the runtime ran — running, exited and
// stopped — each exactly once (it showed one twice and dropped another).
func TestProcessListAfterHibernateListsEachProcessOnce(t *testing.T) {
	h := startHost(t, "proc-list-hib")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	var ids []string
	for _, c := range []string{`echo done`, `exec sleep 600`, `exec sleep 601`} {
		r, err := s.ProcessStart(ctx, sandboxapi.ProcessStartInput{Cmd: sh(c)})
		require.NoError(t, err)
		ids = append(ids, r.ProcessID)
	}
	_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	before, err := s.ProcessList(ctx)
	require.NoError(t, err)
	_, err = s.Hibernate(ctx)
	require.NoError(t, err)
	after, err := s.ProcessList(ctx)
	require.NoError(t, err)
	for name, list := range map[string]sandboxapi.ProcessListResult{"before": before, "after": after} {
		seen := map[string]int{}
		for _, p := range list.Processes {
			seen[p.ID]++
		}
		for _, id := range ids {
			assert.Equal(t, 1, seen[id], "%s hibernation: process %s listed %d times in %+v", name, id, seen[id], list.Processes)
		}
	}
	for _, p := range after.Processes {
		if slices.Contains(ids, p.ID) {
			assert.True(t, p.Exited, "%s still running after hibernation", p.ID)
		}
	}
}
