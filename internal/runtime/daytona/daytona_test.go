package daytona

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
	for k, v := range srv.SandboxEnv(p.sandboxName(spec.ID)) {
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

	require.True(t, srv.DeleteOutOfBand(p.sandboxName(spec.ID)))
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
	require.ErrorIs(t, err, sandboxapi.ErrUnauthorized)
	// Daytona's throttlers answer 429 through the API's exception filter
	// with @nestjs/throttler's message and a Retry-After-<throttler> header
	// (apps/api/src/app.module.ts:153-161 and
	// apps/api/src/filters/all-exceptions.filter.ts:62-87 of daytonaio/daytona
	// v0.190.0; src/throttler.guard.ts:173-177 and throttler.exception.ts:3 of
	// nestjs/throttler v6.4.0): waited out and retried; still refused after
	// three tries, it is ErrRateLimited carrying the delay.
	throttled := fake.Fault{Operation: "createSandbox", Status: 429, Message: "ThrottlerException: Too Many Requests",
		Header: map[string]string{"Retry-After-sandbox-create": "1"}, Times: 3}
	srv.Inject(throttled)
	creates := srv.Requests()["createSandbox"]
	_, err = p.Create(ctx, spec)
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	require.True(t, sandboxapi.IsRetryable(err))
	wait, ok := sandbox.RetryAfter(err)
	require.True(t, ok)
	require.Equal(t, time.Second, wait)
	require.Equal(t, creates+3, srv.Requests()["createSandbox"])
	srv.Inject(fake.Fault{Operation: "createSandbox", Status: 503, Times: 3})
	_, err = p.Create(ctx, spec)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	srv.Inject(fake.Fault{Operation: "getSandbox", Status: 409})
	_, err = p.Get(ctx, spec.ID)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)

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
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo two > two.txt"}, TimeoutS: 30})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
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
		network sandboxapi.Network
		allow   []string
		want    fake.SandboxNetwork
	}{
		{sandboxapi.NetworkLimited, []string{"registry.npmjs.org:443", "*.corp.example", "192.0.2.7:8080", "10.0.0.0/8", "169.254.0.0/16"},
			fake.SandboxNetwork{NetworkAllowList: "192.0.2.7/32,10.0.0.0/8", DomainAllowList: "registry.npmjs.org,*.corp.example"}},
		// Daytona takes IPv4 networks only (network-validation.util.ts:20-21):
		// IPv6 entries are left out, and closed when nothing else is allowed.
		{sandboxapi.NetworkLimited, []string{"[2001:db8::1]:443", "2001:db8::/32", "192.0.2.8", "example.org"},
			fake.SandboxNetwork{NetworkAllowList: "192.0.2.8/32", DomainAllowList: "example.org"}},
		{sandboxapi.NetworkLimited, []string{"2001:db8::/32"}, fake.SandboxNetwork{BlockAll: true}},
		{sandboxapi.NetworkLimited, nil, fake.SandboxNetwork{BlockAll: true}},
		{sandboxapi.NetworkNone, []string{"registry.npmjs.org"}, fake.SandboxNetwork{BlockAll: true}},
	} {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt)
		spec.ID += strings.ReplaceAll(string(tc.network), "limited", "l") + strconv.Itoa(len(tc.allow))
		spec.Network, spec.NetworkAllow = tc.network, tc.allow
		rt, err := p.Create(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		got, ok := srv.Network(p.sandboxName(spec.ID))
		require.True(t, ok)
		require.Equal(t, tc.want, got, "%s %v", tc.network, tc.allow)
		_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkDefault})
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
		if tc.network == sandboxapi.NetworkLimited {
			_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkNone})
			require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
			require.Contains(t, err.Error(), "applies the workspace's network policy (limited) to every command")
			runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
		}
	}
	require.False(t, p.Capabilities().PerCommandNetwork)
}

// TestAllowListsLongerThanDaytonaTakes: Daytona refuses more than 10
// networks or 10 domains (400 "Network allow list cannot contain more than
// 10 networks", apps/api/src/sandbox/utils/network-validation.util.ts:35-37,
// and the domains' at 59-61, v0.190.0, which the fake copies); the adapter
// sends the first ten of each and leaves the rest closed (the worker's
// default list alone names 19 domains), never a create Daytona refuses.
func TestAllowListsLongerThanDaytonaTakes(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	var nets, doms []string
	for i := range 11 {
		nets = append(nets, "10.0."+strconv.Itoa(i)+".0/24")
		doms = append(doms, "d"+strconv.Itoa(i)+".example.com")
	}
	// Eleven of each: Daytona would refuse the create, so the first ten are
	// sent and the rest left out (closed: stricter, never looser).
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	spec.Network, spec.NetworkAllow = sandboxapi.NetworkLimited, append(slices.Clone(nets), doms...)
	_, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	got, ok := srv.Network(p.sandboxName(spec.ID))
	require.True(t, ok)
	assert.Equal(t, strings.Join(nets[:10], ","), got.NetworkAllowList)
	assert.Equal(t, strings.Join(doms[:10], ","), got.DomainAllowList)
}

