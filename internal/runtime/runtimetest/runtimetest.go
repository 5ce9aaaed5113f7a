// Package runtimetest is the one conformance suite every sandbox.RuntimeProvider
// (local, bwrap, Docker, …) must pass (DESIGN.md "Layout": runtime/runtimetest).
// A backend's test calls Run with a Factory that builds a provider and a spec
// for a fresh, empty workspace directory on the host:
//
//	func TestConformance(t *testing.T) {
//		runtimetest.Run(t, func(t *testing.T) runtimetest.Env { ... }, runtimetest.Options{})
//	}
//
// The suite needs sh and the POSIX tools (cat, env, head, tr, sleep, date,
// pwd, printf, kill) inside the runtime, and runs its subtests one after the
// other (several measure time). It takes about 20 seconds.
package runtimetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Env is what a Factory returns for one subtest: a provider, a spec for a
// fresh runtime, and the host directory the runtime's workdir is backed by.
type Env struct {
	// Provider is the provider under test. The suite may create several
	// runtimes on it (with ids derived from Spec.ID) and destroys them at the
	// end of the subtest.
	Provider sandbox.RuntimeProvider
	// Spec describes a runtime over a fresh, empty, writable workspace. Its ID
	// must be unique to this Env. The suite may change ID, Env and Network
	// before creating runtimes from it; it never changes Workdir or Mounts.
	Spec sandbox.RuntimeSpec
	// HostDir is the host directory backing Spec.Workdir (runtimes whose
	// workdir is a host directory); Files and Workspace default to it.
	HostDir string
	// Files is the runtime's own view of its workdir (relative paths, ".."
	// allowed): the suite writes there what commands must find and checks
	// there what they did, also while and after they run. For a remote
	// runtime it reaches into the sandbox (its replica), not the host.
	Files Files
	// Workspace is the durable workspace behind the runtime (for a remote
	// runtime, the host worktree its replica is synced with): what must
	// survive Destroy. nil means Files.
	Workspace Files
	// Reopen, when non-nil, returns a new provider over the same backend state,
	// as a restarted worker would build it; the suite then checks that Create
	// with the same spec works again and sees the files. nil skips that check.
	Reopen func(t *testing.T) sandbox.RuntimeProvider
}

// Factory builds a fresh Env for one subtest (use t.TempDir for HostDir and
// t.Cleanup for anything else to release).
type Factory func(t *testing.T) Env

// Options adjust the suite to what a backend declares.
type Options struct {
	// SkipNetworkIsolation, when non-empty, is the reason the network-isolation
	// subtest is skipped. It must be set when the provider reports
	// Capabilities().Isolated == false (such a runtime cannot block the network)
	// and must be empty when it reports true (an isolated runtime must pass);
	// the suite fails otherwise, so the skip is always explicit.
	SkipNetworkIsolation string
}

// testTimeout bounds every subtest's context so a hung runtime fails instead
// of hanging the test binary.
const testTimeout = 2 * time.Minute

// Run runs the conformance suite against the backend built by f. Subtests:
// Lifecycle, ExitCodes, SeparateStreams, Stdin, Cwd, BadInput,
// EnvIsolation, TimeoutKillsProcessTree, BackgroundChildDoesNotHoldCall,
// ContextCancelKillsProcessTree, OutputCaps, ExecStream, ConcurrentExecs,
// HibernateResume, StopKillsRunningCommand, DestroyKeepsWorkspace, Reopen,
// NetworkIsolation, KernelInterfacesReadOnly.
func Run(t *testing.T, f Factory, opts Options) {
	s := &suite{f: f, opts: opts}
	t.Run("Lifecycle", s.lifecycle)
	t.Run("ExitCodes", s.exitCodes)
	t.Run("SeparateStreams", s.separateStreams)
	t.Run("Stdin", s.stdin)
	t.Run("Cwd", s.cwd)
	t.Run("BadInput", s.badInput)
	t.Run("EnvIsolation", s.envIsolation)
	t.Run("HostMounts", s.hostMounts)
	t.Run("TimeoutKillsProcessTree", s.timeoutKillsTree)
	t.Run("BackgroundChildDoesNotHoldCall", s.backgroundChild)
	t.Run("ContextCancelKillsProcessTree", s.cancelKillsTree)
	t.Run("OutputCaps", s.outputCaps)
	t.Run("ExecStream", s.execStream)
	t.Run("ConcurrentExecs", s.concurrentExecs)
	t.Run("HibernateResume", s.hibernateResume)
	t.Run("StopKillsRunningCommand", s.stopKillsRunning)
	t.Run("DestroyKeepsWorkspace", s.destroyKeepsWorkspace)
	t.Run("Reopen", s.reopen)
	t.Run("NetworkIsolation", s.networkIsolation)
	t.Run("KernelInterfacesReadOnly", s.kernelInterfacesReadOnly)
}

