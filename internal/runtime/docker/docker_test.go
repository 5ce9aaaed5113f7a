package docker_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DefaultTestImage is the image the tests use unless SANDBOX_TEST_IMAGE
// names another; .ci/test-image.sh builds it without a registry.
const DefaultTestImage = "sandboxcore-test:latest"

// testLabel marks every container these tests create, so TestMain can remove
// leftovers of an interrupted run.
const testLabel = "sandboxcore.test"

func testImage() string {
	if v := os.Getenv("SANDBOX_TEST_IMAGE"); v != "" {
		return v
	}
	return DefaultTestImage
}

func TestMain(m *testing.M) {
	code := m.Run()
	removeLeftovers()
	os.Exit(code)
}

func removeLeftovers() {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", testLabel+"=docker"))})
	if err != nil {
		return
	}
	for _, c := range cs {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

// unavailable skips the test when Docker (or the test image) is missing,
// except under CI=true, where it fails: CI must run these tests.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + " (start dockerd and run .ci/test-image.sh)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func opts(t testing.TB) docker.Options {
	return docker.Options{Image: testImage(), Logger: testLogger(t), Supervisor: supervisortest.Binary(t)}
}

// newProvider connects to the local daemon and checks the test image.
func newProvider(t testing.TB) *docker.Provider {
	t.Helper()
	p, err := docker.New(context.Background(), opts(t))
	if err != nil {
		unavailable(t, "docker runtime unavailable: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func rawClient(t testing.TB) *client.Client {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func testLogger(t testing.TB) *slog.Logger { return runtimetest.Logger(t, slog.LevelInfo) }

func specFor(dir string) sandbox.RuntimeSpec {
	s := runtimetest.WorkspaceSpec("docker", dir)
	s.Labels = map[string]string{testLabel: "docker"}
	return s
}

func factory(t *testing.T) runtimetest.Env {
	p := newProvider(t)
	dir := t.TempDir()
	return runtimetest.Env{
		Provider: p,
		Spec:     specFor(dir),
		HostDir:  dir,
		Reopen: func(t *testing.T) sandbox.RuntimeProvider {
			return newProvider(t)
		},
	}
}

func TestConformance(t *testing.T) {
	runtimetest.Run(t, factory, runtimetest.Options{})
}

func TestProcesses(t *testing.T) {
	runtimetest.RunProcesses(t, factory, runtimetest.ProcessOptions{
		ExecLeavesEscapees: "a Docker exec's background children stay in the container until it stops (package documentation)",
	})
}

// setup creates a runtime over a fresh directory (or the given spec).
func setup(t *testing.T, mutate func(*sandbox.RuntimeSpec)) (context.Context, *docker.Provider, sandbox.RuntimeSpec, sandbox.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	p := newProvider(t)
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
	p := newProvider(t)
	require.Equal(t, "docker", p.Kind())
	require.Equal(t, sandbox.RuntimeCapabilities{Isolated: true, PerCommandNetwork: true, PreviewURL: true, HostMounts: true, Processes: true}, p.Capabilities())
	_, previews := any(p).(interface {
		PreviewURL(context.Context, string, int) (sandboxapi.PreviewURL, error)
	})
	require.True(t, previews, "the preview_url activity asserts PreviewURL on the provider")
}

func TestDaemonDownIsRuntimeUnavailable(t *testing.T) {
	host := "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")
	_, err := docker.New(context.Background(), docker.Options{Host: host})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.Equal(t, sandboxapi.ErrRuntimeUnavailable, sandboxapi.KindOf(err))
	require.Contains(t, err.Error(), host)

	// A provider whose daemon went away: every call is ErrRuntimeUnavailable.
	p, err := docker.NewUnchecked(docker.Options{Host: host, Image: "any"})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = p.Create(ctx, specFor(t.TempDir()))
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	_, err = p.Get(ctx, "rt-x")
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	_, err = p.List(ctx, nil)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.ErrorIs(t, p.Destroy(ctx, "rt-x"), sandboxapi.ErrRuntimeUnavailable)
}

func TestMissingImageNamesIt(t *testing.T) {
	newProvider(t) // skip without a daemon
	const img = "sandboxcore-no-such-image:never"
	_, err := docker.New(context.Background(), docker.Options{Image: img})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.Contains(t, err.Error(), img)

	p := newProvider(t)
	spec := specFor(t.TempDir())
	spec.Image = img
	_, err = p.Create(context.Background(), spec)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.Contains(t, err.Error(), img)
	_, err = p.Get(context.Background(), spec.ID)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "nothing was created")
}

func TestCreateValidatesSpec(t *testing.T) {
	p := newProvider(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := map[string]func(*sandbox.RuntimeSpec){
		"bad id":            func(s *sandbox.RuntimeSpec) { s.ID = "../x" },
		"relative workdir":  func(s *sandbox.RuntimeSpec) { s.Workdir = "workspace"; s.Mounts[0].Target = "workspace" },
		"no workdir mount":  func(s *sandbox.RuntimeSpec) { s.Mounts[0].Target = "/elsewhere" },
		"relative source":   func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = "rel" },
		"missing source":    func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = filepath.Join(dir, "missing") },
		"file workdir":      func(s *sandbox.RuntimeSpec) { s.Mounts[0].Source = file },
		"duplicate target":  func(s *sandbox.RuntimeSpec) { s.Mounts = append(s.Mounts, s.Mounts[0]) },
		"bad network":       func(s *sandbox.RuntimeSpec) { s.Network = "open" },
		"bad env":           func(s *sandbox.RuntimeSpec) { s.Env = map[string]string{"A=B": "x"} },
		"negative resource": func(s *sandbox.RuntimeSpec) { s.Resources = &sandbox.ResourceHints{MemoryMB: -1} },
	}
	for name, mutate := range cases {
		spec := specFor(dir)
		mutate(&spec)
		_, err := p.Create(context.Background(), spec)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	noImage, err := docker.New(context.Background(), docker.Options{Supervisor: supervisortest.Binary(t)})
	require.NoError(t, err)
	defer noImage.Close()
	_, err = noImage.Create(context.Background(), specFor(dir))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "no image anywhere")
}

func TestContainerLabelsIdempotenceAndReplacement(t *testing.T) {
	ctx, p, spec, _ := setup(t, nil)
	cli := rawClient(t)
	info, err := cli.ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.Equal(t, "sandboxcore", info.Config.Labels["managed-by"])
	require.Equal(t, spec.ID, info.Config.Labels["sandboxcore.runtime"])
	require.Equal(t, spec.WorkspaceID, info.Config.Labels["sandboxcore.workspace"])
	require.True(t, *info.HostConfig.Init)
	require.Equal(t, []string{"ALL"}, []string(info.HostConfig.CapDrop))

	// Same spec: the same container, even from another provider.
	_, err = newProvider(t).Create(ctx, spec)
	require.NoError(t, err)
	again, err := cli.ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.Equal(t, info.ID, again.ID)

	// Another spec: the container is replaced.
	spec.Env = map[string]string{"CHANGED": "yes"}
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	replaced, err := cli.ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.NotEqual(t, info.ID, replaced.ID)
	res := runtimetest.Sh(t, ctx, rt, `echo "$CHANGED"`)
	require.Equal(t, "yes\n", string(res.Stdout))

	// A container of the same name that sandboxcore does not manage is left alone.
	foreign := specFor(t.TempDir())
	_, err = cli.ContainerCreate(ctx, &container.Config{Image: testImage(), Cmd: []string{"true"}, Labels: map[string]string{testLabel: "docker"}}, nil, nil, nil, docker.ContainerName(foreign.ID))
	require.NoError(t, err)
	_, err = p.Create(ctx, foreign)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	require.ErrorIs(t, p.Destroy(ctx, foreign.ID), sandboxapi.ErrConflict)
	_, err = cli.ContainerInspect(ctx, docker.ContainerName(foreign.ID))
	require.NoError(t, err, "the foreign container still exists")
}

func TestExactEnvironment(t *testing.T) {
	t.Setenv("DOCKERTEST_WORKER_ONLY", "leak")
	ctx, _, _, rt := setup(t, func(s *sandbox.RuntimeSpec) {
		s.Env = map[string]string{"SPEC_VAR": "spec", "TERM": "xterm"}
	})
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"REQ_VAR": "req"}})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	sort.Strings(lines)
	require.Len(t, lines, 7, "%q", lines)
	require.True(t, strings.HasPrefix(lines[1], "HOSTNAME="), "Docker adds HOSTNAME: %q", lines)
	lines = append(lines[:1], lines[2:]...)
	require.Equal(t, []string{
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"PATH=" + docker.BasePath,
		"REQ_VAR=req",
		"SPEC_VAR=spec",
		"TERM=xterm",
	}, lines)
}

