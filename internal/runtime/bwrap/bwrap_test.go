package bwrap_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// unavailable skips the test when bubblewrap is missing or unusable, except
// under CI=true, where it fails: CI must run these tests.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + " (apt-get install bubblewrap)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func newProvider(t testing.TB, opts bwrap.Options) *bwrap.Provider {
	t.Helper()
	if opts.ScratchDir == "" {
		opts.ScratchDir = scratchDir(t)
	}
	if opts.Logger == nil {
		opts.Logger = runtimetest.Logger(t, slog.LevelInfo)
	}
	if opts.Supervisor == "" {
		opts.Supervisor = supervisortest.Binary(t)
	}
	p, err := bwrap.New(context.Background(), opts)
	if err != nil {
		unavailable(t, "bubblewrap runtime unavailable: %v", err)
	}
	return p
}

// scratchDir returns a scratch root that sandboxes of another uid can traverse.
func scratchDir(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "scratch")
	openUp(t, dir)
	return dir
}

// openUp makes dir and its parents up to the test's temp root traversable
// (t.TempDir is 0700), so a sandbox running as another uid can bind it.
func openUp(t testing.TB, dir string) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
}

func specFor(dir string) sandbox.RuntimeSpec { return runtimetest.WorkspaceSpec("bwrap", dir) }

func TestConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Env {
		scratch := scratchDir(t)
		p := newProvider(t, bwrap.Options{ScratchDir: scratch})
		dir := t.TempDir()
		return runtimetest.Env{
			Provider: p,
			Spec:     specFor(dir),
			HostDir:  dir,
			Reopen: func(t *testing.T) sandbox.RuntimeProvider {
				return newProvider(t, bwrap.Options{ScratchDir: scratch})
			},
		}
	}, runtimetest.Options{})
}

func setup(t *testing.T, opts bwrap.Options, mutate func(*sandbox.RuntimeSpec)) (context.Context, *bwrap.Provider, sandbox.RuntimeSpec, sandbox.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	p := newProvider(t, opts)
	spec := specFor(t.TempDir())
	if mutate != nil {
		mutate(&spec)
	}
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	return ctx, p, spec, rt
}

func TestKindAndCapabilities(t *testing.T) {
	p := newProvider(t, bwrap.Options{})
	require.Equal(t, "bwrap", p.Kind())
	require.Equal(t, sandbox.RuntimeCapabilities{Isolated: true, PerCommandNetwork: true, HostMounts: true, Processes: true}, p.Capabilities())
	_, previews := any(p).(interface {
		PreviewURL(context.Context, string, int) (sandboxapi.PreviewURL, error)
	})
	require.False(t, previews, "the preview_url activity asserts PreviewURL on the provider")
}

func TestUnusableIsRuntimeUnavailable(t *testing.T) {
	_, err := bwrap.New(context.Background(), bwrap.Options{Binary: "sandboxcore-no-such-bwrap", ScratchDir: t.TempDir(), Supervisor: supervisortest.Binary(t)})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.Contains(t, err.Error(), "not installed")

	// A bwrap that cannot build the sandbox (here: a stand-in that fails as
	// bwrap does when user namespaces are disabled).
	// (A root worker runs bwrap as the sandbox's unprivileged user: the
	// stand-in's directories must let that user reach it, as /usr/bin does.)
	fake := filepath.Join(t.TempDir(), "bwrap")
	require.NoError(t, os.Chmod(filepath.Dir(fake), 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(fake)), 0o755))
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755))
	_, err = bwrap.New(context.Background(), bwrap.Options{Binary: fake, ScratchDir: t.TempDir(), Supervisor: supervisortest.Binary(t)})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.Contains(t, err.Error(), "No permissions to create new namespace")
}

