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
	"context"
	"testing"
	"time"

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