func TestReadOnlyWorkspace(t *testing.T) {
	ctx, _, spec, rt := setup(t, func(s *sandbox.RuntimeSpec) { s.Mounts[0].Writable = false })
	require.NoError(t, os.WriteFile(filepath.Join(spec.Mounts[0].Source, "in"), []byte("data\n"), 0o644))
	res := runtimetest.Sh(t, ctx, rt, "cat in; touch out")
	require.NotEqual(t, 0, res.ExitCode)
	require.Equal(t, "data\n", string(res.Stdout))
	require.Contains(t, string(res.Stderr), "Read-only file system")
	require.NoFileExists(t, filepath.Join(spec.Mounts[0].Source, "out"))
}

func TestOwnershipOnHost(t *testing.T) {
	ctx, _, spec, rt := setup(t, func(s *sandbox.RuntimeSpec) {
		require.NoError(t, os.Chown(s.Mounts[0].Source, 12345, 12346))
	})
	res := runtimetest.Sh(t, ctx, rt, "id -u; id -g; echo x > f; mkdir -p d/e; echo y > d/e/g")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "12345\n12346\n", string(res.Stdout))
	for _, p := range []string{"f", "d", "d/e", "d/e/g"} {
		fi, err := os.Stat(filepath.Join(spec.Mounts[0].Source, p))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{12345, 12346}, [2]uint32{st.Uid, st.Gid}, p)
	}
}

