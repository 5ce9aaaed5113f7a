package runtimetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// portPreviewer is the method set the preview_url activity asserts on a
// provider (activities.PortPreviewer; docs/API.md "Preview URLs"): the
// lifecycle check holds a provider to it exactly when Capabilities
// reports PreviewURL.
type portPreviewer interface {
	PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error)
}

func (s *suite) lifecycle(t *testing.T) {
	ctx, env, rt := s.setup(t, func(sp *sandbox.RuntimeSpec) {
		sp.Labels = map[string]string{"runtimetest": "yes", "workspace": sp.ID}
	})
	p := env.Provider
	require.NotEmpty(t, p.Kind())
	caps := p.Capabilities()
	_, previews := p.(portPreviewer)
	require.Equal(t, caps.PreviewURL, previews, "the provider implements PreviewURL exactly when Capabilities().PreviewURL (the preview_url activity asserts it)")
	_, procs := rt.(sandbox.ProcessRuntime)
	require.Equal(t, caps.Processes, procs, "the runtime implements ProcessRuntime exactly when Capabilities().Processes (the session skips the process start when it does not)")

	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeRunning, st, "state after Create")

	again, err := p.Create(ctx, env.Spec)
	require.NoError(t, err, "Create is idempotent")
	require.Equal(t, rt.ID(), again.ID())

	got, err := p.Get(ctx, env.Spec.ID)
	require.NoError(t, err)
	require.Equal(t, env.Spec.ID, got.ID())
	requireExit(t, mustExec(t, ctx, got, sandboxapi.ExecRequest{Cmd: []string{"true"}}), 0)

	list, err := p.List(ctx, map[string]string{"workspace": env.Spec.ID})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, env.Spec.ID, list[0].ID)
	require.Equal(t, "yes", list[0].Labels["runtimetest"])
	list, err = p.List(ctx, map[string]string{"workspace": env.Spec.ID, "runtimetest": "no"})
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = p.Get(ctx, env.Spec.ID+"-missing")
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.NoError(t, p.Destroy(ctx, env.Spec.ID+"-missing"), "Destroy of a missing runtime is success")
}

func (s *suite) hibernateResume(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("mkdir -p d && echo persisted > d/f.txt")}), 0)

	require.NoError(t, rt.Stop(ctx))
	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeStopped, st)
	require.NoError(t, rt.Stop(ctx), "Stop is idempotent")
	data, err := env.Workspace.ReadFile("d/f.txt")
	require.NoError(t, err, "workspace files survive Stop")
	require.Equal(t, "persisted\n", string(data))

	// Exec on a stopped runtime resumes it.
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"cat", "d/f.txt"}})
	requireExit(t, res, 0)
	require.Equal(t, "persisted\n", string(res.Stdout))
	st, err = rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeRunning, st)

	// Explicit Stop/Start, and Get after Stop.
	require.NoError(t, rt.Stop(ctx))
	got, err := env.Provider.Get(ctx, env.Spec.ID)
	require.NoError(t, err, "a stopped runtime still exists")
	require.NoError(t, got.Start(ctx))
	st, err = got.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeRunning, st)
	res = mustExec(t, ctx, got, sandboxapi.ExecRequest{Cmd: []string{"cat", "d/f.txt"}})
	require.Equal(t, "persisted\n", string(res.Stdout))
}

func (s *suite) stopKillsRunning(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(treeScript), TimeoutS: 60})
		done <- outcome{res, err}
	}()
	for !env.Files.Exists("tick") && time.Since(start) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, rt.Stop(ctx))
	select {
	case o := <-done:
		require.True(t, o.err != nil || o.res.ExitCode != 0, "a command killed by Stop does not report success")
		require.False(t, o.res.TimedOut)
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end the running command")
	}
	requireTreeGone(t, env.Files, start)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"true"}}), 0)
}

func (s *suite) destroyKeepsWorkspace(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo keep > keep.txt")}), 0)
	require.NoError(t, env.Provider.Destroy(ctx, env.Spec.ID))
	data, err := env.Workspace.ReadFile("keep.txt")
	require.NoError(t, err, "Destroy must not touch the workspace")
	require.Equal(t, "keep\n", string(data))
	_, err = env.Provider.Get(ctx, env.Spec.ID)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.NoError(t, env.Provider.Destroy(ctx, env.Spec.ID), "Destroy is idempotent")
	list, err := env.Provider.List(ctx, nil)
	require.NoError(t, err)
	for _, r := range list {
		require.NotEqual(t, env.Spec.ID, r.ID, "a destroyed runtime is not listed")
	}

	// The same spec creates it again, over the same files.
	rt2, err := env.Provider.Create(ctx, env.Spec)
	require.NoError(t, err)
	res := mustExec(t, ctx, rt2, sandboxapi.ExecRequest{Cmd: []string{"cat", "keep.txt"}})
	require.Equal(t, "keep\n", string(res.Stdout))
}

func (s *suite) reopen(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	if env.Reopen == nil {
		t.Skip("the factory provides no Reopen")
	}
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo before > restart.txt")}), 0)
	p2 := env.Reopen(t)
	t.Cleanup(func() { _ = p2.Destroy(context.Background(), env.Spec.ID) })
	rt2, err := p2.Create(ctx, env.Spec)
	require.NoError(t, err, "Create after a restart")
	res := mustExec(t, ctx, rt2, sandboxapi.ExecRequest{Cmd: []string{"cat", "restart.txt"}})
	requireExit(t, res, 0)
	require.Equal(t, "before\n", string(res.Stdout))
}