func TestCreateValidatesSpec(t *testing.T) {
	p := newProvider(t, bwrap.Options{})
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := map[string]func(*sandbox.RuntimeSpec){
		"bad id":       func(s *sandbox.RuntimeSpec) { s.ID = "../x" },
		"workdir /tmp": func(s *sandbox.RuntimeSpec) { s.Workdir = "/tmp"; s.Mounts[0].Target = "/tmp" },
		"workdir /":    func(s *sandbox.RuntimeSpec) { s.Workdir = "/"; s.Mounts[0].Target = "/" },
		"target in /proc": func(s *sandbox.RuntimeSpec) {
			s.Mounts = append(s.Mounts, sandbox.Mount{Source: dir, Target: "/proc/x"})
		},
		"no workdir mount": func(s *sandbox.RuntimeSpec) { s.Mounts[0].Target = "/elsewhere" },
		"relative source":  func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = "rel" },
		"missing source":   func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = filepath.Join(dir, "missing") },
		"file workdir":     func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = file },
		"duplicate target": func(s *sandbox.RuntimeSpec) { s.Mounts = append(s.Mounts, s.Mounts[0]) },
		"bad network":      func(s *sandbox.RuntimeSpec) { s.Network = "open" },
		"bad env":          func(s *sandbox.RuntimeSpec) { s.Env = map[string]string{"A=B": "x"} },
	}
	for name, mutate := range cases {
		spec := specFor(dir)
		mutate(&spec)
		_, err := p.Create(context.Background(), spec)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	// Same id on another directory is a conflict.
	spec := specFor(dir)
	_, err := p.Create(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	other := specFor(t.TempDir())
	other.ID = spec.ID
	_, err = p.Create(context.Background(), other)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
}

func TestExactEnvironment(t *testing.T) {
	t.Setenv("BWRAPTEST_WORKER_ONLY", "leak")
	ctx, _, _, rt := setup(t, bwrap.Options{BaseEnv: map[string]string{"BASE_VAR": "base"}}, func(s *sandbox.RuntimeSpec) {
		s.Env = map[string]string{"SPEC_VAR": "spec", "TERM": "xterm"}
	})
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"REQ_VAR": "req"}})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	sort.Strings(lines)
	require.Equal(t, []string{
		"BASE_VAR=base",
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"PATH=" + bwrap.BasePath,
		"REQ_VAR=req",
		"SPEC_VAR=spec",
		"TERM=xterm",
	}, lines)
}

func TestHostIsHiddenAndReadOnly(t *testing.T) {
	secretDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(secretDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(secretDir, "credentials"), []byte("token"), 0o600))
	ctx, _, spec, rt := setup(t, bwrap.Options{}, nil)

	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `
		for p in /root /home /run /var/run/docker.sock /var/lib /work /srv /mnt "$1"; do
			[ -e "$p" ] && echo "visible: $p"
		done
		[ -s /etc/shadow ] && echo "visible: /etc/shadow"
		[ -r /etc/passwd ] || echo "missing: /etc/passwd"
		touch /etc/x /usr/x /x 2>/dev/null && echo "writable: host"
		echo ok > /workspace/w && echo ok > /tmp/t && echo writable-ok
		hostname`, "sh", secretDir}})
	require.NoError(t, err)
	runtimetest.RequireOK(t, res)
	out := string(res.Stdout)
	require.NotContains(t, out, "visible:")
	require.NotContains(t, out, "missing:")
	require.NotContains(t, out, "writable: host")
	require.Contains(t, out, "writable-ok\nsandbox\n")
	require.FileExists(t, filepath.Join(spec.Mounts[0].Source, "w"))
}

func TestScratchTmpLifecycle(t *testing.T) {
	ctx, p, spec, rt := setup(t, bwrap.Options{}, nil)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo kept > /tmp/f && echo cached > $HOME/.cache-file"))
	require.NoError(t, rt.Stop(ctx))
	res := runtimetest.Sh(t, ctx, rt, "cat /tmp/f $HOME/.cache-file")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "kept\ncached\n", string(res.Stdout), "/tmp survives between commands and Stop")
	require.NoFileExists(t, filepath.Join(spec.Mounts[0].Source, ".cache-file"), "HOME is not the worktree")
	require.NoError(t, p.Destroy(ctx, spec.ID))
	rt2, err := p.Create(ctx, spec)
	require.NoError(t, err)
	res = runtimetest.Sh(t, ctx, rt2, "cat /tmp/f 2>/dev/null || echo gone")
	require.Equal(t, "gone\n", string(res.Stdout), "Destroy deletes the scratch /tmp")
}

