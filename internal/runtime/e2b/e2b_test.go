package e2b

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// newFake starts a fake E2B for one test (skipped without Docker or the
// test image, unless CI=true) and checks at the end that no request or
// response violated the specifications.
func newFake(t testing.TB, opts fake.Options) *fake.Server {
	t.Helper()
	opts.Logger = runtimetest.Logger(t, 8) // errors only
	srv, err := fake.New(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fake E2B: %v", err)
		}
		t.Skipf("fake E2B unavailable: %v", err)
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
	spec := runtimetest.WorkspaceSpec("e2b", wt)
	spec.Mounts = runtimetest.GitMounts(bare, wt)
	return spec
}

// TestConformance runs the runtime conformance suite on E2B (the fake): the
// suite looks at the sandbox's replica through remoteFiles and at the host
// worktree as the durable workspace.
func TestConformance(t *testing.T) {
	// A Pro team (24 h instances): the suite runs a command with the
	// longest timeout, 2 h, which a Hobby team's hour cannot hold
	// (instance.go).
	srv := newFake(t, fake.Options{MaxInstanceLength: 24 * time.Hour})
	runtimetest.Run(t, func(t *testing.T) runtimetest.Env {
		p := newProvider(t, srv, func(o *Options) { o.MaxInstanceLength = 24 * time.Hour })
		dir := t.TempDir()
		spec := runtimetest.WorkspaceSpec("e2b", dir)
		spec.Workdir = fake.SandboxWorkspace
		spec.Mounts[0].Target = spec.Workdir
		return runtimetest.Env{
			Provider:  p,
			Spec:      spec,
			Files:     remoteFiles{p: p, id: spec.ID, dir: spec.Workdir},
			Workspace: runtimetest.HostFiles(dir),
			Reopen: func(t *testing.T) sandbox.RuntimeProvider {
				p2, err := New(p.opts)
				if err != nil {
					t.Fatal(err)
				}
				return p2
			},
		}
	}, runtimetest.Options{})
}

// remoteFiles reaches into a runtime's sandbox through envd, bypassing the
// replica's sync.
type remoteFiles struct {
	p   *Provider
	id  string
	dir string
}

func (f remoteFiles) sh(script string) (int, string, error) {
	rt := f.p.runtimeFor(f.id)
	// A paused sandbox is resumed to look into it (its processes resume too).
	env, err := rt.ensure(context.Background())
	if err != nil {
		return 0, "", err
	}
	code, out, err := env.run(context.Background(), "cd "+replica.ShQuote(f.dir)+" || exit 90\n"+script)
	return code, string(out), err
}

func (f remoteFiles) check(code int, out string, err error) error {
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("exit %d: %s", code, out)
	}
	return nil
}

func (f remoteFiles) WriteFile(rel string, data []byte, perm os.FileMode) error {
	return f.check(f.sh(fmt.Sprintf("printf %%s %s | base64 -d > %s && chmod %o %s",
		replica.ShQuote(base64.StdEncoding.EncodeToString(data)), replica.ShQuote(rel), perm, replica.ShQuote(rel))))
}

func (f remoteFiles) ReadFile(rel string) ([]byte, error) {
	code, out, err := f.sh("base64 -w0 " + replica.ShQuote(rel))
	if err := f.check(code, out, err); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(strings.TrimSpace(out))
}

func (f remoteFiles) MkdirAll(rel string) error {
	return f.check(f.sh("mkdir -p " + replica.ShQuote(rel)))
}

func (f remoteFiles) Symlink(target, rel string) error {
	// -sfn: the helper may run twice (a retried run), and must then leave the
	// same link, not one inside it.
	return f.check(f.sh("ln -sfn " + replica.ShQuote(target) + " " + replica.ShQuote(rel)))
}

func (f remoteFiles) Exists(rel string) bool {
	code, _, err := f.sh("test -e " + replica.ShQuote(rel) + " || test -L " + replica.ShQuote(rel))
	return err == nil && code == 0
}

func (f remoteFiles) Size(rel string) int64 {
	code, out, err := f.sh("stat -c %s " + replica.ShQuote(rel) + " 2>/dev/null || echo -1")
	if err != nil || code != 0 {
		return -1
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if perr != nil {
		return -1
	}
	return n
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
	require.Equal(t, "err\n", string(res.Stderr))

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
	rec, _ := rt.(*Runtime).record()
	for _, kv := range srv.SandboxEnv(rec.SandboxID) {
		require.NotContains(t, kv, srv.APIKey())
	}
	require.NotContains(t, fmt.Sprint(rec), rec.AccessToken, "a record never prints its token")
}

// TestNetworkMapsOntoAllowOut: the limited network's allow-list becomes
// E2B's allowOut (domains, then IPs and CIDRs; ports dropped,
// metadata-covering entries left out) over denyOut 0.0.0.0/0; none and an
// empty list deny all egress; a command cannot choose another network.
func TestNetworkMapsOntoAllowOut(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	for i, tc := range []struct {
		network sandboxapi.Network
		allow   []string
		want    fake.SandboxNetwork
	}{
		{sandboxapi.NetworkLimited, []string{"registry.npmjs.org:443", "*.corp.example", "192.0.2.7:8080", "10.0.0.0/8", "0.0.0.0/0"},
			fake.SandboxNetwork{AllowOut: []string{"registry.npmjs.org", "*.corp.example", "192.0.2.7", "10.0.0.0/8"}, DenyOut: []string{"0.0.0.0/0"}, Internet: true}},
		{sandboxapi.NetworkLimited, nil, fake.SandboxNetwork{DenyOut: []string{"0.0.0.0/0"}}},
		{sandboxapi.NetworkNone, []string{"registry.npmjs.org"}, fake.SandboxNetwork{DenyOut: []string{"0.0.0.0/0"}}},
	} {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt)
		spec.ID += "-net" + strconv.Itoa(i)
		spec.Network, spec.NetworkAllow = tc.network, tc.allow
		rt, err := p.Create(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		rec, _ := rt.(*Runtime).record()
		got, ok := srv.Network(rec.SandboxID)
		require.True(t, ok)
		require.Equal(t, tc.want, got, "%s %v", tc.network, tc.allow)
		_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkDefault})
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
		if tc.network == sandboxapi.NetworkLimited {
			_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkNone})
			require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
			runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
		}
	}
	require.False(t, p.Capabilities().PerCommandNetwork)
}

// TestUnknownTemplateIsAConfigurationError: E2B answers a create naming a
// template the team does not have 404 "template 'x' not found"
// (packages/api/internal/cache/templates/alias_cache.go:112-113 and
// errors.go:59-69, via handlers/sandbox_create.go:96-100 of e2b-dev/infra
// @54693ff; the stand-in copies it): that is this worker's configuration
// (E2B_TEMPLATE), reported as such, never as a runtime that is gone.
func TestUnknownTemplateIsAConfigurationError(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, func(o *Options) { o.Template = "no-such-template" })
	bare, wt := runtimetest.GitFixture(t)
	_, err := p.Create(context.Background(), gitSpec(bare, wt))
	require.ErrorIs(t, err, ErrTemplateNotFound)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.NotErrorIs(t, err, sandboxapi.ErrNotFound)
	require.False(t, sandboxapi.IsRetryable(err))
	require.Contains(t, err.Error(), "E2B_TEMPLATE")
	require.Contains(t, err.Error(), "template 'no-such-template' not found")
	require.Empty(t, srv.SandboxIDs())
}