// portPreviewer is the method set the preview_url activity asserts on a
// provider (activities.PortPreviewer; docs/API.md "Preview URLs"): the
// lifecycle check holds a provider to it exactly when Capabilities
// reports PreviewURL.
type portPreviewer interface {
	PreviewURL(ctx context.Context, runtimeID string, port int) (sandboxapi.PreviewURL, error)
}

type suite struct {
	f     Factory
	opts  Options
	popts ProcessOptions
}

// setup builds an Env, lets mutate adjust its spec, creates the runtime and
// registers its destruction.
func (s *suite) setup(t *testing.T, mutate func(*sandbox.RuntimeSpec)) (context.Context, Env, sandbox.Runtime) {
	t.Helper()
	return s.create(t, s.newEnv(t), mutate)
}

func (s *suite) newEnv(t *testing.T) Env {
	t.Helper()
	env := s.f(t)
	require.NotNil(t, env.Provider, "factory returned no provider")
	if env.Files == nil {
		require.NotEmpty(t, env.HostDir, "factory returned neither Files nor a host dir")
		env.Files = HostFiles(env.HostDir)
	}
	if env.Workspace == nil {
		env.Workspace = env.Files
	}
	return env
}

func (s *suite) create(t *testing.T, env Env, mutate func(*sandbox.RuntimeSpec)) (context.Context, Env, sandbox.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	if mutate != nil {
		mutate(&env.Spec)
	}
	rt, err := env.Provider.Create(ctx, env.Spec)
	require.NoError(t, err, "Create")
	require.Equal(t, env.Spec.ID, rt.ID())
	p, id := env.Provider, env.Spec.ID
	t.Cleanup(func() {
		if err := p.Destroy(context.Background(), id); err != nil {
			t.Errorf("cleanup: Destroy(%s): %v", id, err)
		}
	})
	return ctx, env, rt
}

func sh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

func mustExec(t *testing.T, ctx context.Context, rt sandbox.Runtime, req sandboxapi.ExecRequest) sandboxapi.ExecResult {
	t.Helper()
	if req.TimeoutS == 0 {
		req.TimeoutS = 60
	}
	res, err := rt.Exec(ctx, req)
	require.NoError(t, err, "Exec %q", req.Cmd)
	return res
}

func requireExit(t *testing.T, res sandboxapi.ExecResult, code int) {
	t.Helper()
	require.Equal(t, code, res.ExitCode, "exit code; stdout=%q stderr=%q", clipBytes(res.Stdout), clipBytes(res.Stderr))
}

func clipBytes(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
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

func (s *suite) exitCodes(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"true"}}), 0)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("exit 3")}), 3)

	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"runtimetest-no-such-command-xyz", "arg"}})
	requireExit(t, res, 127)
	require.NotEmpty(t, res.Stderr, "a missing command explains itself on stderr")
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./no-such-file"}}), 127)

	require.NoError(t, env.Files.WriteFile("noexec.sh", []byte("#!/bin/sh\necho hi\n"), 0o644))
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./noexec.sh"}}), 126)
	require.NoError(t, env.Files.WriteFile("exec.sh", []byte("#!/bin/sh\necho hi \"$1\"\n"), 0o755))
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./exec.sh", "there"}})
	requireExit(t, res, 0)
	require.Equal(t, "hi there\n", string(res.Stdout))

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("kill -9 $$")})
	requireExit(t, res, 128+9)
	require.False(t, res.TimedOut)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"sleep", "1"}})
	require.GreaterOrEqual(t, res.DurationMS, int64(900), "DurationMS")
}

