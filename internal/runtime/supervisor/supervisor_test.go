package supervisor_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
)

// serve starts a supervisor on the host (as the local runtime does) and
// returns a client.
func serve(t *testing.T) (*supervisor.Client, *exec.Cmd) { return serveTB(t) }

func serveTB(t testing.TB) (*supervisor.Client, *exec.Cmd) {
	t.Helper()
	bin := supervisortest.Binary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := supervisor.Listen(sock)
	require.NoError(t, err)
	defer ln.Close()
	cmd := exec.Command(bin, "serve", "--ctl-fd", "3", "--runtime", "t")
	cmd.ExtraFiles = []*os.File{ln}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	c := supervisor.NewClient(sock)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Shutdown(ctx, time.Second)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the supervisor did not exit after shutdown (%v)", err)
		}
	})
	return c, cmd
}

func env() []string { return []string{"PATH=/usr/bin:/bin"} }

func TestRunAndBackground(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	h, err := c.Hello(ctx)
	require.NoError(t, err)
	require.Equal(t, supervisor.Version, h.Version)

	var out [2]bytes.Buffer
	info, err := c.Run(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Env: env(), Dir: "/"}, func(i int, d []byte) { out[i].Write(d) })
	require.NoError(t, err)
	require.Equal(t, 3, info.ExitCode)
	require.Equal(t, "out\n", out[0].String())
	require.Equal(t, "err\n", out[1].String())

	info, err = c.Run(ctx, supervisor.Spec{Argv: []string{"no-such-cmd-xyz"}, Env: env(), Dir: "/"}, func(i int, d []byte) { out[i].Write(d) })
	require.NoError(t, err)
	require.Equal(t, 127, info.ExitCode)

	// 20 MiB as fast as possible, read slowly: every byte arrives once, in order.
	var n int64
	var sum bytes.Buffer
	info, err = c.Run(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "head -c 20971520 /dev/urandom | tee /dev/stderr | md5sum >&2"}, Env: env(), Dir: "/"}, func(i int, d []byte) {
		if i == 0 {
			n += int64(len(d))
		} else {
			sum.Write(d)
		}
	})
	require.NoError(t, err)
	require.Zero(t, info.ExitCode)
	require.Equal(t, int64(0), n)
	require.Greater(t, sum.Len(), 20<<20)

	bg, _, err := c.Start(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "read x; echo got $x; sleep 0.2; exit 7"}, Env: env(), Dir: "/", OpenStdin: true, Tag: "t1"})
	require.NoError(t, err)
	_, err = c.Write(ctx, bg.ID, []byte("hello\n"), true)
	require.NoError(t, err)
	var got []byte
	off := [2]int64{}
	for {
		r, err := c.Read(ctx, bg.ID, off, 0, 5*time.Second, false)
		require.NoError(t, err)
		got = append(got, r.Data[0]...)
		off[0] += int64(len(r.Data[0]))
		if r.Info.Exited && r.Chunks[0].EOF {
			require.Equal(t, 7, r.Info.ExitCode)
			break
		}
	}
	require.Equal(t, "got hello\n", string(got))
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "t1", list[0].Tag)
	require.True(t, strings.HasPrefix(list[0].ID, "proc-"))
}

