package repocache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestLockRepoInProcess(t *testing.T) {
	t.Parallel()
	c := newCache(t, nil)
	_, id := fileRepo(t)
	ctx := context.Background()

	unlock, err := c.LockRepo(ctx, id)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = c.LockRepo(short, id)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoLocked), "got %v", err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))

	short2, cancel2 := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel2()
	_, err = c.Ensure(short2, id, nil, false)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoLocked), "Ensure waits for the lock: %v", err)

	// A waiter gets the lock as soon as it is released.
	got := make(chan error, 1)
	go func() {
		u, err := c.LockRepo(ctx, id)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	unlock()
	unlock() // idempotent
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never got the lock")
	}
}

// TestFlockIsExclusiveAcrossDescriptorsInOneProcess documents the Linux
// semantics LockRepo relies on: flock(2) locks belong to the open file
// description, so a second open of the lock file in the same process cannot
// take the lock while LockRepo holds it.
func TestFlockIsExclusiveAcrossDescriptorsInOneProcess(t *testing.T) {
	t.Parallel()
	c := newCache(t, nil)
	_, id := fileRepo(t)
	unlock, err := c.LockRepo(context.Background(), id)
	require.NoError(t, err)

	other := flock.New(c.lockPath(id))
	ok, err := other.TryLock()
	require.NoError(t, err)
	assert.False(t, ok, "a second descriptor in the same process must not get the lock")

	unlock()
	ok, err = other.TryLock()
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, other.Unlock())
}

func TestLockRepoAcrossProcessesAndSIGKILL(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, id := fileRepo(t)
	child := startHelper(t, "lock", root, id.URL)
	child.waitFor(t, "locked")

	c := newCacheAt(t, root, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.LockRepo(ctx, id)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoLocked), "got %v", err)
	assert.Contains(t, err.Error(), "another process")

	child.kill(t) // SIGKILL: the kernel releases the flock
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	unlock, err := c.LockRepo(ctx2, id)
	require.NoError(t, err)
	unlock()
}

// TestSIGKILLMidCloneIsRecovered kills a worker process while its clone is
// blocked at the server, then checks that the next Ensure (another process's
// Cache on the same root) cleans the stale staging dir and clones.
func TestSIGKILLMidCloneIsRecovered(t *testing.T) {
	t.Parallel()
	srv, _, id := httpRepo(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	var first atomic.Bool
	srv.SetHook(func(r *http.Request) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return errors.New("client was killed")
	})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	root := t.TempDir()
	child := startHelper(t, "ensure", root, id.URL)
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker's clone never reached the server")
	}
	c := newCacheAt(t, root, nil)
	staged, err := filepath.Glob(filepath.Join(c.stagingDir(), sandbox.RepoCacheIDFor(c.hostID, id)+"-*"))
	require.NoError(t, err)
	require.Len(t, staged, 1, "the clone is staged")
	assert.NoDirExists(t, c.Path(id), "nothing at the final path mid-clone")

	child.kill(t)
	releaseOnce.Do(func() { close(release) }) // the orphaned git gets a 503 and exits

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	assert.Equal(t, "trunk", rc.DefaultBranch)
	assert.NoDirExists(t, staged[0], "stale staging dir removed")
	assert.Empty(t, leftovers(t, c))
}

// helper is a child process running TestHelperProcess.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
	stdin io.WriteCloser
	once  sync.Once
}

func startHelper(t *testing.T, mode, root, url string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"REPOCACHE_HELPER="+mode,
		"REPOCACHE_ROOT="+root,
		"REPOCACHE_URL="+url,
		"REPOCACHE_GIT_HOME="+t.TempDir(),
	)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, lines: make(chan string, 16), stdin: stdin}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() { h.kill(t) })
	return h
}

func (h *helper) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("helper exited before printing %q", want)
			}
			if line == want {
				return
			}
			if strings.HasPrefix(line, "error:") {
				t.Fatalf("helper: %s", line)
			}
		case <-timeout:
			t.Fatalf("helper never printed %q", want)
		}
	}
}

// kill SIGKILLs the helper and reaps it.
func (h *helper) kill(t *testing.T) {
	h.once.Do(func() {
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	})
}

// TestHelperProcess is the body of helper child processes; it does nothing in
// a normal test run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("REPOCACHE_HELPER")
	if mode == "" {
		return
	}
	fail := func(err error) {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	git, err := gitx.New(gitx.Options{AllowFile: true, AllowHTTP: true, HomeDir: os.Getenv("REPOCACHE_GIT_HOME")})
	if err != nil {
		fail(err)
	}
	c, err := New(Options{Root: os.Getenv("REPOCACHE_ROOT"), Git: git, HostID: "host-test"})
	if err != nil {
		fail(err)
	}
	id, err := sandboxapi.ParseRepoURL(os.Getenv("REPOCACHE_URL"), sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	switch mode {
	case "lock":
		if _, err := c.LockRepo(ctx, id); err != nil {
			fail(err)
		}
		fmt.Println("locked")
	case "ensure":
		if _, err := c.Ensure(ctx, id, goodCred(), false); err != nil {
			fail(err)
		}
		fmt.Println("ensured")
	}
	// Hold whatever we hold until the parent kills us or goes away.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