func (s *suite) separateStreams(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo out; echo err >&2; exit 1")})
	requireExit(t, res, 1)
	require.Equal(t, "out\n", string(res.Stdout))
	require.Equal(t, "err\n", string(res.Stderr))
	require.Equal(t, int64(4), res.StdoutBytes)
	require.Equal(t, int64(4), res.StderrBytes)
	require.False(t, res.Truncated)
	require.False(t, res.TimedOut)

	// Argv is passed verbatim: no shell interprets it.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"printf", "%s|", "a b", "$HOME", "*", "'q'"}})
	requireExit(t, res, 0)
	require.Equal(t, "a b|$HOME|*|'q'|", string(res.Stdout))
}

func (s *suite) stdin(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	// Larger than a pipe buffer, with NUL and non-UTF-8 bytes.
	in := bytes.Repeat([]byte("line\x00\xff\n"), 20000)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"cat"}, Stdin: in, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit})
	requireExit(t, res, 0)
	require.True(t, bytes.Equal(in, res.Stdout), "stdin round trip (got %d bytes, want %d)", len(res.Stdout), len(in))

	// Without Stdin the command reads an immediate EOF (/dev/null).
	start := time.Now()
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("cat; echo done"), TimeoutS: 10})
	requireExit(t, res, 0)
	require.Equal(t, "done\n", string(res.Stdout))
	require.Less(t, time.Since(start), 5*time.Second)

	// A command that ignores its stdin still finishes.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"true"}, Stdin: bytes.Repeat([]byte("x"), sandboxapi.MaxStdinBytes)})
	requireExit(t, res, 0)
}

func (s *suite) cwd(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"pwd"}})
	requireExit(t, res, 0)
	want := []string{env.Spec.Workdir}
	if real, err := filepath.EvalSymlinks(env.Spec.Workdir); err == nil {
		want = append(want, real)
	}
	require.Contains(t, want, strings.TrimSuffix(string(res.Stdout), "\n"), "default cwd is the workdir")

	require.NoError(t, env.Files.MkdirAll("sub/deeper"))
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo here > marker"), Cwd: "sub/deeper"})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("sub/deeper/marker"))

	// A symlink inside the workspace that leads out of it is refused as a cwd.
	outside := t.TempDir()
	require.NoError(t, env.Files.Symlink("..", "up"))
	require.NoError(t, env.Files.Symlink(outside, "out"))
	require.NoError(t, env.Files.Symlink("sub", "insidelink"))
	for _, cwd := range []string{"up", "out", "sub/../up", "../", "..", "/", "/tmp", "missing-dir", "noexec-file"} {
		if cwd == "noexec-file" {
			require.NoError(t, env.Files.WriteFile(cwd, nil, 0o644))
		}
		_, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("echo escaped > escaped-marker"), Cwd: cwd, TimeoutS: 10})
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "cwd %q", cwd)
	}
	require.False(t, env.Files.Exists("../escaped-marker"))
	require.NoFileExists(t, filepath.Join(outside, "escaped-marker"))
	require.False(t, env.Files.Exists("escaped-marker"))

	// A symlink that stays inside is fine.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo ok > via-link"), Cwd: "insidelink"})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("sub/via-link"))
}

