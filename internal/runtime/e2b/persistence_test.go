package e2b

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func sandboxOf(t *testing.T, rt sandbox.Runtime) string {
	t.Helper()
	rec, err := rt.(*Runtime).record()
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec.SandboxID
}

// counterScript starts a background process (it leaves the command's
// session) that counts in its own memory and writes the count to /tmp/count,
// its pid to /tmp/counter.pid.
const counterScript = `setsid sh -c 'echo $$ > /tmp/counter.pid; i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done' </dev/null >/dev/null 2>&1 &
sleep 0.5; cat /tmp/counter.pid`

func count(t *testing.T, ctx context.Context, rt sandbox.Runtime) (pid string, n int) {
	t.Helper()
	res := runtimetest.Sh(t, ctx, rt, `cat /tmp/counter.pid; cat /tmp/count; kill -0 "$(cat /tmp/counter.pid)" && echo alive`)
	runtimetest.RequireOK(t, res)
	lines := strings.Fields(string(res.Stdout))
	require.Len(t, lines, 3, "%s", res.Stdout)
	require.Equal(t, "alive", lines[2])
	n, err := strconv.Atoi(lines[1])
	require.NoError(t, err)
	return lines[0], n
}

// TestPauseResumeKeepsFilesAndProcesses: hibernate is E2B's pause, which
// keeps the filesystem, memory and the processes running in the
// background: after resume the same process goes on counting from where it
// was (its count lives in its memory only), and files made outside the
// replica are still there. An E2B timeout with autoPause does the same.
func TestPauseResumeKeepsFilesAndProcesses(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	id := sandboxOf(t, rt)

	res := runtimetest.Sh(t, ctx, rt, "echo outside > /tmp/outside.txt; echo work > work.txt; "+counterScript)
	runtimetest.RequireOK(t, res)
	pid0 := strings.TrimSpace(string(res.Stdout))
	pid1, n1 := count(t, ctx, rt)
	require.Equal(t, pid0, pid1)

	require.NoError(t, rt.Stop(ctx))
	require.Equal(t, "paused", srv.State(id), "hibernate pauses the sandbox")
	st, err := rt.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.RuntimeStopped, st)
	data, err := os.ReadFile(filepath.Join(wt, "work.txt"))
	require.NoError(t, err)
	require.Equal(t, "work\n", string(data))

	// The next command resumes it: same sandbox, same process, count kept.
	pid2, n2 := count(t, ctx, rt)
	require.Equal(t, id, sandboxOf(t, rt), "resumed, not recreated")
	require.Equal(t, pid1, pid2, "the background process survived the pause")
	require.GreaterOrEqual(t, n2, n1, "its memory survived the pause (a restarted counter starts at 1)")
	res = runtimetest.Sh(t, ctx, rt, "cat /tmp/outside.txt work.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "outside\nwork\n", string(res.Stdout))
	require.Zero(t, rt.(*Runtime).Replica().Recreated)

	// E2B's timeout passing (autoPause): paused, resumed on next use, alike.
	require.True(t, srv.Expire(id))
	require.Equal(t, "paused", srv.State(id))
	pid3, n3 := count(t, ctx, rt)
	require.Equal(t, pid1, pid3)
	require.GreaterOrEqual(t, n3, n2)
	require.Equal(t, id, sandboxOf(t, rt))
}

// TestVanishedSandboxIsRecreatedWithNothingLost: a sandbox deleted out of
// band, or killed when its timeout passed, is created again on the next
// use and the replica re-synced from the host: the agent's uncommitted
// files and git state are all there.
func TestVanishedSandboxIsRecreatedWithNothingLost(t *testing.T) {
	srv := newFake(t, fake.Options{KillOnTimeout: true})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "mkdir -p src && echo uncommitted > src/work.txt && echo more >> a.txt && ln -s a.txt link && printf '#!/bin/sh\\necho run\\n' > x.sh && chmod +x x.sh"))

	first := sandboxOf(t, rt)
	require.True(t, srv.Kill(first), "deleted out of band")
	res := runtimetest.Sh(t, ctx, rt, "cat src/work.txt a.txt link; ./x.sh; git status --porcelain; git log --oneline")
	runtimetest.RequireOK(t, res)
	require.True(t, strings.HasPrefix(string(res.Stdout), "uncommitted\na\nmore\na\nmore\nrun\n M a.txt\n?? link\n?? src/\n?? x.sh\n"), "%s", res.Stdout)
	second := sandboxOf(t, rt)
	require.NotEqual(t, first, second)
	require.Equal(t, 1, rt.(*Runtime).Replica().Recreated)

	// Killed by its timeout (no pause on this account): the same.
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "echo later > later.txt"))
	require.True(t, srv.Expire(second))
	require.Empty(t, srv.State(second), "killed")
	res = runtimetest.Sh(t, ctx, rt, "cat later.txt src/work.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "later\nuncommitted\n", string(res.Stdout))
	require.Equal(t, 2, rt.(*Runtime).Replica().Recreated)
	require.Len(t, srv.SandboxIDs(), 1, "one sandbox at a time")
	data, err := os.ReadFile(filepath.Join(wt, "later.txt"))
	require.NoError(t, err)
	require.Equal(t, "later\n", string(data))
}

