package daytona

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// newFake starts a fake Daytona for one test (skipped without Docker or the
// test image, unless CI=true) and checks at the end that no request or
// response violated the OpenAPI documents.
func newFake(t testing.TB, opts fake.Options) *fake.Server {
	t.Helper()
	if opts.Minute == 0 {
		opts.Minute = time.Minute
	}
	opts.Logger = runtimetest.Logger(t, 8) // errors only
	srv, err := fake.New(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fake Daytona: %v", err)
		}
		t.Skipf("fake Daytona unavailable: %v", err)
	}
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		require.Empty(t, srv.Violations(), "spec violations")
	})
	return srv
}

func newProvider(t testing.TB, srv *fake.Server, mut func(*Options)) *Provider {
	t.Helper()
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	opts := Options{APIURL: srv.APIURL(), APIKey: srv.APIKey(), Deployment: "test-host", StateDir: t.TempDir(), Git: git,
		Logger: runtimetest.Logger(t, 0)}
	if mut != nil {
		mut(&opts)
	}
	p, err := New(opts)
	require.NoError(t, err)
	return p
}

func gitSpec(bare, wt string) sandbox.RuntimeSpec {
	spec := runtimetest.WorkspaceSpec("daytona", wt)
	spec.Mounts = runtimetest.GitMounts(bare, wt)
	return spec
}

func TestExecAndReplica(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })

	res := runtimetest.Sh(t, ctx, rt, "git status; git log --oneline; cat a.txt; echo err >&2; exit 3")
	require.Equal(t, 3, res.ExitCode, "stderr=%s", res.Stderr)
	require.Contains(t, string(res.Stdout), "On branch agent/edits-1")
	require.Contains(t, string(res.Stdout), "init")
	require.Contains(t, string(res.Stdout), "a\n")
	require.Equal(t, "err\n", string(res.Stderr))

	// Changes come back to the host worktree; host changes go up.
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo new > new.txt && echo more >> a.txt"))
	b, err := os.ReadFile(filepath.Join(wt, "new.txt"))
	require.NoError(t, err)
	require.Equal(t, "new\n", string(b))
	out, err := exec.Command("git", "-C", wt, "status", "--porcelain").CombinedOutput()
	require.NoError(t, err)
	require.Equal(t, " M a.txt\n?? new.txt\n", string(out))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "host.txt"), []byte("from host\n"), 0o644))
	res = runtimetest.Sh(t, ctx, rt, "cat host.txt; git status --porcelain")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "from host\n M a.txt\n?? host.txt\n?? new.txt\n", string(res.Stdout))

	// The API key is in no remote environment and no command's view.
	res = runtimetest.Sh(t, ctx, rt, "env; cat /proc/1/environ | tr '\\0' '\\n'")
	require.NotContains(t, string(res.Stdout), srv.APIKey())
	for k, v := range srv.SandboxEnv(spec.ID) {
		require.NotContains(t, k+"="+v, srv.APIKey())
	}
}

func TestVanishedSandboxIsRecreatedWithTheAgentsFiles(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "mkdir -p src && echo uncommitted > src/work.txt && echo more >> a.txt"))

	require.True(t, srv.DeleteOutOfBand(spec.ID))
	res := runtimetest.Sh(t, ctx, rt, "cat src/work.txt a.txt; git status --porcelain; git log --oneline")
	runtimetest.RequireOK(t, res)
	require.True(t, strings.HasPrefix(string(res.Stdout), "uncommitted\na\nmore\n M a.txt\n?? src/\n"), "%s", res.Stdout)
	require.Contains(t, string(res.Stdout), "init")
	require.Equal(t, 1, rt.(*Runtime).Replica().Recreated)
}

func TestFaultsAreTypedAndLoseNothing(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()

	srv.Inject(fake.Fault{Operation: "createSandbox", Status: 401})
	_, err := p.Create(ctx, spec)
	require.ErrorIs(t, err, sandbox.ErrUnauthorized)
	srv.Inject(fake.Fault{Operation: "createSandbox", Status: 429})
	_, err = p.Create(ctx, spec)
	require.ErrorIs(t, err, sandbox.ErrRateLimited)
	srv.Inject(fake.Fault{Operation: "createSandbox", Status: 503, Times: 3})
	_, err = p.Create(ctx, spec)
	require.ErrorIs(t, err, sandbox.ErrRuntimeUnavailable)
	srv.Inject(fake.Fault{Operation: "getSandbox", Status: 409})
	_, err = p.Get(ctx, spec.ID)
	require.ErrorIs(t, err, sandbox.ErrConflict)

	// A create whose answer is lost is adopted on the retry.
	srv.Inject(fake.Fault{Operation: "createSandbox", Drop: true})
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })

	// One 500 and a slow answer on the way are retried; the work arrives.
	srv.Inject(fake.Fault{Operation: "ExecuteCommand", Status: 500})
	srv.Inject(fake.Fault{Operation: "DownloadFile", Delay: 500 * time.Millisecond})
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo one > one.txt"))
	// A result lost three times fails the call; the next one brings the change.
	// (Go's client itself retries an idempotent request once on a dropped
	// connection: six drops outlast the adapter's three tries.)
	srv.Inject(fake.Fault{Operation: "DownloadFile", Drop: true, Times: 6})
	_, err = rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "echo two > two.txt"}, TimeoutS: 30})
	require.ErrorIs(t, err, sandbox.ErrRuntimeUnavailable)
	require.NoFileExists(t, filepath.Join(wt, "two.txt"))
	srv.ClearFaults()
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
	for _, f := range []string{"one.txt", "two.txt"} {
		require.FileExists(t, filepath.Join(wt, f))
	}
}

// TestNetworkMapsOntoDaytonasLists: the limited network's allow-list
// becomes Daytona's domainAllowList (names) and networkAllowList (CIDRs),
// ports dropped and metadata-covering entries left out; none and an empty
// list block everything; a command cannot choose another network.
func TestNetworkMapsOntoDaytonasLists(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		network sandbox.Network
		allow   []string
		want    fake.SandboxNetwork
	}{
		{sandbox.NetworkLimited, []string{"registry.npmjs.org:443", "*.corp.example", "192.0.2.7:8080", "10.0.0.0/8", "169.254.0.0/16"},
			fake.SandboxNetwork{NetworkAllowList: "192.0.2.7/32,10.0.0.0/8", DomainAllowList: "registry.npmjs.org,*.corp.example"}},
		{sandbox.NetworkLimited, nil, fake.SandboxNetwork{BlockAll: true}},
		{sandbox.NetworkNone, []string{"registry.npmjs.org"}, fake.SandboxNetwork{BlockAll: true}},
	} {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt)
		spec.ID += strings.ReplaceAll(string(tc.network), "limited", "l") + strconv.Itoa(len(tc.allow))
		spec.Network, spec.NetworkAllow = tc.network, tc.allow
		rt, err := p.Create(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		got, ok := srv.Network(spec.ID)
		require.True(t, ok)
		require.Equal(t, tc.want, got, "%s %v", tc.network, tc.allow)
		_, err = rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"true"}, Network: sandbox.NetworkDefault})
		require.ErrorIs(t, err, sandbox.ErrCommandRejected)
		if tc.network == sandbox.NetworkLimited {
			_, err = rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"true"}, Network: sandbox.NetworkNone})
			require.ErrorIs(t, err, sandbox.ErrCommandRejected)
			require.Contains(t, err.Error(), "applies the workspace's network policy (limited) to every command")
			runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
		}
	}
	require.False(t, p.Capabilities().PerCommandNetwork)
}