func TestReadOnlyWorkspace(t *testing.T) {
	ctx, _, spec, rt := setup(t, bwrap.Options{}, func(s *sandbox.RuntimeSpec) { s.Mounts[0].Writable = false })
	require.NoError(t, os.WriteFile(filepath.Join(spec.Mounts[0].Source, "in"), []byte("data\n"), 0o644))
	res := runtimetest.Sh(t, ctx, rt, "cat in; touch out")
	require.NotEqual(t, 0, res.ExitCode)
	require.Equal(t, "data\n", string(res.Stdout))
	require.Contains(t, string(res.Stderr), "Read-only file system")
	require.NoFileExists(t, filepath.Join(spec.Mounts[0].Source, "out"))
}

// TestNoNetworkSharesTheHost: no network mode shares the host's namespace,
// where the worker's, Temporal's and the Web UI's ports listen on
// 127.0.0.1: a direct connection to the host's loopback fails in each
// (before, the default network shared the host's and reached them).
func TestNoNetworkSharesTheHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	probe := `exec bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' bash "$1"`
	for _, tc := range []struct {
		network sandboxapi.Network
		ok      bool
	}{{sandboxapi.NetworkDefault, false}, {sandboxapi.NetworkLimited, false}, {sandboxapi.NetworkNone, false}} {
		ctx, _, _, rt := setup(t, bwrap.Options{}, func(s *sandbox.RuntimeSpec) { s.Network = tc.network })
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", probe, "sh", port}, TimeoutS: 30})
		require.NoError(t, err)
		require.Equal(t, tc.ok, res.ExitCode == 0, "network %s: %q", tc.network, res.Stderr)
	}
}

func TestBwrapFailureIsAnError(t *testing.T) {
	// A mount target below a read-only system directory that does not exist
	// cannot be created: bwrap fails before the command runs.
	ctx, _, _, rt := setup(t, bwrap.Options{}, func(s *sandbox.RuntimeSpec) {
		extra := filepath.Join(t.TempDir(), "extra")
		require.NoError(t, os.Mkdir(extra, 0o755))
		s.Mounts = append(s.Mounts, sandbox.Mount{Source: extra, Target: "/usr/sandboxcore-missing-target/x"})
	})
	_, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.Contains(t, err.Error(), "bwrap:")
}

func TestRunsAsWorktreeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	ctx, _, spec, rt := setup(t, bwrap.Options{}, func(s *sandbox.RuntimeSpec) {
		openUp(t, s.Mounts[0].Source)
		require.NoError(t, os.Chown(s.Mounts[0].Source, 12345, 12346))
	})
	res := runtimetest.Sh(t, ctx, rt, "id -u; id -g; echo x > f; mkdir d")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "12345\n12346\n", string(res.Stdout))
	for _, p := range []string{"f", "d"} {
		fi, err := os.Stat(filepath.Join(spec.Mounts[0].Source, p))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{12345, 12346}, [2]uint32{st.Uid, st.Gid}, p)
	}
}

// --- git inside the sandbox ------------------------------------------------

func TestGitInsideSandbox(t *testing.T) {
	bare, wt := runtimetest.GitFixture(t)
	testGitInside(t, bare, wt, bwrap.Options{})
}

