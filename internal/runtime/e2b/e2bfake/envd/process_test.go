package main

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/process"
)

func TestWorkDir(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(home, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "file"), nil, 0o644))
	str := func(s string) *string { return &s }

	dir, err := workDir(home, nil)
	require.NoError(t, err)
	require.Equal(t, home, dir)
	dir, err = workDir(home, str(""))
	require.NoError(t, err)
	require.Equal(t, home, dir)
	dir, err = workDir(home, str("sub"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, "sub"), dir, "a relative cwd is below the home")
	dir, err = workDir(home, str(filepath.Join(home, "sub")))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, "sub"), dir)

	for _, bad := range []string{"missing", "file"} {
		_, err := workDir(home, str(bad))
		var ce *connect.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Equal(t, connect.CodeInvalidArgument, ce.Code())
		require.Contains(t, ce.Message(), "cwd '"+filepath.Join(home, bad)+"' does not exist")
	}
}

func TestCommandEnvironment(t *testing.T) {
	u := &user.User{Uid: "1000", Gid: "1001", Username: "user", HomeDir: "/home/user"}
	cfg := &process.ProcessConfig{Cmd: "/bin/echo", Args: []string{"a"}, Envs: map[string]string{"X": "1"}}
	cmd := command(context.Background(), cfg, u, "/tmp", nil)
	require.Equal(t, []string{"/bin/echo", "a"}, cmd.Args)
	require.Equal(t, "/tmp", cmd.Dir)
	require.Equal(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/user", "USER=user", "LOGNAME=user", "X=1"}, cmd.Env)
	// The sandbox's variables (/init) come before the request's, which win.
	cmd = command(context.Background(), cfg, u, "/tmp", []string{"S=2", "X=0"})
	require.Equal(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/user", "USER=user", "LOGNAME=user", "S=2", "X=0", "X=1"}, cmd.Env)
	require.Equal(t, uint32(1000), cmd.SysProcAttr.Credential.Uid)
	require.Equal(t, uint32(1001), cmd.SysProcAttr.Credential.Gid)
}

// A process's output is never published before its Start stream
// subscribed (envd forks the events before starting the process): a
// command that prints and exits at once is streamed whole, every time.
func TestStartStreamsTheOutputOfAQuickProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("envd runs as root: it starts processes as the request's user")
	}
	u, err := user.Current()
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), userKey{}, u)
	ps := &processService{s: &server{procs: newTable()}}
	for i := range 50 {
		p, ch, unsub, err := ps.launch(ctx, &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/echo", Args: []string{"quick"}}}, 0)
		require.NoError(t, err)
		var out []byte
		for ev := range ch {
			out = append(out, ev.GetData().GetStdout()...)
			if ev.GetEnd() != nil {
				break
			}
		}
		unsub()
		<-p.done
		require.Equal(t, "quick\n", string(out), "run %d", i)
	}
}
