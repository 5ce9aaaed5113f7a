package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestHandlesOneHandlePerID(t *testing.T) {
	var h Handles[*int] // the zero value is ready
	made := 0
	create := func(string) *int { made++; n := made; return &n }
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = h.For("a", create) }()
	}
	wg.Wait()
	for _, p := range got {
		require.Same(t, got[0], p, "every caller meets the same handle")
	}
	require.Equal(t, 1, made)
	require.NotSame(t, got[0], h.For("b", create))

	h.Drop("a")
	h.Drop("never-made")
	again := h.For("a", create)
	require.NotSame(t, got[0], again, "a dropped id gets a new handle")
	require.Equal(t, 3, *again)
}

func TestHeaderTransportSetsOneHeaderAndNeverPrintsIt(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }))
	defer srv.Close()
	tr := NewHeaderTransport("test-auth", "Authorization", "Bearer s3cret-key", http.DefaultTransport)
	c := &http.Client{Transport: tr, CheckRedirect: NoRedirect}
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("X-Other", "kept")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "Bearer s3cret-key", seen.Get("Authorization"))
	require.Equal(t, "kept", seen.Get("X-Other"))
	require.Empty(t, req.Header.Get("Authorization"), "the caller's request is not changed")

	require.Equal(t, "test-auth(<redacted>)", tr.String())
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		require.NotContains(t, fmt.Sprintf(verb, tr), "s3cret", verb)
	}
}

func TestNoRedirectIsNotFollowed(t *testing.T) {
	hit := false
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer target.Close()
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer srv.Close()
	c := &http.Client{Transport: NewHeaderTransport("t", "X-API-Key", "k", http.DefaultTransport), CheckRedirect: NoRedirect}
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.False(t, hit, "the key never follows a redirect")
}

func TestCapabilitiesOfARemoteRuntime(t *testing.T) {
	require.Equal(t, sandbox.RuntimeCapabilities{Isolated: true, PreviewURL: true}, Capabilities())
}

// stubRuntime is a remote runtime's handle whose sandbox is a directory of
// this machine (dirTransport).
type stubRuntime struct {
	sandbox.Runtime // not called
	id              string
	held            *SpecReplica
	ensured         int
	syncs           int
}

func (s *stubRuntime) ID() string { return s.id }

// remoteSpec is a spec whose workdir (a directory of this machine) mounts
// a worktree of runtimetest.GitFixture, and the held fields of its handle.
func remoteSpec(t *testing.T, id string) (sandbox.RuntimeSpec, *SpecReplica) {
	t.Helper()
	bare, wt := runtimetest.GitFixture(t)
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	sb := t.TempDir()
	spec := sandbox.RuntimeSpec{ID: id, WorkspaceID: "ws", Workdir: filepath.Join(sb, "workspace"), Env: map[string]string{"A": "1"},
		Network: sandboxapi.NetworkDefault,
		Mounts:  []sandbox.Mount{{Source: wt, Target: filepath.Join(sb, "workspace"), Writable: true}, {Source: bare, Target: bare, Writable: true}}}
	held := &SpecReplica{Kind: "test", ID: id, StateDir: filepath.Join(t.TempDir(), id), RemoteState: filepath.Join(sb, "state"), Git: git}
	return spec, held
}

func TestCreateFlow(t *testing.T) {
	spec, held := remoteSpec(t, "r1")
	handles := Handles[*stubRuntime]{}
	ensureErr := error(nil)
	flow := CreateFlow[*stubRuntime]{
		Kind: "test",
		ValidID: func(id string) error {
			if id == "bad id" {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "test: runtime id %q is not valid", id)
			}
			return nil
		},
		Handle: func(id string) (*stubRuntime, *SpecReplica) {
			rt := handles.For(id, func(id string) *stubRuntime { return &stubRuntime{id: id, held: held} })
			return rt, rt.held
		},
		Ensure: func(_ context.Context, rt *stubRuntime) error { rt.ensured++; return ensureErr },
		Transport: func(rt *stubRuntime) Transport {
			rt.syncs++
			return &dirTransport{}
		},
	}
	ctx := context.Background()

	bad := spec
	bad.ID = "bad id"
	_, err := flow.Create(ctx, bad)
	require.EqualError(t, err, `InvalidArgument: test: runtime id "bad id" is not valid`)
	rel := spec
	rel.Workdir = "workspace"
	_, err = flow.Create(ctx, rel)
	require.EqualError(t, err, "InvalidArgument: test: the workdir must be absolute")

	got, err := flow.Create(ctx, spec)
	require.NoError(t, err)
	rt := got.(*stubRuntime)
	require.Equal(t, 1, rt.ensured)
	require.Equal(t, 1, rt.syncs, "the first Create makes the replica")
	require.Equal(t, "a\n", read(t, filepath.Join(spec.Workdir, "a.txt")))
	require.True(t, rt.held.Replica().Status().Synced)
	_, err = os.Stat(filepath.Join(held.StateDir, SpecFile))
	require.NoError(t, err, "the spec is recorded on disk")

	again, err := flow.Create(ctx, spec)
	require.NoError(t, err)
	require.Same(t, rt, again)
	require.Equal(t, 2, rt.ensured)
	require.Equal(t, 1, rt.syncs, "a synced replica is not synced again")

	ensureErr = sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "test: no room")
	_, err = flow.Create(ctx, spec)
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
}