// TestGitInsideHiddenDataDir puts the repo cache under a read-only path and
// hides its data directory (as hostworker does with SANDBOX_DATA_DIR): the
// cache's own mount still appears, nothing else of the data directory does.
func TestGitInsideHiddenDataDir(t *testing.T) {
	bare, wt := runtimetest.GitFixture(t)
	data := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(bare))))) // <root>/repos/h/o/r/.bare → <root>
	require.NoError(t, os.WriteFile(filepath.Join(data, "sandbox.db"), []byte("secret"), 0o600))
	ro := append(slices.Clone(bwrap.DefaultReadOnlyPaths), data)
	rt := testGitInside(t, bare, wt, bwrap.Options{ReadOnlyPaths: ro, HiddenPaths: []string{data}})
	res := runtimetest.Sh(t, context.Background(), rt, "ls "+data+"; cat "+data+"/sandbox.db")
	require.NotEqual(t, 0, res.ExitCode)
	require.Equal(t, "repos\n", string(res.Stdout), "only the cache's path is visible in the hidden data directory")
}

func testGitInside(t *testing.T, bare, wt string, opts bwrap.Options) sandbox.Runtime {
	t.Helper()
	before := runtimetest.TreeSum(t, bare)
	ctx, _, _, rt := setup(t, opts, func(s *sandbox.RuntimeSpec) { s.Mounts = runtimetest.GitMounts(bare, wt) })
	runtimetest.CheckGitInside(t, ctx, rt, bare, wt, before)
	return rt
}

// TestRootWorkerSeesOnlyWorldReadableSystemFiles: with a root worker the
// sandbox's root is mapped to the host's root, so without masking it could
// read root-only files of the read-only system paths. It sees what any local
// user could: root-only files and directories there are masked, and the
// sandbox has no capability.
func TestRootWorkerSeesOnlyWorldReadableSystemFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs a root worker")
	}
	sys := t.TempDir()
	require.NoError(t, os.Chmod(sys, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "public.conf"), []byte("public\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "host_key"), []byte("PRIVATE KEY\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "group-only"), []byte("GROUP SECRET\n"), 0o640))
	require.NoError(t, os.Mkdir(filepath.Join(sys, "private"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "private", "k"), []byte("DIR SECRET\n"), 0o644))
	ro := append(slices.Clone(bwrap.DefaultReadOnlyPaths), sys)
	ctx, _, _, rt := setup(t, bwrap.Options{ReadOnlyPaths: ro}, nil)

	res := runtimetest.Sh(t, ctx, rt, "cat "+sys+"/public.conf; cat "+sys+"/host_key "+sys+"/group-only "+sys+"/private/k 2>/dev/null; "+
		"ls -A "+sys+"/private; grep CapEff /proc/self/status")
	out := string(res.Stdout)
	assert.Contains(t, out, "public\n", "world-readable files stay visible")
	assert.NotContains(t, out, "PRIVATE KEY")
	assert.NotContains(t, out, "GROUP SECRET")
	assert.NotContains(t, out, "DIR SECRET")
	assert.Contains(t, out, "CapEff:\t0000000000000000", "no capability in the sandbox")
	// The control: the host's root does read them.
	data, err := os.ReadFile(filepath.Join(sys, "host_key"))
	require.NoError(t, err)
	assert.Equal(t, "PRIVATE KEY\n", string(data))
}

func TestProcesses(t *testing.T) {
	runtimetest.RunProcesses(t, func(t *testing.T) runtimetest.Env {
		p := newProvider(t, bwrap.Options{})
		dir := t.TempDir()
		return runtimetest.Env{Provider: p, Spec: specFor(dir), HostDir: dir}
	}, runtimetest.ProcessOptions{})
}

func supervisorBin(t testing.TB) string { return supervisortest.Binary(t) }

// TestNetwork runs the network-policy suite: a sandbox per network mode,
// the limited one reaching the egress proxy only.
func TestNetwork(t *testing.T) {
	eg := runtimetest.NewEgress(t)
	runtimetest.RunNetwork(t, func(t *testing.T) runtimetest.Env {
		p := newProvider(t, bwrap.Options{Egress: eg.Proxy})
		dir := t.TempDir()
		return runtimetest.Env{Provider: p, Spec: specFor(dir), HostDir: dir}
	}, runtimetest.NetworkOptions{Egress: eg})
}
