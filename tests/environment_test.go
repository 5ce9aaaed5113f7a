package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// TestGoTestRunsWithTheHostToolchainAndSharedCaches (docs/RUNTIMES.md
// "Runtime environment", "Dependency caches"): `go test ./...` of a Go
// repository passes in a new workspace with no PATH of the caller's (the
// host's /usr/local/go/bin is on the runtime's PATH); a second workspace of
// the same user and repository finds the test result in the shared build
// cache ("(cached)"); another user's workspace of the same repository sees
// neither that cache nor a file the first user planted in the module
// cache.
func TestGoTestRunsWithTheHostToolchainAndSharedCaches(t *testing.T) {
	h := startHost(t, "envgo")
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" && k != "local" {
		t.Skipf("the host toolchain's PATH is the bubblewrap and local runtimes' (this host runs %s)", k)
	}
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "gomod"), "main")
	gittest.Commit(t, upstream, "go.mod", "module example.com/m\n\ngo 1.21\n", "module")
	gittest.Commit(t, upstream, "m.go", "package main\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n", "code")
	gittest.Commit(t, upstream, "m_test.go", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n", "test")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 8*time.Minute)
	alice, bob := uniq(t, "alice"), uniq(t, "bob")
	goTest := sandboxapi.ExecRequest{Cmd: []string{"go", "test", "./..."}, TimeoutS: 300}

	s1, _, err := h.client.Acquire(ctx, editRequest(alice, "p", "c1", url))
	require.NoError(t, err)
	res, err := s1.Exec(ctx, goTest)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stdout %s\nstderr %s", res.Stdout, res.Stderr)
	assert.Contains(t, string(res.Stdout), "ok  \texample.com/m")
	assert.NotContains(t, string(res.Stdout), "(cached)", "a cold cache")
	plant, err := s1.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `mkdir -p "$GOMODCACHE/cache/download" && echo evil > "$GOMODCACHE/cache/download/planted" && go env GOCACHE`}})
	require.NoError(t, err)
	require.Equal(t, 0, plant.ExitCode, "%s", plant.Stderr)
	gocache := strings.TrimSpace(string(plant.Stdout))
	assert.NotContains(t, gocache, "/workspace", "the cache is never in the worktree")

	s2, _, err := h.client.Acquire(ctx, editRequest(alice, "p", "c2", url))
	require.NoError(t, err)
	res, err = s2.Exec(ctx, goTest)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Contains(t, string(res.Stdout), "(cached)", "the same user's next workspace of the repository is warm")

	s3, _, err := h.client.Acquire(ctx, editRequest(bob, "p", "c1", url))
	require.NoError(t, err)
	probe, err := s3.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `go env GOCACHE; test -e "$GOMODCACHE/cache/download/planted" && echo planted-visible; ls -A "$(go env GOCACHE)" 2>/dev/null | wc -l`}})
	require.NoError(t, err)
	require.Equal(t, 0, probe.ExitCode, "%s", probe.Stderr)
	lines := strings.Split(strings.TrimSpace(string(probe.Stdout)), "\n")
	require.Len(t, lines, 2, "%s", probe.Stdout)
	assert.NotEqual(t, gocache, lines[0], "another user has a cache of its own")
	assert.Equal(t, "0", strings.TrimSpace(lines[1]), "another user's cache starts empty")
	assert.NotContains(t, string(probe.Stdout), "planted-visible", "a file planted in one user's cache never reaches another's")

	st, err := s1.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "the caches are not in the worktree: %+v", st.Files)
}

