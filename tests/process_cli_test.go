package tests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// cliCmd returns the sandboxctl command for args against the test's queue.
func cliCmd(bin, queue string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+queue)
	return cmd
}

// TestCLIExecCtrlCKillsTheTree: SIGINT (and SIGTERM) to `sandboxctl exec`
// cancels the command: its whole tree is gone (no survivor in the process
// table, a container's included), sandboxctl exits 130, and the next exec
// runs at once.
func TestCLIExecCtrlCKillsTheTree(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "cli-ctrlc")
	s, hd, _ := newEditSession(t, h)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		marker := fmt.Sprint(4000 + int(time.Now().UnixNano()%1000))
		started := filepath.Join(hd.LocalPath, "started")
		_ = os.Remove(started)
		cmd := cliCmd(bin, h.Config.TaskQueue, "exec", hd.WorkspaceID, "--", "sh", "-c", treeScript, "sh", marker)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool { return len(liveSleeps(marker)) == 2 }, time.Minute, 20*time.Millisecond, "the command runs")
		require.NoError(t, cmd.Process.Signal(sig))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("sandboxctl did not exit after %v", sig)
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stderr: %s", stderr.String())
		assert.Equal(t, 130, ee.ExitCode(), "stderr: %s", stderr.String())
		assert.Contains(t, stderr.String(), "cancelled")
		assert.Eventually(t, func() bool { return len(liveSleeps(marker)) == 0 }, time.Second, 20*time.Millisecond, "no survivor of the tree")
		start := time.Now()
		res, err := s.Exec(ctxFor(t, time.Minute), sandboxapi.ExecRequest{Cmd: []string{"echo", "hi"}})
		require.NoError(t, err)
		assert.Equal(t, "hi\n", string(res.Stdout))
		assert.Less(t, time.Since(start), 5*time.Second, "the next exec does not wait for the cancelled one")
	}
}

// TestCLIProcessCommands: proc start / list / write / read --follow / kill
// / attach, and exec --stream of 5 MiB, through sandboxctl.
func TestCLIProcessCommands(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "cli-proc")
	_, hd, _ := newEditSession(t, h)
	q, ws := h.Config.TaskQueue, hd.WorkspaceID

	r := runCLI(t, bin, q, "", "proc", "start", ws, "--tag", "echoer", "--stdin", "--", "sh", "-c", "cat; echo bye >&2; exit 4")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	require.NotEmpty(t, id)
	r = runCLI(t, bin, q, "", "proc", "list", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, id)
	assert.Contains(t, r.stdout, "echoer")
	assert.Contains(t, r.stdout, "running")
	r = runCLI(t, bin, q, "hello\n", "proc", "write", ws, id, "--close")
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, q, "", "proc", "read", ws, id, "--follow")
	assert.Equal(t, 4, r.code, "exits with the process's code: %s", r.stderr)
	assert.Equal(t, "hello\n", r.stdout)
	assert.Equal(t, "bye\n", r.stderr)
	r = runCLI(t, bin, q, "", "proc", "read", ws, id, "--offset", "2")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "llo\n", r.stdout)
	r = runCLI(t, bin, q, "", "proc", "read", ws, id, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"exit_code": 4`)

	r = runCLI(t, bin, q, "", "proc", "start", ws, "--", "sleep", "600")
	require.Equal(t, 0, r.code, r.stderr)
	sleeper := strings.TrimSpace(r.stdout)
	r = runCLI(t, bin, q, "", "proc", "kill", ws, sleeper)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, q, "", "proc", "read", ws, sleeper, "--follow")
	assert.Equal(t, 143, r.code, "TERM: 128+15")
	r = runCLI(t, bin, q, "", "proc", "kill", ws, sleeper, "--signal", "BOGUS")
	assert.Equal(t, 2, r.code)

	// attach: an interactive shell on a terminal.
	r = runCLI(t, bin, q, "", "proc", "start", ws, "--pty", "--rows", "30", "--cols", "90", "--", "sh")
	require.Equal(t, 0, r.code, r.stderr)
	shell := strings.TrimSpace(r.stdout)
	cmd := cliCmd(bin, q, "proc", "attach", ws, shell)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 101})
	require.NoError(t, err)
	defer tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	saw := func(s string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(screen.String(), s) }
	}
	_, err = io.WriteString(tty, "echo hi-$((40+2)); stty size\r")
	require.NoError(t, err)
	require.Eventually(t, saw("hi-42"), 30*time.Second, 20*time.Millisecond, "the shell answered")
	require.Eventually(t, saw("33 101"), 10*time.Second, 20*time.Millisecond, "the terminal took this window's size")
	_, err = io.WriteString(tty, "exit 3\r")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("attach did not end with the shell")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.ExitCode())

	// exec --stream: every byte, as printed.
	const size = 5 << 20
	cmd = cliCmd(bin, q, "exec", ws, "--stream", "--", "sh", "-c", fmt.Sprintf("head -c %d /dev/urandom | tee out.bin", size))
	sum := sha256.New()
	var n countingWriter
	cmd.Stdout = io.MultiWriter(sum, &n)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Equal(t, int64(size), int64(n))
	file, err := os.ReadFile(filepath.Join(hd.LocalPath, "out.bin"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%x", sha256.Sum256(file)), fmt.Sprintf("%x", sum.Sum(nil)), "the streamed bytes are the output")

	// hibernate says which background processes it ended.
	r = runCLI(t, bin, q, "", "proc", "start", ws, "--", "sleep", "600")
	require.Equal(t, 0, r.code, r.stderr)
	left := strings.TrimSpace(r.stdout)
	r = runCLI(t, bin, q, "", "hibernate", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "stopped 1 background process(es), now exited 137 (runtime_stopped)")
	assert.Contains(t, r.stdout, "  "+left+"\n")
	r = runCLI(t, bin, q, "", "hibernate", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "background process", "nothing left to stop")
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