func TestResourceHints(t *testing.T) {
	ctx, _, spec, _ := setup(t, func(s *sandbox.RuntimeSpec) {
		s.Resources = &sandbox.ResourceHints{CPU: 0.5, MemoryMB: 256, Pids: 100}
	})
	info, err := rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.Equal(t, int64(500_000_000), info.HostConfig.NanoCPUs)
	require.Equal(t, int64(256<<20), info.HostConfig.Memory)
	require.Equal(t, int64(100), *info.HostConfig.PidsLimit)

	_, _, spec, _ = setup(t, nil)
	info, err = rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.Equal(t, int64(docker.DefaultPidsLimit), *info.HostConfig.PidsLimit)
}

// defaultRoute reports whether the runtime's routing table has a default route.
func defaultRoute(t *testing.T, ctx context.Context, rt sandbox.Runtime) bool {
	res := runtimetest.Sh(t, ctx, rt, `awk 'NR>1 && $2=="00000000"{f=1} END{exit !f}' /proc/net/route 2>/dev/null || grep -q '^[^ ]*	00000000	' /proc/net/route`)
	return res.ExitCode == 0
}

func TestNetworkModes(t *testing.T) {
	newProvider(t) // skips (or fails under CI) without a daemon and the image
	for _, tc := range []struct {
		network sandboxapi.Network
		mode    string
		route   bool
	}{
		{sandboxapi.NetworkNone, "none", false},
		// limited and default are Docker's none network too: their only
		// way out is the egress proxy's socket (TestNetwork); never a
		// bridge, from which the host's ports were reachable.
		{sandboxapi.NetworkLimited, "none", false},
		{sandboxapi.NetworkDefault, "none", false},
	} {
		t.Run(string(tc.network), func(t *testing.T) {
			ctx, _, spec, rt := setup(t, func(s *sandbox.RuntimeSpec) { s.Network = tc.network })
			info, err := rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID))
			require.NoError(t, err)
			require.Equal(t, tc.mode, string(info.HostConfig.NetworkMode))
			require.Equal(t, string(tc.network), info.Config.Labels[docker.LabelNetwork])
			require.Equal(t, tc.route, defaultRoute(t, ctx, rt), "default route")
		})
	}
}

// TestNetworkPerCommandDoesNotDisturbOthers: a command that asks for a
// narrower network runs in the runtime's container of that mode; a
// background process and the runtime's own container keep their network.
func TestNetworkPerCommandDoesNotDisturbOthers(t *testing.T) {
	ctx, p, spec, rt := setup(t, func(s *sandbox.RuntimeSpec) { s.Network = sandboxapi.NetworkDefault })
	pr := rt.(sandbox.ProcessRuntime)
	// Each mode's container is a host of its own (its UTS namespace).
	const probe = "cat /proc/sys/kernel/hostname"
	bg, err := pr.StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sh", "-c", "while :; do " + probe + "; sleep 0.2; done"}})
	require.NoError(t, err)
	own := string(runtimetest.Sh(t, ctx, rt, probe).Stdout)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", probe + "; echo shared > /tmp/from-none"}, Network: sandboxapi.NetworkNone})
	require.NoError(t, err)
	require.NotEqual(t, own, string(res.Stdout), "the none command runs in another container")
	info, err := rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID)+".none")
	require.NoError(t, err)
	require.Equal(t, "none", string(info.HostConfig.NetworkMode))
	main, err := rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.Equal(t, string(sandboxapi.NetworkDefault), main.Config.Labels[docker.LabelNetwork], "the runtime's own container is untouched")
	require.Equal(t, own, string(runtimetest.Sh(t, ctx, rt, probe).Stdout))
	out, err := pr.ReadProcess(ctx, bg.ID, sandbox.ProcessReadRequest{Wait: time.Second})
	require.NoError(t, err)
	require.Contains(t, string(out.Data), own, "the background process still runs in the runtime's own container")
	require.False(t, out.Process.Exited)
	res = runtimetest.Sh(t, ctx, rt, "cat /tmp/from-none")
	require.Equal(t, "shared\n", string(res.Stdout), "/tmp is shared between the modes' containers")

	// Destroy removes every container of the runtime and its /tmp volume.
	require.NoError(t, p.Destroy(ctx, spec.ID))
	_, err = rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID)+".none")
	require.True(t, cerrdefs.IsNotFound(err), "%v", err)
	_, err = rawClient(t).VolumeInspect(ctx, docker.TmpVolume(spec.ID))
	require.True(t, cerrdefs.IsNotFound(err), "%v", err)
}