// TestResourcesWithASnapshotAreNotSent: Daytona refuses any cpu, memory or
// disk with a snapshot, its default one included — 400 "Cannot specify
// Sandbox resources when using a snapshot" (daytonaio/daytona v0.190.0,
// apps/api/src/sandbox/controllers/sandbox.controller.ts:295-296, which the
// fake copies) — so the hints are dropped there and sent only with an image
// (a build info).
func TestResourcesWithASnapshotAreNotSent(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	spec.Resources = &sandbox.ResourceHints{CPU: 1.5, MemoryMB: 1500, DiskGB: 5}
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err, "created from the default snapshot, the hints dropped")
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))

	snap := newProvider(t, srv, func(o *Options) { o.Snapshot = "my-snapshot" })
	body, err := snap.createBody(spec)
	require.NoError(t, err)
	require.False(t, body.HasCpu() || body.HasMemory() || body.HasDisk(), "no resources with a named snapshot")
	img := newProvider(t, srv, func(o *Options) { o.Image = "ubuntu:24.04" })
	body, err = img.createBody(spec)
	require.NoError(t, err)
	require.Equal(t, int32(2), body.GetCpu())
	require.Equal(t, int32(2), body.GetMemory())
	require.Equal(t, int32(5), body.GetDisk())
}

// TestQuotaReclaimsStoppedReplicas: a create refused for the organization's
// quota deletes this deployment's least recently used stopped replica
// (hibernated by Stop after a sync: it holds nothing the host lacks) and is
// tried once more; a running sandbox, another deployment's sandbox and one
// stopped without a sync (it may hold changes) are never deleted; with
// nothing to reclaim the create fails with ErrResourceLimit and nothing is
// lost.
func TestQuotaReclaimsStoppedReplicas(t *testing.T) {
	srv := newFake(t, fake.Options{MaxDiskGiB: 30})
	p := newProvider(t, srv, nil)
	other := newProvider(t, srv, func(o *Options) { o.Deployment = "other-host" })
	ctx := context.Background()
	mk := func() (sandbox.RuntimeSpec, string) {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt) // fake.DefaultDiskGiB (10) each: resources go with no snapshot
		return spec, wt
	}
	create := func(p *Provider, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
		rt, err := p.Create(ctx, spec)
		if err == nil {
			t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		}
		return rt, err
	}
	// Oldest: a replica of this deployment, hibernated (clean).
	oldSpec, oldWT := mk()
	oldRT, err := create(p, oldSpec)
	require.NoError(t, err)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, oldRT, "echo precious > work.txt"))
	require.NoError(t, oldRT.Stop(ctx))
	// Another deployment's stopped sandbox.
	foreignSpec, _ := mk()
	foreignRT, err := create(other, foreignSpec)
	require.NoError(t, err)
	require.NoError(t, foreignRT.Stop(ctx))
	// A running one of this deployment.
	runSpec, _ := mk()
	_, err = create(p, runSpec)
	require.NoError(t, err)

	// 30 GiB used: the next create is refused once, reclaims the old replica.
	newSpec, _ := mk()
	newRT, err := create(p, newSpec)
	require.NoError(t, err, "reclaimed and retried")
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, newRT, "true"))
	st, _ := srv.SandboxState(p.sandboxName(oldSpec.ID))
	require.Contains(t, []string{"", "destroying"}, st, "the least recently used clean replica was deleted")
	st, _ = srv.SandboxState(other.sandboxName(foreignSpec.ID))
	require.Equal(t, "stopped", st, "another deployment's sandbox is never touched")
	st, _ = srv.SandboxState(p.sandboxName(runSpec.ID))
	require.Equal(t, "started", st)
	b, err := os.ReadFile(filepath.Join(oldWT, "work.txt"))
	require.NoError(t, err)
	require.Equal(t, "precious\n", string(b), "the reclaimed replica's work is on the host")

	// The old runtime comes back on its next use (recreated from the
	// workspace) once there is room again.
	require.NoError(t, p.Destroy(ctx, newSpec.ID))
	require.Eventually(t, func() bool { st, _ := srv.SandboxState(p.sandboxName(newSpec.ID)); return st == "" }, 30*time.Second, 50*time.Millisecond)
	res := runtimetest.Sh(t, ctx, oldRT, "cat work.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "precious\n", string(res.Stdout))
	require.Equal(t, 1, oldRT.(*Runtime).Replica().Recreated, "its sandbox was deleted for quota: recreated")

	// Full again, with nothing clean to reclaim: a stopped sandbox that was
	// not hibernated by Stop (Daytona's auto-stop) may hold changes.
	require.True(t, srv.SetState(p.sandboxName(oldSpec.ID), "stopped"))
	require.Eventually(t, func() bool { st, _ := srv.SandboxState(p.sandboxName(oldSpec.ID)); return st == "stopped" }, 30*time.Second, 50*time.Millisecond)
	lastSpec, lastWT := mk()
	_, err = create(p, lastSpec)
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.Contains(t, sandboxapi.Message(err), "no stopped replica of this deployment could be deleted")
	st, _ = srv.SandboxState(p.sandboxName(oldSpec.ID))
	require.Equal(t, "stopped", st, "an unsynced stopped sandbox is kept")
	entries, err := os.ReadDir(lastWT)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the refused runtime's workspace is untouched")
}

