package runtimetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// treeScript starts a background child that would create "late" after 3 s
// and a foreground loop appending to "tick" every second.
const treeScript = `(sleep 3; echo late > late) & while true; do date >> tick; sleep 1; done`

// requireTreeGone checks that neither the loop nor the background child of
// treeScript survived, started at start.
func requireTreeGone(t *testing.T, files Files, start time.Time) {
	t.Helper()
	require.True(t, files.Exists("tick"), "the command never ran")
	time.Sleep(300 * time.Millisecond)
	before := files.Size("tick")
	// Wait past the background child's 3 s and more than one loop period.
	time.Sleep(max(2500*time.Millisecond, time.Until(start.Add(4500*time.Millisecond))))
	require.Equal(t, before, files.Size("tick"), "the foreground loop is still running")
	require.False(t, files.Exists("late"), "a background child survived")
}

func (s *suite) timeoutKillsTree(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	start := time.Now()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(treeScript), TimeoutS: 2})
	elapsed := time.Since(start)
	require.NoError(t, err, "a timeout is a result, not an error")
	require.True(t, res.TimedOut)
	requireExit(t, res, 124)
	require.GreaterOrEqual(t, elapsed, 2*time.Second)
	require.Less(t, elapsed, 5*time.Second, "the call must return soon after the timeout")
	require.GreaterOrEqual(t, res.DurationMS, int64(1900))
	requireTreeGone(t, env.Files, start)
}

func (s *suite) backgroundChild(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	start := time.Now()
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("sleep 300 & echo started"), TimeoutS: 30})
	require.Less(t, time.Since(start), 2*time.Second, "a background child holding stdout must not hold the call")
	requireExit(t, res, 0)
	require.Equal(t, "started\n", string(res.Stdout))
	require.False(t, res.TimedOut)
}

func (s *suite) cancelKillsTree(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	cctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	time.AfterFunc(1500*time.Millisecond, cancel)
	_, err := rt.Exec(cctx, sandboxapi.ExecRequest{Cmd: sh(treeScript), TimeoutS: 60})
	require.Error(t, err, "a cancelled call returns an error")
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 4*time.Second, "the call must return soon after cancellation")
	requireTreeGone(t, env.Files, start)
}