// TestNetwork runs the network-policy suite on Docker.
func TestNetwork(t *testing.T) {
	eg := runtimetest.NewEgress(t)
	runtimetest.RunNetwork(t, func(t *testing.T) runtimetest.Env {
		o := opts(t)
		o.Egress = eg.Proxy
		p, err := docker.New(context.Background(), o)
		if err != nil {
			unavailable(t, "docker runtime unavailable: %v", err)
		}
		t.Cleanup(func() { _ = p.Close() })
		dir := t.TempDir()
		return runtimetest.Env{Provider: p, Spec: specFor(dir), HostDir: dir}
	}, runtimetest.NetworkOptions{Egress: eg})
}

func TestHibernateStopsTheContainer(t *testing.T) {
	ctx, _, spec, rt := setup(t, nil)
	cli := rawClient(t)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo kept > f; sleep 300 >/dev/null 2>&1 &"))
	require.NoError(t, rt.Stop(ctx))
	info, err := cli.ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.False(t, info.State.Running, "hibernate stops the container")
	require.FileExists(t, filepath.Join(spec.Mounts[0].Source, "f"))

	start := time.Now()
	res := runtimetest.Sh(t, ctx, rt, "cat f; ps -e -o comm= | grep -c '^sleep$' || true")
	t.Logf("resume + exec took %v", time.Since(start))
	runtimetest.RequireOK(t, res)
	require.Equal(t, "kept\n0\n", string(res.Stdout), "the file is kept; no sleep runs after resume")
	info, err = cli.ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.NoError(t, err)
	require.True(t, info.State.Running)
}

func TestDestroyRemovesContainerKeepsWorktree(t *testing.T) {
	ctx, p, spec, rt := setup(t, nil)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo kept > f"))
	require.NoError(t, p.Destroy(ctx, spec.ID))
	_, err := rawClient(t).ContainerInspect(ctx, docker.ContainerName(spec.ID))
	require.True(t, cerrdefs.IsNotFound(err), "container removed: %v", err)
	require.FileExists(t, filepath.Join(spec.Mounts[0].Source, "f"))
	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeMissing, st)
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	require.ErrorIs(t, rt.Start(ctx), sandboxapi.ErrNotFound)
	require.NoError(t, rt.Stop(ctx))
}

func TestTimeoutLeavesNoProcess(t *testing.T) {
	ctx, _, _, rt := setup(t, nil)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "(sleep 100 &) ; sleep 200 & sh -c 'sleep 300' & wait"}, TimeoutS: 1})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)
	// No sleep is left (the (sleep 100 &) grandchild reparented to init
	// but stays in the command's session).
	res = runtimetest.Sh(t, ctx, rt, "ps -e -o comm= | grep -c '^sleep$' || true")
	require.Equal(t, "0\n", string(res.Stdout))
}

func TestStreamHeldOpenDoesNotHang(t *testing.T) {
	ctx, _, _, rt := setup(t, nil)
	start := time.Now()
	// The child keeps stdout and stderr open for 30 s after the leader exits.
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "sleep 30 & echo out; echo err >&2; exit 5"}, TimeoutS: 60})
	require.NoError(t, err)
	// Far below the 30 s the child holds the streams; slack for a loaded CI machine.
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, 5, res.ExitCode)
	require.Equal(t, "out\n", string(res.Stdout))
	require.Equal(t, "err\n", string(res.Stderr))
}

