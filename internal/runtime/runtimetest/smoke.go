package runtimetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SmokeEnv is the switch of the smoke checks against a real service: they
// run only when it is "1" and the service's key is set (make smoke-daytona,
// make smoke-e2b; docs/PRODUCTION.md "Before trusting a new service
// version").
const SmokeEnv = "SANDBOX_SMOKE"

// SmokeKey returns the value of the service's key variable, skipping the
// test with a message saying how to run it when SmokeEnv is not "1" or
// the key is unset.
func SmokeKey(t *testing.T, keyVar string) string {
	t.Helper()
	key := os.Getenv(keyVar)
	if os.Getenv(SmokeEnv) != "1" || key == "" {
		t.Skipf("smoke check against the real service skipped: set %s and %s=1 (make smoke-…)", keyVar, SmokeEnv)
	}
	return key
}

// Smoke is the scripted check a remote runtime passes against its real
// service before a new service version is trusted: create a runtime over
// a git worktree → exec → a host file goes up → a command's file comes
// back → stop (hibernate, pause) → start (resume) and the sandbox's files
// are still there → destroy, after which the runtime is gone. spec is the
// runtime's spec over the worktree wt (GitFixture). It cleans up whatever
// it created, also when it fails.
func Smoke(t *testing.T, p sandbox.RuntimeProvider, spec sandbox.RuntimeSpec, wt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	step := func(name string, start time.Time) {
		t.Logf("ok %s (%s)", name, time.Since(start).Round(time.Millisecond))
	}

	start := time.Now()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err, "create")
	step("create", start)

	start = time.Now()
	res := Sh(t, ctx, rt, "echo smoke; git rev-parse --abbrev-ref HEAD")
	RequireOK(t, res)
	require.Contains(t, string(res.Stdout), "smoke\n")
	step("exec (git works in the replica)", start)

	start = time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(wt, "up.txt"), []byte("from the host\n"), 0o644))
	res = Sh(t, ctx, rt, "cat up.txt && printf 'from the sandbox\\n' > down.txt")
	RequireOK(t, res)
	require.Equal(t, "from the host\n", string(res.Stdout), "upload")
	got, err := os.ReadFile(filepath.Join(wt, "down.txt"))
	require.NoError(t, err, "download")
	require.Equal(t, "from the sandbox\n", string(got))
	step("upload and download", start)

	start = time.Now()
	require.NoError(t, rt.Stop(ctx), "stop")
	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeStopped, st, "stopped")
	step("stop", start)

	start = time.Now()
	require.NoError(t, rt.Start(ctx), "start")
	res = Sh(t, ctx, rt, "cat down.txt")
	RequireOK(t, res)
	require.Equal(t, "from the sandbox\n", string(res.Stdout), "the sandbox's files survive stop and start")
	step("start", start)

	start = time.Now()
	require.NoError(t, p.Destroy(ctx, spec.ID), "destroy")
	_, err = p.Get(ctx, spec.ID)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "destroyed")
	step("destroy", start)
}