func (s *suite) badInput(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	touch := sh("touch ran")
	maxTimeoutS := int(sandboxapi.MaxExecTimeout / time.Second)
	cases := map[string]sandboxapi.ExecRequest{
		"nil cmd":              {},
		"empty cmd":            {Cmd: []string{}},
		"empty argv0":          {Cmd: []string{"", "x"}},
		"NUL in argv":          {Cmd: sh("touch ran\x00")},
		"NUL in argv0":         {Cmd: []string{"sh\x00", "-c", "touch ran"}},
		"env key with =":       {Cmd: touch, Env: map[string]string{"A=B": "x"}},
		"empty env key":        {Cmd: touch, Env: map[string]string{"": "x"}},
		"NUL in env key":       {Cmd: touch, Env: map[string]string{"A\x00": "x"}},
		"NUL in env value":     {Cmd: touch, Env: map[string]string{"A": "x\x00y"}},
		"negative timeout":     {Cmd: touch, TimeoutS: -1},
		"timeout above max":    {Cmd: touch, TimeoutS: maxTimeoutS + 1},
		"negative output cap":  {Cmd: touch, MaxOutputBytes: -1},
		"output cap above max": {Cmd: touch, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit + 1},
		"stdin too large":      {Cmd: touch, Stdin: make([]byte, sandboxapi.MaxStdinBytes+1)},
		"cwd dotdot":           {Cmd: touch, Cwd: "../x"},
		"cwd inner dotdot":     {Cmd: touch, Cwd: "a/../../b"},
		"cwd absolute":         {Cmd: touch, Cwd: "/tmp"},
		"cwd control char":     {Cmd: touch, Cwd: "a\x01b"},
	}
	for name, req := range cases {
		_, err := rt.Exec(ctx, req)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
		_, err = rt.ExecStream(ctx, req, func(sandboxapi.ExecChunk) {})
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name+" (ExecStream)")
	}
	require.False(t, env.Files.Exists("ran"), "nothing may run on bad input")
	// The limits themselves are accepted.
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: touch, TimeoutS: maxTimeoutS, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit, Stdin: make([]byte, sandboxapi.MaxStdinBytes)})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("ran"))
}

func (s *suite) envIsolation(t *testing.T) {
	const secretName = "RUNTIMETEST_WORKER_SECRET"
	const secretValue = "sk-runtimetest-5f1c0ffee"
	t.Setenv(secretName, secretValue)
	ctx, _, rt := s.setup(t, func(sp *sandbox.RuntimeSpec) {
		sp.Env = map[string]string{"RUNTIMETEST_SPEC": "from-spec", "RUNTIMETEST_BOTH": "spec"}
	})
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"RUNTIMETEST_REQ": "from-req", "RUNTIMETEST_BOTH": "req"}})
	requireExit(t, res, 0)
	out := string(res.Stdout)
	require.NotContains(t, out, secretValue, "the worker's environment leaked into the runtime")
	require.NotContains(t, out, secretName, "the worker's environment leaked into the runtime")
	lines := strings.Split(out, "\n")
	require.Contains(t, lines, "RUNTIMETEST_SPEC=from-spec")
	require.Contains(t, lines, "RUNTIMETEST_REQ=from-req")
	require.Contains(t, lines, "RUNTIMETEST_BOTH=req", "ExecRequest.Env wins over RuntimeSpec.Env")
	hasPath := false
	for _, l := range lines {
		hasPath = hasPath || strings.HasPrefix(l, "PATH=/")
	}
	require.True(t, hasPath, "PATH is set")
	// The documented base (docs/RUNTIMES.md "Runtime environment").
	require.Contains(t, lines, "LANG=C.UTF-8")
	require.Contains(t, lines, "TERM=dumb")
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(`case "$HOME" in /*) ;; *) exit 3;; esac; touch "$HOME/.runtimetest-home" && echo "$PATH"`),
		Env: map[string]string{"PATH": "/runtimetest/bin:/usr/bin:/bin"}})
	requireExit(t, res, 0)
	require.Equal(t, "/runtimetest/bin:/usr/bin:/bin\n", string(res.Stdout), "a command's env sets PATH too; HOME is an absolute, writable directory")
}

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