// TestExecProcesses: an exec's process (Spec.Exec) is started once per id,
// keeps its head past the buffer, waits for its reader when lossless, is
// not listed, and ends as cancelled or timed out.
func TestExecProcesses(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()

	// Started once per id: a second start returns the first process.
	spec := supervisor.Spec{ID: "exec-once", Exec: true, Argv: []string{"sh", "-c", "echo run >> count; cat; echo done"}, Env: env(), Dir: t.TempDir(), Stdin: []byte("in\n")}
	a, existing, err := c.Start(ctx, spec)
	require.NoError(t, err)
	require.False(t, existing)
	b, existing, err := c.Start(ctx, spec)
	require.NoError(t, err)
	require.True(t, existing)
	require.Equal(t, a.ID, b.ID)
	info, err := c.Wait(ctx, a.ID, 10*time.Second)
	require.NoError(t, err)
	require.True(t, info.Exited)
	require.Zero(t, info.ExitCode)
	count, err := os.ReadFile(filepath.Join(spec.Dir, "count"))
	require.NoError(t, err)
	require.Equal(t, "run\n", string(count), "the command ran once")
	r, err := c.Read(ctx, a.ID, [2]int64{0, 0}, 0, 0, true)
	require.NoError(t, err)
	require.Equal(t, "in\ndone\n", string(r.Data[0]), "stdin data reached the command")
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "exec processes are not listed")

	// The head stays when the buffer (1 MiB) wraps: 3 MiB of output.
	h, _, err := c.Start(ctx, supervisor.Spec{ID: "exec-head", Exec: true, HeadBytes: 100, Argv: []string{"sh", "-c", "printf 'HEAD'; head -c 3145728 /dev/zero; printf 'TAIL'"}, Env: env(), Dir: "/"})
	require.NoError(t, err)
	info, err = c.Wait(ctx, h.ID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(3145736), info.Totals[0])
	r, err = c.Read(ctx, h.ID, [2]int64{0, supervisor.NoStream}, 100, 0, true)
	require.NoError(t, err)
	require.Equal(t, int64(0), r.Chunks[0].Offset)
	require.Equal(t, "HEAD", string(r.Data[0][:4]))
	require.Len(t, r.Data[0], 100)
	r, err = c.Read(ctx, h.ID, [2]int64{100, supervisor.NoStream}, 100, 0, true)
	require.NoError(t, err)
	require.Equal(t, info.Totals[0]-(1<<20), r.Chunks[0].Offset, "past the head, bytes the buffer dropped are skipped")
	require.Equal(t, r.Chunks[0].Offset-100, r.Chunks[0].Dropped)
	r, err = c.Read(ctx, h.ID, [2]int64{info.Totals[0] - 4, supervisor.NoStream}, 100, 0, true)
	require.NoError(t, err)
	require.Equal(t, "TAIL", string(r.Data[0]))
	require.True(t, r.Chunks[0].EOF)

	// Lossless: 5 MiB through a 1 MiB buffer, read slowly, arrive whole.
	l, _, err := c.Start(ctx, supervisor.Spec{ID: "exec-lossless", Exec: true, Lossless: true, Argv: []string{"sh", "-c", "head -c 5242880 /dev/urandom | tee /dev/stderr | md5sum"}, Env: env(), Dir: "/"})
	require.NoError(t, err)
	var off [2]int64
	var data bytes.Buffer
	var sum string
	for {
		r, err := c.Read(ctx, l.ID, off, 256<<10, 5*time.Second, false)
		require.NoError(t, err)
		require.Zero(t, r.Chunks[0].Dropped+r.Chunks[1].Dropped, "nothing dropped")
		sum += string(r.Data[0])
		data.Write(r.Data[1])
		for i := range 2 {
			off[i] = r.Chunks[i].Offset + int64(r.Chunks[i].Len)
		}
		if r.Chunks[0].EOF && r.Chunks[1].EOF {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, 5<<20, data.Len())
	md := exec.Command("md5sum")
	md.Stdin = bytes.NewReader(data.Bytes())
	want, err := md.Output()
	require.NoError(t, err)
	require.Equal(t, string(want), sum, "the streamed bytes are the output")

	// Cancel kills the tree and records the reason; a timeout does too.
	k, _, err := c.Start(ctx, supervisor.Spec{ID: "exec-cancel", Exec: true, Argv: []string{"sh", "-c", "sleep 300 & sleep 300"}, Env: env(), Dir: "/"})
	require.NoError(t, err)
	require.NoError(t, c.Cancel(ctx, k.ID))
	info, err = c.Wait(ctx, k.ID, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, supervisor.ReasonCanceled, info.Reason)
	require.False(t, info.TreeRunning)
	to, _, err := c.Start(ctx, supervisor.Spec{ID: "exec-timeout", Exec: true, TimeoutMS: 300, Argv: []string{"sleep", "300"}, Env: env(), Dir: "/"})
	require.NoError(t, err)
	info, err = c.Wait(ctx, to.ID, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, supervisor.ReasonTimeout, info.Reason)

	// A bad id is refused; the process limit does not count execs.
	_, _, err = c.Start(ctx, supervisor.Spec{ID: "../x", Exec: true, Argv: []string{"true"}, Env: env(), Dir: "/"})
	require.Error(t, err)
}