// TestAutoStopAndArchiveBehindTheAdaptersBack: Daytona's own auto-stop
// stops a sandbox whose background process changed a file after the
// command's sync, and auto-archive archives it; the next exec starts it from
// archived (restoring) and the late change comes back to the host with the
// command's own: nothing is lost.
func TestAutoStopAndArchiveBehindTheAdaptersBack(t *testing.T) {
	srv := newFake(t, fake.Options{Minute: 3 * time.Second})
	p := newProvider(t, srv, func(o *Options) { o.AutoStopMinutes, o.AutoArchiveMinutes = 1, 1 })
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "(sleep 1; echo late > late.txt) >/dev/null 2>&1 &"))
	require.NoFileExists(t, filepath.Join(wt, "late.txt"), "written after the command's sync")

	name := p.sandboxName(spec.ID)
	require.Eventually(t, func() bool { st, _ := srv.SandboxState(name); return st == "archived" }, time.Minute, 100*time.Millisecond,
		"auto-stop after a Daytona minute unused, auto-archive a minute later")
	state, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeStopped, state, "archived counts as stopped")

	res := runtimetest.Sh(t, ctx, rt, "cat late.txt; echo now > now.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "late\n", string(res.Stdout))
	for f, want := range map[string]string{"late.txt": "late\n", "now.txt": "now\n"} {
		b, err := os.ReadFile(filepath.Join(wt, f))
		require.NoError(t, err, f)
		require.Equal(t, want, string(b), f)
	}
	require.Equal(t, 0, rt.(*Runtime).Replica().Recreated, "started again, not recreated")
	st, _ := srv.SandboxState(name)
	require.Equal(t, "started", st)
}

// TestDeploymentsSharingAnOrganization: two deployments (worker hosts) of one
// Daytona organization with the same runtime id (the same workspace key on
// both) get a sandbox each, named apart, and neither lists, reaches or
// deletes the other's.
func TestDeploymentsSharingAnOrganization(t *testing.T) {
	srv := newFake(t, fake.Options{})
	a := newProvider(t, srv, func(o *Options) { o.Deployment = "host-a" })
	b := newProvider(t, srv, func(o *Options) { o.Deployment = "host-b" })
	ctx := context.Background()
	bareA, wtA := runtimetest.GitFixture(t)
	bareB, wtB := runtimetest.GitFixture(t)
	specA, specB := gitSpec(bareA, wtA), gitSpec(bareB, wtB)
	specB.ID, specB.WorkspaceID = specA.ID, specA.WorkspaceID
	rtA, err := a.Create(ctx, specA)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Destroy(context.Background(), specA.ID) })
	rtB, err := b.Create(ctx, specB)
	require.NoError(t, err, "the same runtime id in another deployment is no conflict")
	t.Cleanup(func() { _ = b.Destroy(context.Background(), specB.ID) })
	require.NotEqual(t, a.sandboxName(specA.ID), b.sandboxName(specB.ID))
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rtA, "echo a > who.txt"))
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rtB, "echo b > who.txt"))
	for wt, want := range map[string]string{wtA: "a\n", wtB: "b\n"} {
		got, err := os.ReadFile(filepath.Join(wt, "who.txt"))
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
	listA, err := a.List(ctx, nil)
	require.NoError(t, err)
	require.Len(t, listA, 1)
	require.Equal(t, specA.ID, listA[0].ID, "List reports runtime ids")
	require.Equal(t, "host-a", listA[0].Labels[LabelDeployment])
	none := func(context.Context, string) (bool, error) { return false, nil }
	orphans, err := a.Orphans(ctx, none)
	require.NoError(t, err)
	require.Len(t, orphans, 1, "only its own sandboxes")
	require.NoError(t, a.DeleteOrphan(ctx, specA.ID))
	st, _ := srv.SandboxState(b.sandboxName(specB.ID))
	require.Equal(t, "started", st, "deleting host-a's runtime leaves host-b's")
	require.ErrorIs(t, a.DeleteOrphan(ctx, "../../etc"), sandboxapi.ErrInvalidArgument)
}

