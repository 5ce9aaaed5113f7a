package local_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

var idSeq atomic.Int64

func newID() string { return "rt-local-" + strconv.FormatInt(idSeq.Add(1), 10) }

func testLogger(t *testing.T) *slog.Logger { return runtimetest.Logger(t, slog.LevelDebug) }

func specFor(dir string) sandbox.RuntimeSpec {
	return sandbox.RuntimeSpec{
		ID:          newID(),
		WorkspaceID: "ws-test",
		Workdir:     dir,
		Mounts:      []sandbox.Mount{{Source: dir, Target: dir, Writable: true}},
		Network:     sandboxapi.NetworkDefault,
	}
}

func factory(t *testing.T) runtimetest.Env {
	dir := t.TempDir()
	opts := local.Options{Logger: testLogger(t), Supervisor: supervisortest.Binary(t), StateDir: t.TempDir()}
	return runtimetest.Env{
		Provider: local.New(opts),
		Spec:     specFor(dir),
		HostDir:  dir,
		Reopen:   func(t *testing.T) sandbox.RuntimeProvider { return local.New(opts) },
	}
}

func TestConformance(t *testing.T) {
	runtimetest.Run(t, factory, runtimetest.Options{
		SkipNetworkIsolation: "the local subprocess runtime is not isolated (Capabilities().Isolated is false)",
	})
}

func setup(t *testing.T, opts local.Options) (context.Context, *local.Provider, sandbox.RuntimeSpec, sandbox.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	p := local.New(opts)
	spec := specFor(t.TempDir())
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	return ctx, p, spec, rt
}

func TestProcesses(t *testing.T) {
	runtimetest.RunProcesses(t, factory, runtimetest.ProcessOptions{
		ExecLeavesEscapees: "the local runtime's Exec kills its process group; a child that calls setsid escapes (package documentation)",
	})
}

func TestKindAndCapabilities(t *testing.T) {
	p := local.New(local.Options{})
	require.Equal(t, "local", p.Kind())
	require.Equal(t, sandbox.RuntimeCapabilities{PerCommandNetwork: true, HostMounts: true, Processes: true}, p.Capabilities())
	require.False(t, p.Capabilities().Isolated)
	_, previews := any(p).(interface {
		PreviewURL(context.Context, string, int) (sandboxapi.PreviewURL, error)
	})
	require.False(t, previews, "the preview_url activity asserts PreviewURL on the provider")
}

func TestCreateValidatesSpec(t *testing.T) {
	ctx := context.Background()
	p := local.New(local.Options{})
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	good := specFor(dir)
	cases := map[string]func(*sandbox.RuntimeSpec){
		"empty id":          func(s *sandbox.RuntimeSpec) { s.ID = "" },
		"bad id":            func(s *sandbox.RuntimeSpec) { s.ID = "../x" },
		"empty workdir":     func(s *sandbox.RuntimeSpec) { s.Workdir = "" },
		"no mount":          func(s *sandbox.RuntimeSpec) { s.Mounts = nil },
		"no matching mount": func(s *sandbox.RuntimeSpec) { s.Mounts[0].Target = "/elsewhere" },
		"two mounts":        func(s *sandbox.RuntimeSpec) { s.Mounts = append(s.Mounts, s.Mounts[0]) },
		"relative source":   func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = "rel/dir" },
		"missing source":    func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = filepath.Join(dir, "missing") },
		"source is a file":  func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = file },
		"bad env key":       func(s *sandbox.RuntimeSpec) { s.Env = map[string]string{"A=B": "c"} },
		"NUL env value":     func(s *sandbox.RuntimeSpec) { s.Env = map[string]string{"A": "\x00"} },
	}
	for name, mutate := range cases {
		spec := good
		spec.Mounts = append([]sandbox.Mount(nil), good.Mounts...)
		mutate(&spec)
		_, err := p.Create(ctx, spec)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	list, err := p.List(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, list)

	// The workdir may be a target different from the source; other mounts are ignored.
	spec := good
	spec.Workdir = "/workspace"
	spec.Mounts = []sandbox.Mount{{Source: dir, Target: "/workspace", Writable: true}, {Source: "/nonexistent", Target: "/other"}}
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"pwd"}})
	require.NoError(t, err)
	real, _ := filepath.EvalSymlinks(dir)
	require.Equal(t, real+"\n", string(res.Stdout))

	// Same id on another directory is a conflict.
	other := specFor(t.TempDir())
	other.ID = spec.ID
	_, err = p.Create(ctx, other)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
}

func TestExactEnvironment(t *testing.T) {
	t.Setenv("RTLOCAL_WORKER_ONLY", "leak")
	ctx, p, spec, _ := setup(t, local.Options{BaseEnv: map[string]string{"BASE_VAR": "base", "TERM": "xterm"}})
	spec.Env = map[string]string{"SPEC_VAR": "spec", "BASE_VAR": "spec-wins"}
	rt, err := p.Create(ctx, spec) // re-create updates the env
	require.NoError(t, err)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"REQ_VAR": "req"}})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	sort.Strings(lines)
	real, _ := filepath.EvalSymlinks(spec.Workdir)
	require.Equal(t, []string{
		"BASE_VAR=spec-wins",
		"HOME=" + real,
		"LANG=C.UTF-8",
		"PATH=" + local.BasePath,
		"REQ_VAR=req",
		"SPEC_VAR=spec",
		"TERM=xterm",
	}, lines)
}