// TestShutdownWithFullBuffers: a shutdown with many full buffers answers
// (their newest ArchiveTailBytes each, in the payload) and the supervisor
// exits.
func TestShutdownWithFullBuffers(t *testing.T) {
	bin := supervisortest.Binary(t)
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := supervisor.Listen(sock)
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--ctl-fd", "3", "--runtime", "t")
	cmd.ExtraFiles = []*os.File{ln}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	ln.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := supervisor.NewClient(sock)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 24; i++ {
		info, _, err := c.Start(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "head -c 1200000 /dev/zero; head -c 1200000 /dev/zero >&2; exec sleep 300"}, Env: env(), Dir: "/"})
		require.NoError(t, err)
		ids = append(ids, info.ID)
	}
	for _, id := range ids {
		for {
			r, err := c.Read(ctx, id, [2]int64{supervisor.NoStream, supervisor.NoStream}, 0, 0, true)
			require.NoError(t, err)
			if r.Info.Totals == [2]int64{1200000, 1200000} {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	finals, err := c.Shutdown(sctx, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, finals, len(ids))
	for _, f := range finals {
		require.Equal(t, supervisor.ReasonStopped, f.Info.Reason)
		for i := range 2 {
			require.Len(t, f.Data[i], supervisor.ArchiveTailBytes)
			require.Equal(t, int64(1200000-supervisor.ArchiveTailBytes), f.Starts[i])
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the supervisor did not exit after shutdown")
	}
}

// TestNoFileGrowth: a process started with NoFileGrowth cannot make a file
// larger, nor raise the limit again, nor can anything it starts; it can
// still remove and truncate files; the next process without it writes
// as before (the lowered shim is not reused), also after a start that
// failed.
func TestNoFileGrowth(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	require.NoError(t, os.WriteFile(keep, []byte("0123456789"), 0o600))
	// run returns the script's stdout (its stderr, a separate pipe, is
	// read in no fixed order with it).
	run := func(script string, noGrowth bool) (supervisor.Info, string) {
		t.Helper()
		var out [2]bytes.Buffer
		info, err := c.Run(ctx, supervisor.Spec{Argv: []string{"sh", "-c", script}, Env: env(), Dir: dir, NoFileGrowth: noGrowth},
			func(i int, d []byte) { out[i].Write(d) })
		require.NoError(t, err)
		return info, out[0].String()
	}
	info, out := run("trap '' XFSZ; printf x > new || echo refused; printf y >> keep || echo refused; sh -c 'printf z > nested' || echo refused; "+
		"ulimit -f unlimited 2>/dev/null && echo raised; ulimit -f; truncate -s 4 keep && echo truncated; rm new && echo removed", true)
	require.Equal(t, 0, info.ExitCode, out)
	require.Equal(t, 3, strings.Count(out, "refused"), out)
	require.NotContains(t, out, "raised", out)
	require.Contains(t, out, "\n0\n", "ulimit -f inside: %s", out)
	require.Contains(t, out, "truncated\nremoved\n", out)
	got, err := os.ReadFile(keep)
	require.NoError(t, err)
	require.Equal(t, "0123", string(got))
	info, out = run("printf x > nested", true)
	require.Equal(t, 128+int(syscall.SIGXFSZ), info.ExitCode, "without the trap the writer dies of SIGXFSZ: %s", out)

	// A start that fails, with the limit: the shim it used is not reused.
	var sink bytes.Buffer
	info, err = c.Run(ctx, supervisor.Spec{Argv: []string{"no-such-cmd-xyz"}, Env: env(), Dir: dir, NoFileGrowth: true}, func(_ int, d []byte) { sink.Write(d) })
	require.NoError(t, err)
	require.Equal(t, 127, info.ExitCode)
	for i := range 8 { // more than the idle shims
		info, out = run("printf abc > after && cat after", false)
		require.Equal(t, 0, info.ExitCode, "run %d: %s", i, out)
		require.Equal(t, "abc", out)
	}
}
