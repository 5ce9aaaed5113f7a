package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// A client killed by SIGKILL leaves its command running and holding the
// workspace (the next write waited in silence): `sandboxctl ps` lists the
// command and `sandboxctl cancel --all` stops it, without waiting for the
// lock it holds; the next write then runs at once.
func TestPsAndCancelFreeAWorkspaceAKilledClientLeftBusy(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "pscancel")
	q := h.Config.TaskQueue
	url := mcpRepo(t)
	ctx := ctxFor(t, 3*time.Minute)
	s, hd, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c1", url))
	require.NoError(t, err)
	ws := hd.WorkspaceID

	client := exec.Command(bin, "exec", ws, "--", "sleep", "600")
	client.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+q)
	require.NoError(t, client.Start())
	var ps psOut
	require.Eventually(t, func() bool {
		r := runCLI(t, bin, q, "", "ps", ws, "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &ps) == nil && len(ps.RunningExecs) == 1
	}, 30*time.Second, 200*time.Millisecond, "ps lists the running exec")
	require.NoError(t, client.Process.Signal(syscall.SIGKILL))
	_ = client.Wait()

	r := runCLI(t, bin, q, "", "ps", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "exec     "+ps.RunningExecs[0])

	r = runCLI(t, bin, q, "", "cancel", ws)
	assert.Equal(t, 2, r.code, "ids or --all: %s", r.stderr)
	r = runCLI(t, bin, q, "", "cancel", ws, "no-such-id")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, "neither a running exec nor a process")

	start := time.Now()
	r = runCLI(t, bin, q, "", "cancel", ws, "--all")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "exec "+ps.RunningExecs[0]+": running")
	require.NoError(t, s.WriteFile(ctx, "after.txt", []byte("free\n"), 0))
	assert.Less(t, time.Since(start), 20*time.Second, "the workspace is free again")
	r = runCLI(t, bin, q, "", "ps", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "nothing running\n", r.stdout)
}

// psOut is `sandboxctl ps --json`.
type psOut struct {
	RunningExecs []string `json:"running_execs"`
}

// A call that finds the workspace held by a long command fails
// WorkspaceLocked after SANDBOX_LOCK_WAIT, naming the operation that holds
// it and since when, instead of waiting in silence; acquire still waits,
// and the command's own session keeps working once it ends.
func TestBusyWorkspaceFailsWorkspaceLockedNamingTheHolder(t *testing.T) {
	h := startHost(t, "lockwait", func(c *hostworker.Config) { c.LockWait = 2 * time.Second })
	url := mcpRepo(t)
	ctx := ctxFor(t, 3*time.Minute)
	req := editRequest(uniq(t, "u"), "p", "c1", url)
	s, _, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(sandboxclient.WithUpdateID(ctx, "long-command"), sandboxapi.ExecRequest{Cmd: []string{"sleep", "8"}})
		done <- err
	}()
	require.Eventually(t, func() bool {
		d, err := s.Describe(ctx)
		return err == nil && len(d.RunningExecs) == 1
	}, 30*time.Second, 100*time.Millisecond)

	start := time.Now()
	err = s.WriteFile(ctx, "x.txt", []byte("x"), 0)
	waited := time.Since(start)
	require.Error(t, err)
	assert.True(t, sandboxapi.IsWorkspaceLocked(err), "%v", err)
	assert.Contains(t, err.Error(), "exec (update id long-command) has held it since")
	assert.GreaterOrEqual(t, waited, 2*time.Second)
	assert.Less(t, waited, 7*time.Second)
	_, err = s.ReadFile(ctx, "x.txt")
	assert.True(t, sandboxapi.IsWorkspaceLocked(err), "reads wait as long: %v", err)

	// Acquire is not bounded: it returns once the command ended.
	_, _, err = h.client.Acquire(ctx, req)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NoError(t, s.WriteFile(ctx, "x.txt", []byte("x"), 0))
}
