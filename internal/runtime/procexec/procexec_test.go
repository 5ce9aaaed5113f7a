package procexec_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestEnvList(t *testing.T) {
	env := procexec.EnvList(procexec.BaseEnv("/home/x"), map[string]string{"TERM": "xterm", "A": "1"}, nil, map[string]string{"A": "2"})
	require.Equal(t, []string{"A=2", "HOME=/home/x", "LANG=C.UTF-8", "PATH=" + procexec.BasePath, "TERM=xterm"}, env)
	require.Empty(t, procexec.EnvList())
}

func TestOutput(t *testing.T) {
	var mu sync.Mutex
	var chunks []sandboxapi.ExecChunk
	out := procexec.NewOutput(8, func(c sandboxapi.ExecChunk) {
		mu.Lock()
		defer mu.Unlock()
		chunks = append(chunks, c)
	})
	_, _ = out.Stdout().Write([]byte("0123456789"))
	res := out.Notice(127, "tool", "command not found")
	require.Equal(t, 127, res.ExitCode)
	require.False(t, res.TimedOut)
	require.True(t, res.Truncated)
	require.Equal(t, int64(10), res.StdoutBytes)
	require.Equal(t, int64(len("sandbox: tool: command not found\n")), res.StderrBytes)
	require.Equal(t, []sandboxapi.ExecChunk{
		{Stream: "stdout", Data: []byte("0123456789")},
		{Stream: "stderr", Data: []byte("sandbox: tool: command not found\n")},
	}, chunks)

	res = out.TimedOut()
	require.Equal(t, 124, res.ExitCode)
	require.True(t, res.TimedOut)

	res, err := out.Interrupted(137, "tool", context.DeadlineExceeded)
	require.Equal(t, 137, res.ExitCode)
	require.ErrorIs(t, err, sandboxapi.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = out.Interrupted(137, "tool", context.Canceled)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.ErrorIs(t, err, context.Canceled)
}

func TestResolveCwd(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(root, "out")))
	require.NoError(t, os.Symlink("a/b", filepath.Join(root, "in")))

	dir, rel, err := procexec.ResolveCwd(root, "")
	require.NoError(t, err)
	require.Equal(t, root, dir)
	require.Equal(t, ".", rel)
	dir, rel, err = procexec.ResolveCwd(root, "in")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "a", "b"), dir)
	require.Equal(t, "a/b", rel)
	for _, cwd := range []string{"../x", "/abs", "missing", "file", "out"} {
		_, _, err := procexec.ResolveCwd(root, cwd)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, cwd)
		require.NotContains(t, err.Error(), root, cwd)
	}

	// Links out of the workdir say the same whatever lies outside: an
	// existing directory, a file, nothing (no oracle on the host's files).
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), nil, 0o644))
	msgs := map[string]bool{}
	for name, target := range map[string]string{"l-dir": outside, "l-file": filepath.Join(outside, "f"), "l-none": filepath.Join(outside, "none")} {
		require.NoError(t, os.Symlink(target, filepath.Join(root, name)))
		_, _, err := procexec.ResolveCwd(root, name)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
		msgs[strings.TrimPrefix(err.Error(), "InvalidArgument: exec: cwd \""+name+"\"")] = true
	}
	require.Len(t, msgs, 1, "%v", msgs)
}

type fakeRuntime struct {
	sandbox.Runtime
	life *procexec.Lifecycle[string]
}