// TestRepositoryEnvironment (docs/RUNTIMES.md "Repository environment"):
// a repository's devcontainer.json (with comments) and .sandboxcore.yaml
// are read at the base commit into the handle and describe; their
// variables reach every command under the worker's own; an agent's edit of
// the files changes nothing; a hostile file never fails the acquire, its
// refusals are listed and nothing of it is applied.
func TestRepositoryEnvironment(t *testing.T) {
	h := startHost(t, "repoenv")
	ctx := ctxFor(t, 3*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "envrepo"), "main")
	gittest.Commit(t, upstream, ".devcontainer/devcontainer.json", `{
  // what the project needs
  "image": "mcr.microsoft.com/devcontainers/base:bookworm",
  "containerEnv": {"FROM_DEVCONTAINER": "yes", "GIT_AUTHOR_NAME": "mallory"},
  "postCreateCommand": "npm ci",
  "forwardPorts": [3000],
  "customizations": {"vscode": {}},
}`, "devcontainer")
	gittest.Commit(t, upstream, ".sandboxcore.yaml", "env:\n  FROM_YAML: \"1\"\nlockfiles: [package-lock.json]\n", "override")
	s, hd, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	env := hd.Environment
	require.NotNil(t, env, "the handle carries the repository environment")
	assert.Equal(t, []string{".devcontainer/devcontainer.json", ".sandboxcore.yaml"}, env.Sources)
	assert.Equal(t, "mcr.microsoft.com/devcontainers/base:bookworm", env.Image)
	assert.Equal(t, map[string]string{"FROM_DEVCONTAINER": "yes", "FROM_YAML": "1"}, env.Env)
	assert.Equal(t, [][]string{{"sh", "-c", "npm ci"}}, env.Setup)
	assert.Equal(t, []string{"package-lock.json"}, env.Lockfiles)
	assert.Equal(t, []int{3000}, env.ForwardPorts)
	assert.Equal(t, []string{"customizations"}, env.Ignored)
	require.Len(t, env.Problems, 1)
	assert.Contains(t, env.Problems[0], "GIT_AUTHOR_NAME is set by the worker")

	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `echo "$FROM_DEVCONTAINER $FROM_YAML $GIT_AUTHOR_NAME"`}})
	require.NoError(t, err)
	assert.Equal(t, "yes 1 sandboxcore agent\n", string(res.Stdout), "the repository's variables, under the worker's own")
	desc, err := s.Describe(ctx)
	require.NoError(t, err)
	require.NotNil(t, desc.Workspace)
	require.NotNil(t, desc.Workspace.Environment, "describe shows it too")
	assert.Equal(t, env.Env, desc.Workspace.Environment.Env)

	// The agent edits the file: the base commit's environment still holds.
	require.NoError(t, s.WriteFile(ctx, ".sandboxcore.yaml", []byte("env:\n  FROM_YAML: edited\n"), 0))
	_, hd2, err := h.client.Acquire(ctx, editRequest(hd.UserID, "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	assert.Equal(t, "1", hd2.Environment.Env["FROM_YAML"])

	bad := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "badenv"), "main")
	gittest.Commit(t, bad, ".sandboxcore.yaml", "setup: make\nsetup: rm -rf /\nprivileged: true\n", "hostile")
	gittest.Commit(t, bad, ".devcontainer/devcontainer.json", `{"containerEnv": {"TOKEN": "${localEnv:SANDBOX_DATA_DIR}"}}`, "hostile")
	s3, hd3, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(bad)))
	require.NoError(t, err, "a hostile environment never fails the acquire")
	require.NotNil(t, hd3.Environment)
	assert.Empty(t, hd3.Environment.Env)
	assert.Empty(t, hd3.Environment.Setup)
	problems := strings.Join(hd3.Environment.Problems, "\n")
	assert.Contains(t, problems, "already defined")
	assert.Contains(t, problems, "substitution")
	res, err = s3.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `echo "[$TOKEN]"`}})
	require.NoError(t, err)
	assert.Equal(t, "[]\n", string(res.Stdout))
}