func TestSpecReplicaLoadsWhatSetRecorded(t *testing.T) {
	spec, held := remoteSpec(t, "r2")
	require.NoError(t, held.Set(spec))
	first := held.Replica()
	require.NotNil(t, first)
	require.NoError(t, held.Set(spec))
	require.Same(t, first, held.Replica(), "the same spec keeps its replica")

	// Another handle of the same runtime (a restarted worker) loads the spec.
	other := SpecReplica{Kind: held.Kind, ID: held.ID, StateDir: held.StateDir, RemoteState: held.RemoteState, Git: held.Git}
	s, rep := other.Get()
	require.Nil(t, s)
	require.Nil(t, rep)
	require.Nil(t, other.Env())
	require.NoError(t, other.Load())
	s, rep = other.Get()
	require.NotNil(t, rep)
	require.Equal(t, spec.Workdir, s.Workdir)
	require.Equal(t, map[string]string{"A": "1"}, other.Env())

	require.Same(t, rep, other.Clear())
	s, rep = other.Get()
	require.Nil(t, s)
	require.Nil(t, rep)
	require.Nil(t, other.Clear())

	empty := SpecReplica{StateDir: t.TempDir()}
	require.ErrorIs(t, empty.Load(), os.ErrNotExist)
}

func TestSpecReplicaExecChecksBeforeAnythingRuns(t *testing.T) {
	ran := 0
	run := func(*Replica) (sandboxapi.ExecResult, error) { ran++; return sandboxapi.ExecResult{ExitCode: 7}, nil }

	none := SpecReplica{Kind: "test", ID: "r3", StateDir: t.TempDir()}
	_, err := none.Exec(sandboxapi.ExecRequest{}, nil, run)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "an empty argv")
	res, err := none.Exec(sandboxapi.ExecRequest{Cmd: []string{"-x"}}, nil, run)
	require.NoError(t, err)
	require.Equal(t, 127, res.ExitCode, "a name that begins with - is not run")
	_, err = none.Exec(sandboxapi.ExecRequest{Cmd: []string{"true"}}, nil, run)
	require.EqualError(t, err, "InvalidArgument: test: runtime r3 has no workspace (create it with its spec)")
	require.Zero(t, ran)

	spec, held := remoteSpec(t, "r4")
	require.NoError(t, held.Set(spec))
	_, err = held.Exec(sandboxapi.ExecRequest{Cmd: []string{"true"}, Network: sandboxapi.NetworkNone}, nil, run)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "one network for the whole sandbox")
	res, err = held.Exec(sandboxapi.ExecRequest{Cmd: []string{"true"}}, nil, run)
	require.NoError(t, err)
	require.Equal(t, 7, res.ExitCode)
	require.Equal(t, 1, ran)
}

func TestContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ContextError(ctx, "test", "get sandbox x")
	require.EqualError(t, err, "SandboxUnavailable: test: get sandbox x: context canceled")
	require.ErrorIs(t, err, context.Canceled)

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	err = ContextError(dctx, "test", "get sandbox x")
	require.ErrorIs(t, err, sandboxapi.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRetrierWithoutEndedGivesContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := Retrier{Kind: "test", Log: testRetrier().Log, CallTimeout: time.Minute}.Do(ctx, "x", func(context.Context) error {
		cancel()
		return errors.New("cut")
	})
	// The context ended after a transient failure: the last error stands.
	require.EqualError(t, err, "cut")

	ctx2, cancel2 := context.WithCancel(context.Background())
	calls := 0
	err = Retrier{Kind: "test", Log: testRetrier().Log, CallTimeout: time.Minute}.Do(ctx2, "x", func(context.Context) error {
		calls++
		go func() { time.Sleep(10 * time.Millisecond); cancel2() }()
		return errors.New("cut")
	})
	require.Equal(t, 1, calls)
	require.EqualError(t, err, "SandboxUnavailable: test: x: context canceled")
}

func TestHibernatedMark(t *testing.T) {
	dir := t.TempDir()
	require.False(t, Hibernated(dir))
	MarkHibernated(dir)
	require.True(t, Hibernated(dir))
	require.FileExists(t, filepath.Join(dir, HibernatedFile))
	ClearHibernated(dir)
	require.False(t, Hibernated(dir))
	ClearHibernated(dir) // none: nothing happens
	MarkHibernated(filepath.Join(dir, "missing"))
	require.False(t, Hibernated(filepath.Join(dir, "missing")), "a failed mark is ignored")
}
