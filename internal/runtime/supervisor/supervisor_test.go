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
		_, _ = c.Shutdown(ctx, time.Second)
		_ = cmd.Wait()
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

	bg, err := c.Start(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "read x; echo got $x; sleep 0.2; exit 7"}, Env: env(), Dir: "/", OpenStdin: true, Tag: "t1"})
	require.NoError(t, err)
	_, err = c.Write(ctx, bg.ID, []byte("hello\n"), true)
	require.NoError(t, err)
	var got []byte
	off := [2]int64{}
	for {
		r, err := c.Read(ctx, bg.ID, off, 0, 5*time.Second)
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
