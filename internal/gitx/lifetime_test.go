package gitx

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Environment of the helper process TestHelperHostSideGit (the "worker"
// that the lifetime tests kill).
const (
	helperModeEnv   = "GITX_TEST_HELPER_MODE" // "runner" (gitx.Runner) or "plain" (the old start: Setpgid + Pdeathsig only)
	helperURLEnv    = "GITX_TEST_HELPER_URL"
	helperSecretEnv = "GITX_TEST_HELPER_SECRET"
)

// TestHelperHostSideGit is not a test: run by TestNoHostSideGitOutlivesTheWorker
// as a worker, it runs `git ls-remote` with a credential against a server that
// never answers, and is killed with SIGKILL while git waits.
func TestHelperHostSideGit(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		t.Skip("helper process of TestNoHostSideGitOutlivesTheWorker")
	}
	url, secret := os.Getenv(helperURLEnv), os.Getenv(helperSecretEnv)
	cred := &sandbox.Credential{Username: srvUser, Secret: secret}
	switch mode {
	case "runner":
		r, err := New(Options{AllowHTTP: true, HomeDir: t.TempDir()})
		require.NoError(t, err)
		_, err = r.Run(context.Background(), Call{Dir: t.TempDir(), Args: []string{"ls-remote", "--end-of-options", url}, Cred: cred, RemoteURL: url, Timeout: time.Minute})
		t.Fatalf("the call returned (%v); it should have been killed with its worker", err)
	case "plain":
		// The start this package used before hostproc: git alone gets the
		// parent-death signal, from whichever thread forked it.
		header, scope, err := authHeader(cred, url)
		require.NoError(t, err)
		cmd := exec.Command("git", "-c", "protocol.http.allow=always", "ls-remote", "--end-of-options", url)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http."+scope+".extraHeader", "GIT_CONFIG_VALUE_0="+header)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = cmd.Run()
		t.Fatalf("the call returned (%v); it should have been killed with its worker", err)
	}
}

// proc is one process of /proc: its id, name, parent, state and start time
// (which tells a reused pid apart).
type proc struct {
	pid, ppid int
	comm      string
	state     byte
	start     string
	argv0     string // filled by descendants
}

// readProc reads /proc/<pid>/stat; ok is false when the process is gone.
func readProc(pid int) (p proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	f := strings.Fields(s[end+1:]) // state ppid pgrp session … starttime is the 20th
	if len(f) < 20 {
		return proc{}, false
	}
	p = proc{pid: pid, comm: s[open+1 : end], state: f[0][0], start: f[19]}
	p.ppid, _ = strconv.Atoi(f[1])
	return p, true
}

// descendants lists every live process below pid.
func descendants(pid int) []proc {
	names, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]proc{}
	for _, n := range names {
		id, err := strconv.Atoi(filepath.Base(n))
		if err != nil {
			continue
		}
		if p, ok := readProc(id); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.pid) + "/cmdline")
			c.argv0, _, _ = strings.Cut(string(b), "\x00")
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// alive returns those of ps that still run (a zombie has ended; a pid
// reused by another process is not the same one).
func alive(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if now, ok := readProc(p.pid); ok && now.start == p.start && now.state != 'Z' && now.state != 'X' {
			out = append(out, p)
		}
	}
	return out
}

// holding lists the processes whose environment contains needle.
func holding(needle string) []int {
	names, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, n := range names {
		env, err := os.ReadFile(n + "/environ")
		if err == nil && bytes.Contains(env, []byte(needle)) {
			id, _ := strconv.Atoi(filepath.Base(n))
			out = append(out, id)
		}
	}
	return out
}

// hangingServer is an HTTP server that never answers: started reports each
// request, and every handler waits until the client goes away or the test ends.
func hangingServer(t *testing.T) (url string, started <-chan struct{}) {
	ch := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }); srv.Close() })
	return srv.URL + "/o/r.git", ch
}