// TestSetupRunsOncePerWorkspace (docs/RUNTIMES.md "Setup"): the
// repository's setup runs after a new workspace's acquire (wait: the
// acquire returns once it ended, its state and output tails in the handle
// and describe); with auto a command sent meanwhile waits for it; a failing
// setup is reported and loses nothing; skip runs nothing; a lockfile
// changed in the worktree runs it again on the next resume.
func TestSetupRunsOncePerWorkspace(t *testing.T) {
	h := startHost(t, "setup")
	ctx := ctxFor(t, 4*time.Minute)
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "setuprepo"), "main")
	gittest.Commit(t, up, "lock.txt", "v1\n", "lock")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup:\n  - echo installing; sleep 2; cat lock.txt >> installed.txt\n  - echo built >&2\nlockfiles: [lock.txt]\n", "setup")
	url := gittest.FileURL(up)
	user := uniq(t, "u")

	req := editRequest(user, "p", "wait", url)
	req.Setup = sandboxapi.SetupWait
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	require.NotNil(t, hd.Setup)
	assert.Equal(t, sandboxapi.SetupDone, hd.Setup.State, "%+v", hd.Setup)
	assert.Equal(t, 0, hd.Setup.ExitCode)
	assert.Equal(t, 2, hd.Setup.Commands)
	assert.Equal(t, "installing\n", hd.Setup.StdoutTail)
	assert.Equal(t, "built\n", hd.Setup.StderrTail)
	assert.GreaterOrEqual(t, hd.Setup.DurationMS, int64(2000))
	data, err := s.ReadFile(ctx, "installed.txt")
	require.NoError(t, err)
	assert.Equal(t, "v1\n", string(data))

	// auto: the acquire returns at once, the next command waits for the setup.
	sAuto, hAuto, err := h.client.Acquire(ctx, editRequest(user, "p", "auto", url))
	require.NoError(t, err)
	require.NotNil(t, hAuto.Setup)
	assert.Contains(t, []string{sandboxapi.SetupPending, sandboxapi.SetupRunning}, hAuto.Setup.State)
	res, err := sAuto.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "installed.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "v1\n", string(res.Stdout), "the command ran after the setup")
	desc, err := sAuto.Describe(ctx)
	require.NoError(t, err)
	require.NotNil(t, desc.Setup)
	assert.Equal(t, sandboxapi.SetupDone, desc.Setup.State)

	// skip: nothing runs.
	skip := editRequest(user, "p", "skip", url)
	skip.Setup = sandboxapi.SetupSkip
	sSkip, hSkip, err := h.client.Acquire(ctx, skip)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.SetupSkipped, hSkip.Setup.State)
	res, err = sSkip.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "test -e installed.txt || echo none"}})
	require.NoError(t, err)
	assert.Equal(t, "none\n", string(res.Stdout))

	// A lockfile changed in the worktree: the next resume runs it again.
	require.NoError(t, s.WriteFile(ctx, "lock.txt", []byte("v2\n"), 0))
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hd.WorkflowID, 30*time.Second)
	again := editRequest(user, "p", "wait", url)
	again.Setup = sandboxapi.SetupWait
	_, hd2, err := h.client.Acquire(ctx, again)
	require.NoError(t, err)
	require.NotNil(t, hd2.Setup)
	assert.Equal(t, sandboxapi.SetupDone, hd2.Setup.State)
	assert.NotEqual(t, hd.Setup.LockfilesHash, hd2.Setup.LockfilesHash)
	data, err = s.ReadFile(ctx, "installed.txt")
	require.NoError(t, err)
	assert.Equal(t, "v1\nv2\n", string(data), "ran again for the new lockfile")
	st, err := s.Setup(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.SetupDone, st.State, "the setup update runs it again")
	data, err = s.ReadFile(ctx, "installed.txt")
	require.NoError(t, err)
	assert.Equal(t, "v1\nv2\nv2\n", string(data))
	_, err = sSkip.Setup(ctx)
	require.NoError(t, err, "a skipped setup can be run later")

	// A failing setup is reported; the workspace stays usable.
	bad := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "badsetup"), "main")
	gittest.Commit(t, bad, ".devcontainer/devcontainer.json", `{"postCreateCommand": "echo oops >&2; exit 7"}`, "setup")
	breq := editRequest(user, "p", "bad", gittest.FileURL(bad))
	breq.Setup = sandboxapi.SetupWait
	sBad, hBad, err := h.client.Acquire(ctx, breq)
	require.NoError(t, err, "a failed setup never fails the acquire")
	require.NotNil(t, hBad.Setup)
	assert.Equal(t, sandboxapi.SetupFailed, hBad.Setup.State)
	assert.Equal(t, 7, hBad.Setup.ExitCode)
	assert.Equal(t, "oops\n", hBad.Setup.StderrTail)
	res, err = sBad.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)

	// A running setup is listed like an exec and can be cancelled.
	slow := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "slowsetup"), "main")
	gittest.Commit(t, slow, ".sandboxcore.yaml", "setup: sleep 120\n", "setup")
	sSlow, _, err := h.client.Acquire(ctx, editRequest(user, "p", "slow", gittest.FileURL(slow)))
	require.NoError(t, err)
	var running []string
	require.Eventually(t, func() bool {
		d, err := sSlow.Describe(ctx)
		running = d.RunningExecs
		return err == nil && len(running) == 1 && d.Setup != nil && d.Setup.State == sandboxapi.SetupRunning
	}, 30*time.Second, 100*time.Millisecond, "the setup shows as a running exec")
	assert.True(t, strings.HasPrefix(running[0], "setup-"), running[0])
	began := time.Now()
	c, err := sSlow.Cancel(ctx, running[0])
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.CancelRunning, c.State)
	res, err = sSlow.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	assert.Less(t, time.Since(began), 60*time.Second, "the cancelled setup no longer holds the workspace")
	d, err := sSlow.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.SetupFailed, d.Setup.State)
	assert.Contains(t, d.Setup.Error, "cancelled")
}

