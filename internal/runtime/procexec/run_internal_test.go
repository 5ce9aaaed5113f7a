package procexec

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// contexts returns Run's three contexts: killCtx (its cancel takes a
// cause, as Lifecycle's does), callerCtx and runCtx (killCtx bounded by
// timeout).
func contexts(t *testing.T, timeout time.Duration) (kill context.CancelCauseFunc, caller context.CancelFunc, o outcome) {
	t.Helper()
	callerCtx, caller := context.WithCancel(context.Background())
	killCtx, kill := context.WithCancelCause(callerCtx)
	runCtx, cancel := context.WithTimeout(killCtx, timeout)
	t.Cleanup(func() { cancel(); kill(nil); caller() })
	return kill, caller, outcome{out: NewOutput(1<<10, nil), name: "tool", killCtx: killCtx, callerCtx: callerCtx, runCtx: runCtx}
}

func TestClassify(t *testing.T) {
	t.Run("not killed: the exit code as it is", func(t *testing.T) {
		_, _, o := contexts(t, time.Hour)
		res, err := o.classify(3, false)
		require.NoError(t, err)
		require.Equal(t, 3, res.ExitCode)
		require.False(t, res.TimedOut)
	})
	t.Run("killed with no context ended: the exit code", func(t *testing.T) {
		_, _, o := contexts(t, time.Hour)
		res, err := o.classify(137, true)
		require.NoError(t, err)
		require.Equal(t, 137, res.ExitCode)
	})
	t.Run("timeout: 124 timed out", func(t *testing.T) {
		_, _, o := contexts(t, time.Nanosecond)
		<-o.runCtx.Done()
		res, err := o.classify(137, true)
		require.NoError(t, err)
		require.Equal(t, 124, res.ExitCode)
		require.True(t, res.TimedOut)
	})
	t.Run("runtime stopped: 137, not timed out, even past the timeout", func(t *testing.T) {
		kill, _, o := contexts(t, time.Nanosecond)
		kill(errHalted)
		<-o.runCtx.Done()
		res, err := o.classify(137, true)
		require.NoError(t, err)
		require.Equal(t, 137, res.ExitCode)
		require.False(t, res.TimedOut)
	})
	t.Run("caller gone: interrupted, whatever else ended", func(t *testing.T) {
		kill, caller, o := contexts(t, time.Hour)
		kill(errHalted)
		caller()
		res, err := o.classify(137, true)
		require.Error(t, err)
		require.Equal(t, 137, res.ExitCode)
	})
}

func TestStartFailed(t *testing.T) {
	boom := errors.New("exec format error")
	t.Run("no StartFailed: runtime unavailable naming the command", func(t *testing.T) {
		_, _, o := contexts(t, time.Hour)
		_, err := o.startFailed(Command{Name: "tool"}, boom)
		require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
		require.ErrorContains(t, err, "exec tool: start")
	})
	t.Run("StartFailed decides", func(t *testing.T) {
		_, _, o := contexts(t, time.Hour)
		res, err := o.startFailed(Command{Name: "tool", StartFailed: func(err error) (sandboxapi.ExecResult, error) {
			require.Equal(t, boom, err)
			return sandboxapi.ExecResult{ExitCode: 126}, nil
		}}, boom)
		require.NoError(t, err)
		require.Equal(t, 126, res.ExitCode)
	})
	t.Run("stopped before the start: the notice when asked for", func(t *testing.T) {
		kill, _, o := contexts(t, time.Hour)
		kill(errHalted)
		res, err := o.startFailed(Command{Name: "tool", NoticeHaltBeforeStart: true, StartFailed: func(error) (sandboxapi.ExecResult, error) {
			t.Fatal("StartFailed is not asked once the context ended")
			return sandboxapi.ExecResult{}, nil
		}}, boom)
		require.NoError(t, err)
		require.Equal(t, 137, res.ExitCode)
		require.Contains(t, string(res.Stderr), "killed before it started: the runtime was stopped")
		o.out = NewOutput(1<<10, nil)
		res, err = o.startFailed(Command{Name: "tool"}, boom)
		require.NoError(t, err)
		require.Equal(t, 137, res.ExitCode)
		require.Empty(t, res.Stderr, "no notice unless asked for")
	})
	t.Run("timed out before the start", func(t *testing.T) {
		_, _, o := contexts(t, time.Nanosecond)
		<-o.runCtx.Done()
		res, err := o.startFailed(Command{Name: "tool", NoticeHaltBeforeStart: true}, boom)
		require.NoError(t, err)
		require.True(t, res.TimedOut)
	})
}

func TestNewCmdAndPipes(t *testing.T) {
	var g group
	cmd := newCmd(context.Background(), Command{Path: "/bin/true", Args: []string{"true", "x"}, Dir: "/"}, &g)
	require.Equal(t, []string{}, cmd.Env, "nil Env is an empty environment, never the worker's")
	require.True(t, cmd.SysProcAttr.Setpgid)
	require.Equal(t, DrainGrace, cmd.WaitDelay)
	require.Equal(t, []string{"true", "x"}, cmd.Args)

	for _, tc := range []struct{ status, stdin bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		var p pipes
		cmd := exec.Command("/bin/true")
		require.NoError(t, p.attach(cmd, tc.status, tc.stdin))
		require.NotNil(t, p.stdout)
		require.NotNil(t, p.stderr)
		require.Equal(t, tc.status, p.status != nil)
		require.Equal(t, tc.status, len(cmd.ExtraFiles) == 1, "the status pipe is descriptor 3, the only extra file")
		require.Equal(t, tc.stdin, p.stdin != nil)
		require.Equal(t, tc.stdin, cmd.Stdin != nil, "no stdin pipe: /dev/null")
		n := 2
		if tc.status {
			n++
		}
		if tc.stdin {
			n++
		}
		require.Len(t, p.child, n)
		require.Len(t, p.all, 2*n)
		p.closeAll()
		require.Empty(t, p.all)
	}
}
