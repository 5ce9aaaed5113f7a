package hostworker

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// holdDataDirEnv makes TestHoldDataDirHelper, run as a child process, hold
// the lock of the data dir it names until its stdin closes.
const holdDataDirEnv = "SANDBOX_TEST_HOLD_DATA_DIR"

// TestHoldDataDirHelper is not a test: run by
// TestASecondWorkerOnTheSameDataDirIsRefused as another process, it takes
// the data dir's lock, says "locked" and holds it until stdin closes.
func TestHoldDataDirHelper(t *testing.T) {
	dir := os.Getenv(holdDataDirEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	lock, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, _ = os.Stdout.WriteString("locked\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// A second worker started on a data dir another process serves is refused
// before it touches anything (no store is opened, no Temporal dialed), with
// SandboxConflict naming the other process's pid and the directory; the
// lock ends with its holder (never stale after a crash) and with Host.Stop.
func TestASecondWorkerOnTheSameDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestHoldDataDirHelper$", "-test.count=1")
	child.Env = append(os.Environ(), holdDataDirEnv+"="+dir)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)
	pid := strconv.Itoa(child.Process.Pid)

	_, err = LockDataDir(dir)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "data dir "+dir+" is in use by another sandbox-worker (pid "+pid+", holding "+filepath.Join(dir, DataDirLockFile)+")")

	cfg, err := ConfigFromEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"SANDBOX_DATA_DIR": dir, "SANDBOX_HOST_ID": "h1", "SANDBOX_RUNTIME_PROVIDER": "local",
			"TEMPORAL_ADDRESS": "127.0.0.1:1"}[k]
		return v, ok
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := Start(ctx, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if h != nil {
		h.Stop()
	}
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "pid "+pid)
	assert.Contains(t, err.Error(), dir)
	_, statErr := os.Stat(filepath.Join(dir, "sandbox.db"))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "the refused worker opened no store")

	// The holder goes (as a crash would): the lock goes with it.
	require.NoError(t, stdin.Close())
	require.NoError(t, child.Wait())
	lock, err := LockDataDir(dir)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, DataDirLockFile))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+"\n", string(b), "the holder's pid is in the file")
	_, err = LockDataDir(dir)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "one process holds it once: a second open in the same process is refused too")
	lock.Unlock()
	lock.Unlock() // idempotent
	b, err = os.ReadFile(filepath.Join(dir, DataDirLockFile))
	require.NoError(t, err)
	assert.Empty(t, b, "a worker that stopped is named no more")
	again, err := LockDataDir(dir)
	require.NoError(t, err, "Unlock releases it")
	again.Unlock()
}