func (s *suite) outputCaps(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	const limit = 64 << 10

	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"printf", "abc"}, MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.Equal(t, "abc", string(res.Stdout))
	require.False(t, res.Truncated)
	require.Equal(t, int64(3), res.StdoutBytes)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' b`, limit)), MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.False(t, res.Truncated, "output of exactly the cap is not truncated")
	require.Equal(t, strings.Repeat("b", limit), string(res.Stdout))

	const big = 50_000_000
	start := time.Now()
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a`, big)), MaxOutputBytes: limit})
	t.Logf("50 MB of output took %v", time.Since(start))
	requireExit(t, res, 0)
	require.True(t, res.Truncated)
	require.Equal(t, int64(big), res.StdoutBytes)
	require.LessOrEqual(t, len(res.Stdout), limit+100, "kept output is bounded by the cap plus a marker")
	require.GreaterOrEqual(t, len(res.Stdout), limit, "head and tail together fill the cap")
	require.True(t, bytes.HasPrefix(res.Stdout, bytes.Repeat([]byte("a"), limit/4)), "head kept")
	require.True(t, bytes.HasSuffix(res.Stdout, bytes.Repeat([]byte("a"), limit/4)), "tail kept")
	require.Contains(t, string(res.Stdout), "truncated", "a marker shows where bytes were dropped")
	require.Empty(t, res.Stderr)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(`echo first >&2; head -c 300000 /dev/zero | tr '\0' e >&2; echo last >&2; echo out`), MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.True(t, res.Truncated)
	require.Equal(t, int64(300000+len("first\n")+len("last\n")), res.StderrBytes)
	require.LessOrEqual(t, len(res.Stderr), limit+100)
	require.True(t, bytes.HasPrefix(res.Stderr, []byte("first\n")))
	require.True(t, bytes.HasSuffix(res.Stderr, []byte("eeelast\n")))
	require.Equal(t, "out\n", string(res.Stdout), "each stream has its own cap")
}

// hostMounts: a provider that reports HostMounts shares a host directory
// mounted at its own path with the runtime live, both ways (what the
// dependency caches rely on, docs/RUNTIMES.md "Dependency caches"); one that
// does not is skipped.
func (s *suite) hostMounts(t *testing.T) {
	env := s.newEnv(t)
	if !env.Provider.Capabilities().HostMounts {
		t.Skip("the provider does not report HostMounts")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "from-host"), []byte("host\n"), 0o644))
	if env.HostDir != "" {
		// Owned like the worktree, as the worker makes a cache directory.
		if fi, err := os.Stat(env.HostDir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
				require.NoError(t, os.Chown(dir, int(st.Uid), int(st.Gid)))
			}
		}
	}
	ctx, _, rt := s.create(t, env, func(spec *sandbox.RuntimeSpec) {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: dir, Target: dir, Writable: true})
		spec.Env = maps.Clone(spec.Env)
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env["CACHE_DIR"] = dir
	})
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(`cat "$CACHE_DIR/from-host" && echo runtime > "$CACHE_DIR/from-runtime"`), TimeoutS: 30})
	require.NoError(t, err)
	requireExit(t, res, 0)
	assert.Equal(t, "host\n", string(res.Stdout))
	b, err := os.ReadFile(filepath.Join(dir, "from-runtime"))
	require.NoError(t, err, "the runtime's write is on the host")
	assert.Equal(t, "runtime\n", string(b))
}

func (s *suite) execStream(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	var (
		mu       sync.Mutex
		chunks   []sandboxapi.ExecChunk
		firstAt  time.Duration
		inside   atomic.Int32
		overlaps atomic.Int32
	)
	start := time.Now()
	res, err := rt.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: sh("echo a; echo e >&2; sleep 2; echo b"), TimeoutS: 30}, func(c sandboxapi.ExecChunk) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		if len(chunks) == 0 {
			firstAt = time.Since(start)
		}
		chunks = append(chunks, c)
	})
	endAt := time.Since(start)
	require.NoError(t, err)
	requireExit(t, res, 0)
	require.Equal(t, "a\nb\n", string(res.Stdout))
	require.Equal(t, "e\n", string(res.Stderr))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, chunks)
	// Measured from the end, not the start: starting the command may be
	// slow on a loaded machine, but its first line must come while it
	// still sleeps (2 s), not with its end.
	require.Greater(t, endAt-firstAt, time.Second, "the first chunk must arrive before the command ends (first at %v, end at %v)", firstAt, endAt)
	require.Zero(t, overlaps.Load(), "onChunk calls must be serialized")
	var out, errOut []byte
	for _, c := range chunks {
		switch c.Stream {
		case "stdout":
			out = append(out, c.Data...)
		case "stderr":
			errOut = append(errOut, c.Data...)
		default:
			t.Fatalf("chunk with stream %q", c.Stream)
		}
	}
	require.Equal(t, "a\nb\n", string(out), "stdout chunks add up to the result")
	require.Equal(t, "e\n", string(errOut), "stderr chunks add up to the result")
}

// concurrentExecs: three execs on one runtime run at the same time. Each
// command records when its sleep began and ended (the runtime's clock);
// they overlap when the latest start comes before the earliest end, which
// no serialization could produce whatever each exec's overhead.
func (s *suite) concurrentExecs(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	// Each command prints the times it started and ended its sleep; they
	// ran concurrently when every one started before any ended, however
	// slow the machine or the backend's round trips are.
	var wg sync.WaitGroup
	results := make([]sandboxapi.ExecResult, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("date +%s%N; sleep 2; date +%s%N; echo $0-" + strconv.Itoa(i)), TimeoutS: 60})
		})
	}
	wg.Wait()
	var latestStart, earliestEnd int64 = 0, math.MaxInt64
	for i := range results {
		require.NoError(t, errs[i])
		requireExit(t, results[i], 0)
		lines := strings.Split(strings.TrimSpace(string(results[i].Stdout)), "\n")
		require.Len(t, lines, 3, "stdout %q", results[i].Stdout)
		require.Equal(t, "sh-"+strconv.Itoa(i), lines[2])
		startNS, err := strconv.ParseInt(lines[0], 10, 64)
		require.NoError(t, err)
		endNS, err := strconv.ParseInt(lines[1], 10, 64)
		require.NoError(t, err)
		latestStart, earliestEnd = max(latestStart, startNS), min(earliestEnd, endNS)
	}
	require.Less(t, latestStart, earliestEnd, "execs on one runtime run concurrently: every one started before any finished")
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

// netProbeScript tries to open a TCP connection to 127.0.0.1:$1 with whatever
// tool the runtime has; it exits 99 when it has none.
const netProbeScript = `port=$1
if command -v bash >/dev/null 2>&1; then
	exec bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' bash "$port"