// TestLongCommandsSurviveStreamCuts: E2B's proxies cut long streams (the
// fake: after one second); the command goes on in the sandbox, the runtime
// follows it again by its tag (process.Process/Connect) and no output is
// lost; a timeout still kills the whole tree in the sandbox.
func TestLongCommandsSurviveStreamCuts(t *testing.T) {
	srv := newFake(t, fake.Options{StreamLimit: time.Second})
	p := newProvider(t, srv, nil)
	dir := t.TempDir()
	spec := runtimetest.WorkspaceSpec("e2b", dir)
	spec.Workdir = fake.SandboxWorkspace
	spec.Mounts[0].Target = spec.Workdir
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })

	var streamed []byte
	res, err := rt.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.8; done; echo done >&2"}, TimeoutS: 60},
		func(c sandboxapi.ExecChunk) {
			if c.Stream == "stdout" {
				streamed = append(streamed, c.Data...)
			}
		})
	require.NoError(t, err)
	runtimetest.RequireOK(t, res)
	require.Equal(t, "line 1\nline 2\nline 3\nline 4\nline 5\n", string(res.Stdout))
	require.Equal(t, "done\n", string(res.Stderr))
	require.Equal(t, string(res.Stdout), string(streamed), "the chunks add up to the result across reconnects")
	require.Positive(t, srv.Requests()["envd /process.Process/Connect"], "the stream was cut and followed again")

	start := time.Now()
	res, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "(sleep 4; echo late > late) & while :; do date >> tick; sleep 0.5; done"}, TimeoutS: 3})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)
	require.Less(t, time.Since(start), 15*time.Second)
	files := remoteFiles{p: p, id: spec.ID, dir: spec.Workdir}
	before := files.Size("tick")
	time.Sleep(2500 * time.Millisecond)
	require.Equal(t, before, files.Size("tick"), "the loop was killed in the sandbox")
	require.False(t, files.Exists("late"), "its background child too")
}

// TestFaultsAreTypedAndLoseNothing: every E2B failure maps to its kind, and
// a call that failed loses nothing.
func TestFaultsAreTypedAndLoseNothing(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	ctx := context.Background()

	// E2B's texts (e2b-dev/infra @54693ff): the rate limiter's
	// (packages/api/internal/middleware/ratelimit/ratelimit.go:137-149), the
	// concurrency cap's (packages/api/internal/orchestrator/
	// create_instance.go:196-203), an unknown template's.
	for _, c := range []struct {
		status int
		msg    string
		header map[string]string
		kind   error
	}{
		{401, "Invalid API key", nil, sandboxapi.ErrUnauthorized},
		{429, "Rate limit exceeded", map[string]string{"Retry-After": "1"}, sandboxapi.ErrRateLimited},
		{429, "you have reached the maximum number of concurrent E2B sandboxes (20). If you need more, please visit 'https://e2b.dev/docs/billing'", nil, sandboxapi.ErrResourceLimit},
		{404, "template 'x' not found", nil, sandboxapi.ErrInvalidArgument}, // packages/api/internal/cache/templates/errors.go:59-69
	} {
		srv.Inject(fake.Fault{Operation: "POST /sandboxes", Status: c.status, Message: c.msg, Header: c.header, Times: 3}) // a rate limit is retried
		_, err := p.Create(ctx, spec)
		require.ErrorIs(t, err, c.kind, "%d %s", c.status, c.msg)
		require.NotContains(t, err.Error(), srv.APIKey())
		srv.ClearFaults()
	}
	srv.Inject(fake.Fault{Operation: "POST /sandboxes", Status: 503, Times: 3})
	_, err := p.Create(ctx, spec)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.True(t, sandboxapi.IsRetryable(err))
	require.Empty(t, srv.SandboxIDs())

	// A create whose answer is lost is adopted: one sandbox, not two.
	srv.Inject(fake.Fault{Operation: "POST /sandboxes", Drop: true})
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	require.Len(t, srv.SandboxIDs(), 1)

	// A full disk on upload is ResourceLimit "disk full"; the change stays on
	// the host and goes up with the next command.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "big.txt"), []byte("host change\n"), 0o644))
	srv.Inject(fake.Fault{Operation: "envd POST /files", Status: 507, Message: "not enough disk space available"})
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, TimeoutS: 30})
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.Contains(t, err.Error(), "disk is full")
	res := runtimetest.Sh(t, ctx, rt, "cat big.txt")
	runtimetest.RequireOK(t, res)
	require.Equal(t, "host change\n", string(res.Stdout))

	// A result lost on the way fails the call; the next one brings the change back.
	srv.Inject(fake.Fault{Operation: "envd GET /files", Drop: true, Times: 6})
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo two > two.txt"}, TimeoutS: 30})
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.NoFileExists(t, filepath.Join(wt, "two.txt"))
	srv.ClearFaults()
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "true"))
	require.FileExists(t, filepath.Join(wt, "two.txt"))

	// envd refusing the access token is Unauthorized.
	srv.Inject(fake.Fault{Operation: "envd /process.Process/Start", Status: 401, Message: "unauthorized access"})
	_, err = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, TimeoutS: 30})
	require.ErrorIs(t, err, sandboxapi.ErrUnauthorized)

	// A 404 on the sandbox (gone) recreates it on the next use.
	srv.Kill(sandboxOf(t, rt))
	srv.Inject(fake.Fault{Operation: "GET /sandboxes/{sandboxID}", Status: 500})
	runtimetest.RequireOK(t, runtimetest.Sh(t, ctx, rt, "test -f two.txt"))
}