// TestHomeDirectoryAndNestedRepositories: the replica's bookkeeping lives in
// the home directory the toolbox reports (a daemon without that endpoint:
// Daytona's /home/<user>); a nested git repository made in the sandbox is
// not synced back, and Replica reports it (NotSynced) until it is gone.
func TestHomeDirectoryAndNestedRepositories(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	srv.Inject(fake.Fault{Operation: "GetUserHomeDir", Status: 404})
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	require.Equal(t, fake.SandboxHome, rt.(*Runtime).home(), "the fallback: /home/<sandbox user>")
	require.Equal(t, 1, srv.Requests()["GetUserHomeDir"])
	res := runtimetest.Sh(t, ctx, rt, "test -d "+fake.SandboxHome+"/.sandboxcore/"+spec.ID+"/sync.git && echo state-in-home")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "state-in-home\n", string(res.Stdout))

	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "mkdir -p vendor/lib && cd vendor/lib && git init -q && echo x > f.txt && cd ../.. && echo top > top.txt"))
	require.FileExists(t, filepath.Join(wt, "top.txt"))
	require.NoFileExists(t, filepath.Join(wt, "vendor", "lib", "f.txt"), "a nested repository is not synced back")
	require.Equal(t, []string{"vendor/lib/"}, rt.(*Runtime).Replica().NotSynced)
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "rm -rf vendor"))
	require.Empty(t, rt.(*Runtime).Replica().NotSynced)
}