// killedWorker starts TestHelperHostSideGit in mode as a worker process,
// waits until its git call is in flight (the server got its request), and
// returns the worker's process tree at that moment, then kills the worker
// with SIGKILL (only it: its children are left to whatever the worker set
// up) and reaps it. needle is the credential as git's environment holds it.
func killedWorker(t *testing.T, mode string) (tree []proc, needle string) {
	url, started := hangingServer(t)
	secret := "lifetime-secret-" + mode + "-" + strconv.Itoa(os.Getpid())
	needle = base64.StdEncoding.EncodeToString([]byte(srvUser + ":" + secret))
	out, err := os.Create(filepath.Join(t.TempDir(), "worker.out"))
	require.NoError(t, err)
	defer out.Close()
	worker := exec.Command(os.Args[0], "-test.run=^TestHelperHostSideGit$", "-test.count=1", "-test.v")
	worker.Env = append(os.Environ(), helperModeEnv+"="+mode, helperURLEnv+"="+url, helperSecretEnv+"="+secret)
	worker.Stdout, worker.Stderr = out, out // a file: a survivor holding it cannot stall the test
	worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, worker.Start())
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		_ = worker.Process.Kill()
		_ = worker.Wait()
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("the worker's git never reached the server; its output:\n%s", b)
	}
	// The request is in flight: git-remote-http (git's child) sent it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		tree = descendants(worker.Process.Pid)
		if hasComm(tree, "git-remote-http") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hasComm(tree, "git-remote-http"), "no git-remote-http below the worker: %v", tree)
	require.NotEmpty(t, holding(needle), "no process holds the credential while the call runs")
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	return tree, needle
}

func hasComm(ps []proc, prefix string) bool {
	for _, p := range ps {
		if strings.HasPrefix(p.comm, prefix) {
			return true
		}
	}
	return false
}

// hasReaper reports whether one of ps is a hostproc reaper (by its argv[0]).
func hasReaper(ps []proc) bool {
	for _, p := range ps {
		if p.argv0 == "sandboxcore-hostproc-reaper" {
			return true
		}
	}
	return false
}

// TestNoHostSideGitOutlivesTheWorker: a worker killed with SIGKILL while
// its git call waits on a slow server takes the whole call with it — git,
// git-remote-http (git's child, which holds the credential and would
// otherwise finish the request) and the reaper — within 2 s, and no
// process is left with the credential in its environment. The control
// ("plain": Setpgid and Pdeathsig alone, as before) shows git-remote-http
// surviving with the credential: the test catches the bug.
func TestNoHostSideGitOutlivesTheWorker(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t.Run("runner", func(t *testing.T) {
		tree, needle := killedWorker(t, "runner")
		deadline := time.Now().Add(2 * time.Second)
		for len(alive(tree)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.Empty(t, alive(tree), "processes of the killed worker's git call still run")
		assert.Empty(t, holding(needle), "processes still hold the credential")
		assert.True(t, hasReaper(tree), "no reaper below the worker: %v", tree)
	})
	t.Run("control-plain-start", func(t *testing.T) {
		tree, needle := killedWorker(t, "plain")
		time.Sleep(time.Second)
		left := alive(tree)
		t.Cleanup(func() {
			for _, p := range alive(tree) {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		})
		assert.True(t, hasComm(left, "git-remote-http"), "the control should leave git-remote-http running: %v", left)
		assert.NotEmpty(t, holding(needle), "the control should leave the credential in a live process")
	})
}

// TestNoHostSideChildOutlivesItsCall: a helper git starts and does not wait
// for (here a shell alias's background sleep, holding the call's
// credential in its environment and git's stdout) is killed when git
// exits: the call returns at once, not after the output wait, and no
// process keeps the credential.
func TestNoHostSideChildOutlivesItsCall(t *testing.T) {
	r := newRunnerT(t)
	repo := gittest.InitRepo(t, filepath.Join(t.TempDir(), "repo"), "main")
	url := "https://git.invalid/o/r.git"
	secret := fmt.Sprintf("outlive-call-secret-%d", os.Getpid())
	needle := base64.StdEncoding.EncodeToString([]byte(srvUser + ":" + secret))
	start := time.Now()
	out, err := r.Run(context.Background(), Call{Dir: repo, Args: []string{"lingering"},
		Config: []ConfigEntry{{Key: "alias.lingering", Value: "!sleep 300 & echo started"}},
		Cred:   &sandbox.Credential{Username: srvUser, Secret: secret}, RemoteURL: url, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, "started\n", string(out))
	assert.Less(t, time.Since(start), 3*time.Second, "the call waited for its lingering helper's output")
	deadline := time.Now().Add(2 * time.Second)
	for len(holding(needle)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, holding(needle), "a helper of a finished call still holds its credential")
}