// TestPreviewURL: E2B's {port}-{id}.{domain} address with the traffic token
// of a private sandbox, really reaching a server in the sandbox.
func TestPreviewURL(t *testing.T) {
	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	dir := t.TempDir()
	spec := runtimetest.WorkspaceSpec("e2b", dir)
	spec.Workdir = fake.SandboxWorkspace
	spec.Mounts[0].Target = spec.Workdir
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	pp, ok := any(p).(interface {
		PreviewURL(context.Context, string, int) (sandboxapi.PreviewURL, error)
	})
	require.True(t, ok)
	_, err = pp.PreviewURL(ctx, spec.ID, 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = pp.PreviewURL(ctx, spec.ID+"-missing", 8080)
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	u, err := pp.PreviewURL(ctx, spec.ID, 8080)
	require.NoError(t, err)
	require.Equal(t, "http://8080-"+sandboxOf(t, rt)+"."+srv.Domain()+"/", u.URL)
	require.NotEmpty(t, u.Token, "private sandbox: the traffic token")
	require.Nil(t, u.ExpiresAt)
}

// TestStillTransitioningIsWaitedOut: E2B's sandbox proxy answers a request
// that meets a sandbox in a pause or a resume 409 "The sandbox is still
// transitioning. Try again in a moment." in its JSON {sandboxId, message,
// code} (packages/shared/pkg/proxy/template/sandbox_still_transitioning.go:24-34
// and template.go:63-76 of e2b-dev/infra @54693ff): a passing refusal, tried
// again after a moment, not a conflict that fails the command.
func TestStillTransitioningIsWaitedOut(t *testing.T) {
	proxyAnswer := func(id string) string {
		return `{"sandboxId":"` + id + `","message":"The sandbox is still transitioning. Try again in a moment.","code":409}`
	}
	err := answer(t, 409, nil, proxyAnswer("i0123456789abcdefghi"))
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.True(t, sandboxapi.IsRetryable(err))
	// The control plane's keep-alive of a sandbox being paused
	// (packages/api/internal/orchestrator/keep_alive.go:50-51,
	// utils/messages.go:13-22).
	err = answer(t, 409, nil, `{"code":409,"message":"Sandbox \"i0123456789abcdefghi\" is being paused"}`)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	err = answer(t, 409, nil, `{"code":409,"message":"Sandbox \"i0123456789abcdefghi\" is being killed"}`)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "a sandbox being killed does not come back")

	srv := newFake(t, fake.Options{})
	p := newProvider(t, srv, nil)
	ctx := context.Background()
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	before := srv.Requests()["envd GET /files"]
	srv.Inject(fake.Fault{Operation: "envd GET /files", Status: 409, Body: proxyAnswer(sandboxOf(t, rt)), Times: 2,
		Header: map[string]string{"Content-Type": "application/json; charset=utf-8"}})
	res := runtimetest.Sh(t, ctx, rt, "echo through > through.txt")
	runtimetest.RequireOK(t, res)
	require.FileExists(t, filepath.Join(wt, "through.txt"))
	require.Equal(t, before+3, srv.Requests()["envd GET /files"], "two refusals, then the result")
}