func TestDashArgv0(t *testing.T) {
	ctx, _, _, rt := setup(t, nil)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"-x"}})
	require.NoError(t, err)
	require.Equal(t, 127, res.ExitCode)
}

// --- git inside the container -------------------------------------------

func gitSpec(bare, wt string) func(*sandbox.RuntimeSpec) {
	return func(s *sandbox.RuntimeSpec) { s.Mounts = runtimetest.GitMounts(bare, wt) }
}

func TestGitInsideContainer(t *testing.T) {
	bare, wt := runtimetest.GitFixture(t)
	before := runtimetest.TreeSum(t, bare)
	ctx, _, _, rt := setup(t, gitSpec(bare, wt))
	runtimetest.CheckGitInside(t, ctx, rt, bare, wt, before)
}

func TestGitInsideAsWorktreeOwner(t *testing.T) {
	bare, wt := runtimetest.GitFixture(t)
	for _, dir := range []string{filepath.Dir(filepath.Dir(bare))} {
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 12345, 12346)
		}))
	}
	before := runtimetest.TreeSum(t, bare)
	ctx, _, _, rt := setup(t, gitSpec(bare, wt))
	res := runtimetest.Sh(t, ctx, rt, "id -u && git status --porcelain && echo new > c.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "12345\n", string(res.Stdout))
	fi, err := os.Stat(filepath.Join(wt, "c.txt"))
	require.NoError(t, err)
	require.Equal(t, uint32(12345), fi.Sys().(*syscall.Stat_t).Uid)
	require.Equal(t, before, runtimetest.TreeSum(t, bare))
}

// TestProcessesOutliveTheWorker: a background process and its output live
// in the container; a new provider (a restarted worker) reads the backlog
// and the exit code of a process that ended meanwhile.
func TestProcessesOutliveTheWorker(t *testing.T) {
	ctx, p, spec, rt := setup(t, nil)
	info, err := rt.(sandbox.ProcessRuntime).StartProcess(ctx, sandbox.ProcessSpec{Cmd: []string{"sh", "-c", "echo one; sleep 0.5; echo two; exit 6"}})
	require.NoError(t, err)
	_ = p.Close() // the first worker is gone
	rt2, err := newProvider(t).Create(ctx, spec)
	require.NoError(t, err)
	pr := rt2.(sandbox.ProcessRuntime)
	require.True(t, pr.ProcessSupport().Durable)
	got, last := runtimetest.ReadUntil(t, ctx, pr, info.ID, "", 20*time.Second, func([]byte) bool { return false })
	require.Equal(t, "one\ntwo\n", string(got))
	require.Equal(t, 6, last.Process.ExitCode)
}

// TestPreviewURLReachesAServerInTheContainer: a real HTTP server started in
// the container answers through the loopback URL PreviewURL returns (on the
// limited network: the container itself reaches nothing outside); the URL
// stops answering once the runtime is stopped; network none and a stopped
// runtime are refused with ErrCommandRejected, a port out of range with
// ErrInvalidArgument.
func TestPreviewURLReachesAServerInTheContainer(t *testing.T) {
	ctx, p, spec, rt := setup(t, nil)
	dir := spec.Mounts[0].Source
	runtimetest.BuildPreviewServer(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.txt"), []byte("from the workspace\n"), 0o644))

	_, err := p.PreviewURL(ctx, spec.ID, 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = p.PreviewURL(ctx, "rt-no-such-runtime", 8080)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)

	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "./previewserver 8080 >/dev/null 2>&1 &"}, TimeoutS: 30})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	u, err := p.PreviewURL(ctx, spec.ID, 8080)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.URL, "http://127.0.0.1:"), u.URL)
	require.Empty(t, u.Token)
	require.Nil(t, u.ExpiresAt)
	again, err := p.PreviewURL(ctx, spec.ID, 8080)
	require.NoError(t, err)
	require.Equal(t, u.URL, again.URL, "one forwarder per port")

	get := func(url string) (string, error) {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	var body string
	require.Eventually(t, func() bool { // the server may still be starting
		body, err = get(u.URL + "hello?x=1")
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "last error: %v", err)
	require.Equal(t, "preview /hello: from the workspace\n", body)

	require.NoError(t, rt.Stop(ctx))
	_, err = get(u.URL)
	require.Error(t, err, "the forwarder closes with the runtime")
	_, err = p.PreviewURL(ctx, spec.ID, 8080)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "a stopped runtime")

	_, _, none, _ := setup(t, func(s *sandbox.RuntimeSpec) { s.Network = sandboxapi.NetworkNone })
	_, err = p.PreviewURL(ctx, none.ID, 8080)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "network none")
}