func TestLookupUsesRuntimePath(t *testing.T) {
	// An executable reachable only through the worker's PATH is not found.
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "rtlocal-worker-only"), []byte("#!/bin/sh\necho found\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, _, spec, rt := setup(t, local.Options{})
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"rtlocal-worker-only"}})
	require.NoError(t, err)
	require.Equal(t, 127, res.ExitCode)
	require.Contains(t, string(res.Stderr), "command not found")

	// The request's PATH is used, relative entries against the cwd.
	require.NoError(t, os.MkdirAll(filepath.Join(spec.Workdir, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(spec.Workdir, "tools", "mytool"), []byte("#!/bin/sh\necho mytool \"$0\"\n"), 0o755))
	res, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"mytool"}, Env: map[string]string{"PATH": "tools:" + local.BasePath}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	require.Equal(t, "mytool "+filepath.Join(mustReal(t, spec.Workdir), "tools", "mytool")+"\n", string(res.Stdout))

	// A directory is not executable.
	res, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"./tools"}})
	require.NoError(t, err)
	require.Equal(t, 126, res.ExitCode)
}

func mustReal(t *testing.T, p string) string {
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

func TestBackgroundProcessesDieWithTheCall(t *testing.T) {
	ctx, _, spec, rt := setup(t, local.Options{})
	// The background child does not hold stdout, so the call returns at once;
	// the group is killed when the leader exits, so "late" never appears.
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "(sleep 1; echo late > late) >/dev/null 2>&1 & echo started"}})
	require.NoError(t, err)
	require.Equal(t, "started\n", string(res.Stdout))
	time.Sleep(1500 * time.Millisecond)
	require.NoFileExists(t, filepath.Join(spec.Workdir, "late"))
}

func TestEscapedProcessCannotHoldTheCall(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	ctx, _, _, rt := setup(t, local.Options{})
	start := time.Now()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "setsid sleep 20 & echo started"}})
	require.NoError(t, err)
	// Far below the 20 s the escaped process holds the pipe; slack for a loaded CI machine.
	require.Less(t, time.Since(start), local.DrainGrace+5*time.Second)
	require.Equal(t, "started\n", string(res.Stdout))
}

func TestBoundedMemoryFor50MB(t *testing.T) {
	ctx, _, _, rt := setup(t, local.Options{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' a"}, MaxOutputBytes: 256 << 10})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, int64(50_000_000), res.StdoutBytes)
	require.True(t, res.Truncated)
	// Allocations stay near the cap whatever the output size.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
}

func TestDestroyedHandleAndMissingWorkdir(t *testing.T) {
	ctx, p, spec, rt := setup(t, local.Options{})
	require.NoError(t, p.Destroy(ctx, spec.ID))
	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeMissing, st)
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.ErrorIs(t, rt.Start(ctx), sandboxapi.ErrNotFound)
	require.NoError(t, rt.Stop(ctx))

	// A workdir removed under a runtime makes it unavailable.
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	rt2, err := p.Create(ctx, specFor(ws))
	require.NoError(t, err)
	require.NoError(t, os.Remove(ws))
	_, err = rt2.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
}

func TestContextDeadlineIsErrTimeout(t *testing.T) {
	ctx, _, _, rt := setup(t, local.Options{})
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := rt.Exec(dctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo partial; sleep 30"}})
	require.ErrorIs(t, err, sandboxapi.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second, "the 30 s command was not waited for")
	require.Equal(t, "partial\n", string(res.Stdout), "the partial result comes with the error")
	require.False(t, res.TimedOut, "TimedOut is the command's own timeout only")
}

func TestStopKillResult(t *testing.T) {
	ctx, _, _, rt := setup(t, local.Options{})
	done := make(chan sandboxapi.ExecResult, 1)
	go func() {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo up; exec sleep 30"}})
		require.NoError(t, err)
		done <- res
	}()
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, rt.Stop(ctx))
	select {
	case res := <-done:
		require.Equal(t, 137, res.ExitCode)
		require.Equal(t, "up\n", string(res.Stdout))
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not kill the command")
	}
}

// TestProcessesOutliveTheProvider: background processes are kept by a
// supervisor outside the worker, so a new provider over the same state (a
// restarted worker) reattaches and reads the backlog and the exit code.
func TestProcessesOutliveTheProvider(t *testing.T) {
	state := t.TempDir()
	opts := local.Options{Logger: testLogger(t), Supervisor: supervisortest.Binary(t), StateDir: state}
	dir := t.TempDir()
	spec := specFor(dir)
	ctx := context.Background()
	rt, err := local.New(opts).Create(ctx, spec)
	require.NoError(t, err)
	info, err := rt.(sandbox.ProcessRuntime).StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sh", "-c", "echo one; sleep 0.5; echo two; exit 4"}})
	require.NoError(t, err)

	p2 := local.New(opts)
	rt2, err := p2.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Destroy(context.Background(), spec.ID) })
	got, last := runtimetest.ReadUntil(t, ctx, rt2.(sandbox.ProcessRuntime), info.ID, "", 10*time.Second, func([]byte) bool { return false })
	require.Equal(t, "one\ntwo\n", string(got))
	require.Equal(t, 4, last.Process.ExitCode)
}