// TestSetupFromTheCLI: sandboxctl acquire --setup wait prints the setup's
// outcome; describe prints the environment (its problems escaped) and the
// setup; a bad --setup is a usage error that changes nothing.
func TestSetupFromTheCLI(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "setupcli")
	queue := h.Config.TaskQueue
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "clisetup"), "main")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup: echo ok\nenv:\n  \"BAD\\e[31mNAME\": x\n  GOOD: y\n", "setup")
	url := gittest.FileURL(up)
	user := uniq(t, "u")

	r := runCLI(t, bin, queue, "", "acquire", "--repo", url, "--user", user, "--project", "p", "--conversation", "c", "--setup", "later")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "setup")

	r = runCLI(t, bin, queue, "", "acquire", "--repo", url, "--user", user, "--project", "p", "--conversation", "c", "--setup", "wait")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^setup +done \(exit 0, `, r.stdout)
	assert.Regexp(t, `(?m)^environment +1 problem\(s\) in \.sandboxcore\.yaml`, r.stdout)
	var ws string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "workspace_id" {
			ws = f[1]
		}
	}
	require.NotEmpty(t, ws, r.stdout)
	r = runCLI(t, bin, queue, "", "describe", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^environment_env +GOOD$`, r.stdout)
	assert.Regexp(t, `(?m)^setup +done \(exit 0, `, r.stdout)
	assert.Contains(t, r.stdout, "environment_problem")
	assert.NotContains(t, r.stdout, "\x1b", "a repository's string never reaches the terminal raw")
	r = runCLI(t, bin, queue, "", "setup", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^setup done \(exit 0, `, r.stdout)
	assert.Contains(t, r.stdout, "ok\n")

	plain := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "nosetupcli"), "main")
	r = runCLI(t, bin, queue, "", "acquire", "--repo", gittest.FileURL(plain), "--user", user, "--project", "p", "--conversation", "c2", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var hd sandboxapi.Handle
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &hd))
	assert.Nil(t, hd.Setup)
	r = runCLI(t, bin, queue, "", "setup", hd.WorkspaceID)
	assert.Equal(t, 2, r.code, "no setup command: invalid argument")
	assert.Contains(t, r.stderr, "no setup command")
}

// TestSetupOffRunsNothing: with SANDBOX_SETUP=off the repository's setup
// commands are listed as a problem and never run.
func TestSetupOffRunsNothing(t *testing.T) {
	h := startHost(t, "setupoff", func(c *hostworker.Config) { c.Environment.NoSetup = true })
	ctx := ctxFor(t, 2*time.Minute)
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "nosetup"), "main")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup: touch ran\n", "setup")
	req := editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(up))
	req.Setup = sandboxapi.SetupWait
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, hd.Setup, "%+v", hd.Setup)
	require.NotNil(t, hd.Environment)
	assert.Empty(t, hd.Environment.Setup)
	assert.Contains(t, strings.Join(hd.Environment.Problems, "\n"), "SANDBOX_SETUP=off")
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "test -e ran && echo ran || echo none"}})
	require.NoError(t, err)
	assert.Equal(t, "none\n", string(res.Stdout))
}

// TestWorkerKilledDuringSetup (docs/RUNTIMES.md "Setup"): a worker killed
// with SIGKILL while the setup runs loses nothing: the restarted worker's
// session reports the setup failed (its host went away), the workspace's
// files are there, commands run, and the setup update runs it again.
func TestWorkerKilledDuringSetup(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "killsetup"), "main")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup: echo started >> setup.log; sleep 15; echo finished >> setup.log\n", "setup")
	dataDir := filepath.Join(t.TempDir(), "data")
	destroyLeftSandboxes(t, dataDir)
	env := append(os.Environ(), workerProcessEnv+"=1", "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_DATA_DIR="+dataDir,
		"SANDBOX_HOST_ID=setupkill", "SANDBOX_TASK_QUEUE=q-setupkill", "SANDBOX_ALLOW_FILE_URLS=1")
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	w1 := startWorker()
	client := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: "q-setupkill"})
	ctx := ctxFor(t, 4*time.Minute)
	s, hd, err := client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(up)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := s.Describe(ctx)
		return err == nil && d.Setup != nil && d.Setup.State == sandboxapi.SetupRunning
	}, time.Minute, 200*time.Millisecond, "the setup runs")
	time.Sleep(time.Second) // the command has started in the runtime
	require.NoError(t, syscall.Kill(w1.Process.Pid, syscall.SIGKILL))
	_, _ = w1.Process.Wait()
	startWorker()

	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "head -1 setup.log"}})
	require.NoError(t, err, "commands run once the session gave the setup up")
	assert.Equal(t, "started\n", string(res.Stdout), "the worktree kept what the setup wrote")
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	require.NotNil(t, d.Setup)
	assert.Equal(t, sandboxapi.SetupFailed, d.Setup.State)
	assert.NotEmpty(t, d.Setup.Error, "it says why")
	st, err := s.Setup(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.SetupDone, st.State, "%+v", st)
	assert.DirExists(t, hd.LocalPath)
}

// TestPreparedTreeSkipsSetup (docs/RUNTIMES.md "Prepared trees"): the
// first workspace runs its setup and keeps the prepared directories; the
// next workspace of the same user and lockfiles gets them without running
// the setup, as hard links its commands cannot change in place (a root
// worker on an isolating runtime) or as copies; another user's workspace
// never gets them; deleting the tree (what eviction does) while a workspace
// uses it loses nothing of that workspace, and the next one runs the setup
// and keeps the tree again.
func TestPreparedTreeSkipsSetup(t *testing.T) {
	h := startHost(t, "prepared")
	ctx := ctxFor(t, 4*time.Minute)
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "preparedrepo"), "main")
	gittest.Commit(t, up, "lock.txt", "v1\n", "lock")
	gittest.Commit(t, up, ".gitignore", "deps/\n", "ignore")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup: mkdir -p deps/lib && cp lock.txt deps/lib/v.txt && ln -s lib/v.txt deps/link && echo installed\nlockfiles: [lock.txt]\nprepared: [deps]\n", "setup")
	url := gittest.FileURL(up)
	user := uniq(t, "u")
	acquire := func(user, conv string) (*sandboxclient.Session, sandboxapi.Handle) {
		t.Helper()
		req := editRequest(user, "p", conv, url)
		req.Setup = sandboxapi.SetupWait
		s, hd, err := h.client.Acquire(ctx, req)
		require.NoError(t, err)
		require.NotNil(t, hd.Setup)
		require.Equal(t, sandboxapi.SetupDone, hd.Setup.State, "%+v", hd.Setup)
		require.NotNil(t, hd.Setup.Prepared, "%+v", hd.Setup)
		return s, hd
	}
	read := func(s *sandboxclient.Session, p string) string {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", p}})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
		return string(res.Stdout)
	}

	_, first := acquire(user, "first")
	assert.Equal(t, sandboxapi.PreparedSaved, first.Setup.Prepared.Action, "%+v", first.Setup.Prepared)
	assert.Equal(t, "installed\n", first.Setup.StdoutTail)
	assert.EqualValues(t, 1, first.Setup.Prepared.Files)

	s2, second := acquire(user, "second")
	p := second.Setup.Prepared
	assert.Equal(t, sandboxapi.PreparedRestored, p.Action, "%+v", p)
	assert.Equal(t, first.Setup.Prepared.Key, p.Key)
	assert.Empty(t, second.Setup.StdoutTail, "the setup commands did not run")
	assert.Equal(t, "v1\n", read(s2, "deps/lib/v.txt"))
	assert.Equal(t, "v1\n", read(s2, "deps/link"), "links kept as links")
	st, err := s2.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "the restored directory is ignored like the setup's own: %+v", st)

	kind := h.Activities.Runtimes.Kind()
	if os.Geteuid() == 0 && (kind == "bwrap" || kind == "docker") {
		assert.Equal(t, "link", p.Mode)
		// A command cannot change the shared file in place…
		res, err := s2.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo poisoned >> deps/lib/v.txt || chmod u+w deps/lib/v.txt"}})
		require.NoError(t, err)
		assert.NotEqual(t, 0, res.ExitCode, "%s", res.Stderr)
	} else {
		assert.Equal(t, "copy", p.Mode)
	}
	// …but the workspace may replace it: its directories are its own.
	res, err := s2.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "rm deps/lib/v.txt && echo mine > deps/lib/v.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Equal(t, "mine\n", read(s2, "deps/lib/v.txt"))

	s3, third := acquire(user, "third")
	assert.Equal(t, sandboxapi.PreparedRestored, third.Setup.Prepared.Action)
	assert.Equal(t, "v1\n", read(s3, "deps/lib/v.txt"), "what one workspace did reached no other")

	// Another user: the tree is not theirs.
	_, other := acquire(uniq(t, "other"), "first")
	assert.Equal(t, sandboxapi.PreparedSaved, other.Setup.Prepared.Action)
	assert.NotEqual(t, first.Setup.Prepared.Key, other.Setup.Prepared.Key)
	assert.Equal(t, "installed\n", other.Setup.StdoutTail)

	// The tree deleted while s3 uses it (eviction): s3 loses nothing; the
	// next workspace runs the setup and keeps the tree again.
	require.NoError(t, h.Activities.DepCaches.Remove("prepared/"+first.Setup.Prepared.Key))
	assert.Equal(t, "v1\n", read(s3, "deps/lib/v.txt"))
	assert.Equal(t, "v1\n", read(s3, "deps/link"))
	_, fourth := acquire(user, "fourth")
	assert.Equal(t, sandboxapi.PreparedSaved, fourth.Setup.Prepared.Action, "%+v", fourth.Setup.Prepared)
	assert.Equal(t, "installed\n", fourth.Setup.StdoutTail)
}

// TestExecBesideSetup (docs/RUNTIMES.md "Setup"): while the setup runs, a
// command sent with beside_setup runs at once next to it, one sent without
// waits for it; once the setup ended beside_setup changes nothing.
func TestExecBesideSetup(t *testing.T) {
	h := startHost(t, "beside")
	if !h.Activities.Runtimes.Capabilities().HostMounts {
		t.Skipf("a command runs beside the setup on runtimes on the worker's host (this host runs %s)", h.Activities.Runtimes.Kind())
	}
	ctx := ctxFor(t, 3*time.Minute)
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "besiderepo"), "main")
	gittest.Commit(t, up, ".sandboxcore.yaml", "setup: sleep 15; echo ready > .ready\n", "setup")
	s, hd, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "beside", gittest.FileURL(up)))
	require.NoError(t, err)
	require.NotNil(t, hd.Setup)
	probe := []string{"sh", "-c", "test -e .ready && cat .ready || echo not-ready"}
	require.Eventually(t, func() bool {
		d, err := s.Describe(ctx)
		return err == nil && d.Setup != nil && d.Setup.State == sandboxapi.SetupRunning
	}, time.Minute, 100*time.Millisecond)
	start := time.Now()
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: probe, BesideSetup: true})
	require.NoError(t, err)
	assert.Equal(t, "not-ready\n", string(res.Stdout), "ran while the setup ran")
	assert.Less(t, time.Since(start), 12*time.Second, "long before the setup ended")
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: probe})
	require.NoError(t, err)
	assert.Equal(t, "ready\n", string(res.Stdout), "waited for the setup")
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: probe, BesideSetup: true})
	require.NoError(t, err)
	assert.Equal(t, "ready\n", string(res.Stdout))
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.SetupDone, d.Setup.State)
}

// TestRepositoryImageOnDocker (docs/RUNTIMES.md "Repository environment"):
// the Docker runtime runs the image the repository names when
// SANDBOX_REPO_IMAGES allows it and the daemon has it; otherwise the
// worker's image runs and the environment's problems say why.
func TestRepositoryImageOnDocker(t *testing.T) {
	if os.Getenv("SANDBOX_RUNTIME_PROVIDER") != "docker" {
		t.Skip("the repository's image is run by the Docker runtime (SANDBOX_RUNTIME_PROVIDER=docker)")
	}
	base := os.Getenv("SANDBOX_RUNTIME_IMAGE")
	tag := "sandboxcore-repo-" + strings.ToLower(uniq(t, "img")) + ":v1"
	out, err := exec.Command("docker", "tag", base, tag).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
	h := startHost(t, "repoimage", func(c *hostworker.Config) { c.Environment.RepoImages = []string{"sandboxcore-repo-*"} })
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")
	for _, c := range []struct {
		name, image, problem string
	}{
		{"allowed", tag, ""},
		{"not-allowed", "other-image:v1", "SANDBOX_REPO_IMAGES does not allow it"},
		{"absent", "sandboxcore-repo-absent:v1", "not present on this worker's Docker daemon"},
	} {
		up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "img-"+c.name), "main")
		gittest.Commit(t, up, ".devcontainer/devcontainer.json", `{"image": "`+c.image+`"}`, "image")
		s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", c.name, gittest.FileURL(up)))
		require.NoError(t, err, c.name)
		require.NotNil(t, hd.Environment, c.name)
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		require.NoError(t, err, c.name)
		require.Equal(t, 0, res.ExitCode, c.name)
		ps, err := exec.Command("docker", "ps", "--filter", "label=sandboxcore.workspace="+hd.WorkspaceID, "--format", "{{.Image}}").Output()
		require.NoError(t, err)
		if c.problem == "" {
			assert.True(t, hd.Environment.ImageUsed, c.name)
			assert.Empty(t, hd.Environment.Problems, c.name)
			assert.Equal(t, tag, strings.TrimSpace(string(ps)), c.name)
			continue
		}
		assert.False(t, hd.Environment.ImageUsed, c.name)
		assert.Contains(t, strings.Join(hd.Environment.Problems, "\n"), c.problem, c.name)
		assert.Equal(t, base, strings.TrimSpace(string(ps)), "%s: the worker's image runs", c.name)
	}
}