elif command -v nc >/dev/null 2>&1; then
	exec nc -z -w 3 127.0.0.1 "$port"
elif command -v python3 >/dev/null 2>&1; then
	exec python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3)' "$port"
elif command -v curl >/dev/null 2>&1; then
	exec curl -s -m 3 -o /dev/null "http://127.0.0.1:$port/"
elif command -v wget >/dev/null 2>&1; then
	exec wget -q -T 3 -O /dev/null "http://127.0.0.1:$port/"
fi
exit 99`

// listen opens a loopback listener on the host and counts accepted connections.
func listen(t *testing.T) (port string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

func (s *suite) networkIsolation(t *testing.T) {
	env := s.newEnv(t)
	isolated := env.Provider.Capabilities().Isolated
	switch {
	case isolated && s.opts.SkipNetworkIsolation != "":
		t.Fatalf("provider %s reports Isolated=true: it must pass network isolation, not skip it (%s)", env.Provider.Kind(), s.opts.SkipNetworkIsolation)
	case !isolated && s.opts.SkipNetworkIsolation == "":
		t.Fatalf("provider %s reports Isolated=false and cannot block the network: set Options.SkipNetworkIsolation to say why", env.Provider.Kind())
	case !isolated:
		t.Skip(s.opts.SkipNetworkIsolation)
	}
	ctx, _, rt := s.create(t, env, func(sp *sandbox.RuntimeSpec) { sp.Network = sandboxapi.NetworkNone })
	port, accepted := listen(t)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(netProbeScript, port), TimeoutS: 30})
	require.NoError(t, err)
	require.NotEqual(t, 99, res.ExitCode, "no network probe tool (bash, nc, python3, curl or wget) in the runtime")
	require.NotEqual(t, 0, res.ExitCode, "a connection to 127.0.0.1:%s succeeded with network none", port)
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, accepted.Load(), "the host's loopback listener accepted a connection from a network-none runtime")
}