func TestRegistry(t *testing.T) {
	var g procexec.Registry[string]
	built := 0
	build := func(life *procexec.Lifecycle[string]) (sandbox.Runtime, error) {
		built++
		return &fakeRuntime{life: life}, nil
	}
	spec := sandbox.RuntimeSpec{ID: "b", Labels: map[string]string{"ws": "1"}}
	rt, err := g.Create(spec, "/root-b", "conf1", build)
	require.NoError(t, err)
	life := rt.(*fakeRuntime).life
	require.Equal(t, sandbox.RuntimeRunning, life.State())
	require.NoError(t, life.Stop(context.Background()))

	spec.Labels["ws"] = "changed by the caller" // the registry keeps a copy
	again, err := g.Create(sandbox.RuntimeSpec{ID: "b", Labels: map[string]string{"ws": "2"}}, "/root-b", "conf2", build)
	require.NoError(t, err)
	require.Same(t, rt, again)
	require.Equal(t, 1, built)
	require.Equal(t, "conf2", life.Conf())
	require.Equal(t, sandbox.RuntimeStopped, life.State(), "Create leaves the state alone")
	_, err = g.Create(sandbox.RuntimeSpec{ID: "b"}, "/elsewhere", "", build)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)

	_, err = g.Create(sandbox.RuntimeSpec{ID: "a", Labels: map[string]string{"ws": "2", "k": "v"}}, "/root-a", "", build)
	require.NoError(t, err)
	require.Equal(t, []sandbox.RuntimeSummary{
		{ID: "a", State: sandbox.RuntimeRunning, Labels: map[string]string{"ws": "2", "k": "v"}},
		{ID: "b", State: sandbox.RuntimeStopped, Labels: map[string]string{"ws": "2"}},
	}, g.List(map[string]string{"ws": "2"}))
	require.Len(t, g.List(map[string]string{"k": "v"}), 1)

	got, err := g.Get("b")
	require.NoError(t, err)
	require.Same(t, rt, got)
	removed, ok := g.Remove("b")
	require.True(t, ok)
	require.Same(t, life, removed)
	require.NoError(t, removed.Destroy(context.Background()))
	require.Equal(t, sandbox.RuntimeMissing, life.State())
	require.ErrorIs(t, life.Start(func(string) error { return nil }), sandboxapi.ErrNotFound)
	_, err = g.Get("b")
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	_, ok = g.Remove("b")
	require.False(t, ok)
}

// run runs argv through a fresh Lifecycle, as an adapter does.
func run(t *testing.T, ctx context.Context, life *procexec.Lifecycle[string], c procexec.Command) (sandboxapi.ExecResult, error) {
	t.Helper()
	c.Name, c.Path = c.Args[0], c.Args[0]
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	return life.Exec(ctx, func(string) error { return nil }, func(killCtx context.Context, _ sandbox.RuntimeSpec, _ string) (sandboxapi.ExecResult, error) {
		return procexec.Run(killCtx, ctx, procexec.NewOutput(1<<20, nil), c)
	})
}

func newLifecycle(t *testing.T) *procexec.Lifecycle[string] {
	var g procexec.Registry[string]
	rt, err := g.Create(sandbox.RuntimeSpec{ID: "rt"}, t.TempDir(), "", func(life *procexec.Lifecycle[string]) (sandbox.Runtime, error) {
		return &fakeRuntime{life: life}, nil
	})
	require.NoError(t, err)
	return rt.(*fakeRuntime).life
}

func TestRunExitCodes(t *testing.T) {
	ctx := context.Background()
	life := newLifecycle(t)
	sh := func(script string) []string { return []string{"/bin/sh", "-c", script} }

	res, err := run(t, ctx, life, procexec.Command{Args: sh("cat; echo err >&2; exit 3"), Stdin: []byte("in\n"), Env: []string{"A=1"}})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "in\n", string(res.Stdout))
	require.Equal(t, "err\n", string(res.Stderr))

	res, err = run(t, ctx, life, procexec.Command{Args: sh("kill -TERM $$")})
	require.NoError(t, err)
	require.Equal(t, 128+15, res.ExitCode)

	res, err = run(t, ctx, life, procexec.Command{Args: sh("echo partial; sleep 30"), Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 124, res.ExitCode)
	require.True(t, res.TimedOut)
	require.Equal(t, "partial\n", string(res.Stdout))

	res, err = run(t, ctx, life, procexec.Command{Args: []string{"/usr/bin/env"}})
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(res.Stdout)), "a nil Env is empty, never the worker's")

	_, err = run(t, ctx, life, procexec.Command{Args: []string{"/nonexistent/tool"}})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)

	_, err = run(t, ctx, life, procexec.Command{Args: sh("printf '{\"exit-code\": 0}' >&3; exit 5"), Status: func(st []byte, res sandboxapi.ExecResult) error {
		require.Equal(t, `{"exit-code": 0}`, string(st))
		require.Equal(t, 5, res.ExitCode)
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "status seen")
	}})
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
}

func TestStopKillsAndWaits(t *testing.T) {
	ctx := context.Background()
	life := newLifecycle(t)
	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := run(t, ctx, life, procexec.Command{Args: []string{"/bin/sh", "-c", "echo up; exec sleep 30"}})
		done <- outcome{res, err}
	}()
	time.Sleep(300 * time.Millisecond)
	// Stop returns once the command is dead; it would fail with ErrTimeout
	// if the kill did not work.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, life.Stop(stopCtx))
	require.Equal(t, sandbox.RuntimeStopped, life.State())
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, 137, got.res.ExitCode, "a halt is a kill result, not an error")
	require.Equal(t, "up\n", string(got.res.Stdout))
}