// TestErroredSandboxIsRecovered: Daytona refuses start for a sandbox in
// error — 400 "Sandbox is in an errored state"
// (apps/api/src/sandbox/services/sandbox.service.ts:164-168, 2060,
// daytonaio/daytona v0.190.0, which the fake copies) — and takes a
// recoverable one back with POST /sandbox/{id}/recover (2242-2281): the
// next use of the runtime recovers it, and its files are still there.
func TestErroredSandboxIsRecovered(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo kept > kept.txt"))

	name := p.sandboxName(spec.ID)
	require.True(t, srv.SetState(name, "error"))
	_, resp, err := p.api.SandboxAPI.StartSandbox(ctx, name).Execute()
	require.Error(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(err.(*apiclient.GenericOpenAPIError).Body()), "Sandbox is in an errored state")

	res := runtimetest.Sh(t, ctx, rt, "cat kept.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "kept\n", string(res.Stdout))
	st, _ := srv.SandboxState(name)
	require.Equal(t, "started", st)
	require.Equal(t, 0, rt.(*Runtime).Replica().Recreated, "recovered in place, not recreated")
}

// TestCancelKillsTheSessionUnderTheToolboxShell: Daytona's daemon runs
// /process/execute with the first of zsh and bash in the sandbox's
// /etc/shells (apps/daemon/pkg/common/get_shell.go:14-48,
// apps/daemon/pkg/toolbox/process/execute.go:55-58 of daytonaio/daytona
// v0.190.0; the stand-in copies it) — zsh on Daytona's default snapshot and
// on the test image. The cancel script sent that way still kills a
// command's whole session, a job that bash's job control moved to a process
// group of its own included (zsh does not split the words of the session
// sweep: the job survived); and a command cancelled through the runtime
// leaves nothing behind.
func TestCancelKillsTheSessionUnderTheToolboxShell(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	dir := t.TempDir()
	spec := runtimetest.WorkspaceSpec("daytona", dir)
	spec.Workdir = fake.SandboxWorkspace
	spec.Mounts[0].Target = spec.Workdir
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
	if sh := srv.ToolboxShell(p.sandboxName(spec.ID)); !strings.HasSuffix(sh, "/zsh") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the toolbox shell is %q, not zsh: rebuild the test image (.ci/test-image.sh)", sh)
		}
		t.Skipf("the toolbox shell is %q, not zsh: rebuild the test image (.ci/test-image.sh)", sh)
	}
	r := rt.(*Runtime)
	alive := func(pid string) bool {
		code, _, err := r.run(ctx, "st=$(cat /proc/"+pid+"/stat 2>/dev/null) || exit 1; case ${st##*) } in Z*) exit 1;; esac")
		require.NoError(t, err)
		return code == 0
	}

	// The cancel script on its own, against a session as a command's: its
	// leader (whose id the pass records) and a job in a group of its own.
	pass := r.remoteState() + "/pass/cancel-under-zsh"
	code, out, err := r.run(ctx, "P="+replica.ShQuote(pass)+`; mkdir -p "$P/x" "$P/out" && cd "$P" || exit 1
setsid bash -c 'set -m; sleep 300 & echo $! > job; echo $$ > x/pgid.new; mv x/pgid.new x/pgid; wait' </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s job ] || [ ! -s x/pgid ]; do [ $i -ge 100 ] && exit 1; sleep 0.05; i=$((i+1)); done
cat x/pgid job`)
	require.NoError(t, err)
	require.Equal(t, 0, code, "%s", out)
	pids := strings.Fields(string(out))
	require.Len(t, pids, 2, "%s", out)
	leader, job := pids[0], pids[1]
	require.True(t, alive(leader) && alive(job))
	r.cancel(pass)
	require.Eventually(t, func() bool { return !alive(leader) }, 5*time.Second, 100*time.Millisecond, "the command's group")
	require.Eventually(t, func() bool { return !alive(job) }, 5*time.Second, 100*time.Millisecond, "the job in a group of its own")

	// Through the runtime: the command and its job are gone after the cancel.
	files := remoteFiles{p: p, id: spec.ID, dir: spec.Workdir}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	_, err = rt.Exec(cctx, sandboxapi.ExecRequest{Cmd: []string{"bash", "-c",
		`set -m; { sleep 3; echo late > late; } & while :; do date >> tick; sleep 1; done`}, TimeoutS: 60})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, files.Exists("tick"), "the command never ran")
	before := files.Size("tick")
	time.Sleep(max(2500*time.Millisecond, time.Until(start.Add(4500*time.Millisecond))))
	require.Equal(t, before, files.Size("tick"), "the command's loop survived the cancel")
	require.False(t, files.Exists("late"), "its background job in a group of its own survived the cancel")
}

// TestComputeQuotaDeletesNothing: Daytona refuses a create beyond the
// organization's CPU quota with 400 "Total CPU limit exceeded. Maximum
// allowed: N.\n…" (apps/api/src/sandbox/services/sandbox.service.ts:283-287
// of daytonaio/daytona v0.190.0, which the stand-in copies), and counts CPU
// and memory only for sandboxes that run
// (organization/constants/sandbox-states-consuming-compute.constant.ts):
// deleting stopped replicas frees none, so none is deleted.
func TestComputeQuotaDeletesNothing(t *testing.T) {
	srv := newFake(t, fake.Options{MaxCPU: 1})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	create := func() (sandbox.RuntimeSpec, sandbox.Runtime, error) {
		bare, wt := runtimetest.GitFixture(t)
		spec := gitSpec(bare, wt)
		rt, err := p.Create(ctx, spec)
		if err == nil {
			t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
		}
		return spec, rt, err
	}
	// A clean stopped replica (1 CPU, not counted while stopped) and a
	// running one (the quota's 1 CPU).
	stoppedSpec, stoppedRT, err := create()
	require.NoError(t, err)
	require.NoError(t, stoppedRT.Stop(ctx))
	_, _, err = create()
	require.NoError(t, err, "a stopped sandbox holds no CPU")

	_, _, err = create()
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.Contains(t, err.Error(), "Total CPU limit exceeded. Maximum allowed: 1.")
	require.Contains(t, sandboxapi.Message(err), "none was deleted")
	st, _ := srv.SandboxState(p.sandboxName(stoppedSpec.ID))
	require.Equal(t, "stopped", st, "the stopped replica is kept: deleting it frees no CPU")
}
