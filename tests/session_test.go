package tests

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// httpRepo serves a fresh upstream repository (default branch "trunk") over
// smart HTTP with basic auth and registers the credential with the test
// credential provider (the worker resolves it per call; nothing stores it).
func httpRepo(t *testing.T) (*gittest.Server, string, string) {
	t.Helper()
	root := t.TempDir()
	secret := "s3cret-token-" + uniq(t, "p")
	srv := gittest.NewHTTPServer(t, root, "agent", secret)
	dir := gittest.InitRepo(t, srv.RepoDir("team/project.git"), "trunk")
	gittest.Commit(t, dir, "README.md", "hello\n", "initial")
	gittest.Commit(t, dir, "src/main.go", "package main\n", "add main")
	id, err := sandboxapi.ParseRepoURL(srv.URL("team/project.git"), sandboxapi.URLPolicy{AllowHTTP: true})
	require.NoError(t, err)
	creds.set(id.Host, sandbox.Credential{Username: "agent", Secret: secret})
	return srv, srv.URL("team/project.git"), dir
}

func editRequest(user, project, conv, url string) sandboxapi.WorkspaceRequest {
	return sandboxapi.WorkspaceRequest{UserID: user, ProjectID: project, RepoURL: url, Mode: sandboxapi.ModeEdit, ConversationID: conv}
}

func TestAcquireIsIdempotentAndConversationsAreIsolated(t *testing.T) {
	h := startHost(t, "idem")
	root := t.TempDir()
	upstream := gittest.InitRepo(t, filepath.Join(root, "team", "project"), "trunk")
	base := gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 2*time.Minute)
	user, project := uniq(t, "u"), "p1"

	sA, hA, err := h.client.Acquire(ctx, editRequest(user, project, "convA", url))
	require.NoError(t, err)
	assert.True(t, hA.Created)
	assert.Equal(t, sandboxapi.EditBranch(user, project, "convA"), hA.Branch)
	assert.Equal(t, base, hA.BaseCommit)
	assert.Equal(t, sandboxapi.ModeEdit, hA.Mode)
	assert.True(t, hA.Capabilities.Writable)
	assert.DirExists(t, hA.LocalPath)

	_, hA2, err := h.client.Acquire(ctx, editRequest(user, project, "convA", url))
	require.NoError(t, err)
	assert.Equal(t, hA.WorkspaceID, hA2.WorkspaceID)
	assert.Equal(t, hA.LocalPath, hA2.LocalPath)
	assert.Equal(t, hA.Branch, hA2.Branch)

	sB, hB, err := h.client.Acquire(ctx, editRequest(user, project, "convB", url))
	require.NoError(t, err)
	assert.NotEqual(t, hA.WorkspaceID, hB.WorkspaceID)
	assert.NotEqual(t, hA.LocalPath, hB.LocalPath)
	assert.Equal(t, sandboxapi.EditBranch(user, project, "convB"), hB.Branch)

	// Other local users cannot reach the worktrees (docs/SECURITY.md).
	fi, err := os.Stat(h.Config.DataDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// One bare repository for both conversations.
	found := findBare(t, h.Config.DataDir)
	assert.Len(t, found, 1, "bare repositories: %v", found)

	// An edit in A is invisible in B.
	require.NoError(t, sA.WriteFile(ctx, "notes/a.txt", []byte("from A\n"), 0))
	_, err = sB.ReadFile(ctx, "notes/a.txt")
	assert.ErrorIs(t, err, sandboxapi.ErrFileNotFound)
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "FileNotFound is a kind of InvalidWorkspacePath")
	stB, err := sB.Status(ctx)
	require.NoError(t, err)
	assert.False(t, stB.Dirty, "B must stay clean: %+v", stB)
	stA, err := sA.Status(ctx)
	require.NoError(t, err)
	assert.True(t, stA.Dirty, "an untracked file makes A dirty")
}

// findBare lists bare repositories (".bare" directories) under the data dir.
func findBare(t *testing.T, dataDir string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(dataDir, "repos"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".bare" {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

func TestCloneOnceOverAuthenticatedHTTP(t *testing.T) {
	h := startHost(t, "http")
	srv, url, _ := httpRepo(t)
	ctx := ctxFor(t, 2*time.Minute)
	user := uniq(t, "u")
	var afterFirst int64
	for i, conv := range []string{"c1", "c2", "c3"} {
		_, hd, err := h.client.Acquire(ctx, editRequest(user, "p", conv, url))
		require.NoError(t, err)
		assert.Equal(t, sandboxapi.EditBranch(user, "p", conv), hd.Branch)
		if i == 0 {
			afterFirst = srv.UploadPackRequests()
			assert.Positive(t, afterFirst, "the first acquire clones")
		}
	}
	// The freshness window spares the later acquires any network round trip.
	assert.Equal(t, afterFirst, srv.UploadPackRequests(), "upload-pack requests after the first acquire")
	found := findBare(t, h.Config.DataDir)
	require.Len(t, found, 1)
	cfg, err := os.ReadFile(filepath.Join(found[0], "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(cfg), "s3cret", "no credential in the cache config")
	assert.NotContains(t, string(cfg), "[branch", "no branch sections in the cache config")
}

func TestWrongCredentialIsAuthFailed(t *testing.T) {
	h := startHost(t, "auth")
	srv, url, _ := httpRepo(t)
	id, _ := sandboxapi.ParseRepoURL(url, sandboxapi.URLPolicy{AllowHTTP: true})
	creds.set(id.Host, sandbox.Credential{Username: "agent", Secret: "wrong"})
	ctx := ctxFor(t, time.Minute)
	start := time.Now()
	_, _, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", url))
	require.Error(t, err)
	assert.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed)
	assert.NotContains(t, err.Error(), "wrong")
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Positive(t, srv.Unauthorized())
	assert.Empty(t, findBare(t, h.Config.DataDir), "nothing left at the final path")
}

func newEditSession(t *testing.T, h *testHost) (*sandboxclient.Session, sandboxapi.Handle, string) {
	t.Helper()
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	s, hd, err := h.client.Acquire(ctxFor(t, time.Minute), editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	return s, hd, upstream
}

func TestExecSemantics(t *testing.T) {
	h := startHost(t, "exec")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	run := func(req sandboxapi.ExecRequest) sandboxapi.ExecResult {
		t.Helper()
		res, err := s.Exec(ctx, req)
		require.NoError(t, err)
		return res
	}
	sh := func(script string) sandboxapi.ExecRequest {
		return sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}}
	}

	res := run(sandboxapi.ExecRequest{Cmd: []string{"echo", "hi"}})
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, "hi\n", string(res.Stdout))

	assert.Equal(t, 3, run(sh("exit 3")).ExitCode)
	assert.Equal(t, 127, run(sandboxapi.ExecRequest{Cmd: []string{"definitely-not-a-cmd"}}).ExitCode)

	res = run(sh("echo out; echo err >&2; exit 1"))
	assert.Equal(t, 1, res.ExitCode)
	assert.Equal(t, "out\n", string(res.Stdout))
	assert.Equal(t, "err\n", string(res.Stderr))

	start := time.Now()
	res = run(sh("sleep 300 & echo started"))
	assert.Less(t, time.Since(start), 2*time.Second, "a background child must not hold the call (within 2 s)")
	assert.Equal(t, "started\n", string(res.Stdout))

	res = run(sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "sleep 300 & while true; do date >> tick; sleep 1; done"}, TimeoutS: 2})
	assert.True(t, res.TimedOut)
	assert.Equal(t, 124, res.ExitCode)
	tick := filepath.Join(hd.LocalPath, "tick")
	st1, err := os.Stat(tick)
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond)
	st2, err := os.Stat(tick)
	require.NoError(t, err)
	assert.Equal(t, st1.Size(), st2.Size(), "tick must stop growing after the timeout")

	// The worker (in this process) must never hold the whole output: sample
	// the live heap (bytes marked live by the last GC; garbage from the
	// streamed chunks does not count) while 50 MB stream through it.
	liveHeap := func() uint64 {
		m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	runtime.GC()
	base := liveHeap()
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v := liveHeap(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res = run(sh("head -c 50000000 /dev/zero | tr '\\0' a"))
	close(stopSampling)
	<-sampled
	assert.True(t, res.Truncated)
	assert.Equal(t, int64(50_000_000), res.StdoutBytes)
	assert.LessOrEqual(t, len(res.Stdout), sandboxapi.DefaultMaxOutputBytes+256)
	assert.Less(t, peak.Load()-min(peak.Load(), base), uint64(30<<20), "the worker must not hold the whole output")

	// The worker's own environment never reaches the command.
	t.Setenv("SANDBOXCORE_TEST_SECRET", "do-not-leak")
	res = run(sandboxapi.ExecRequest{Cmd: []string{"env"}})
	assert.NotContains(t, string(res.Stdout), "do-not-leak")

	// Invalid input is rejected before anything runs.
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{})
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}, Cwd: "../.."})
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

func TestFilesAreConfinedToTheWorktree(t *testing.T) {
	h := startHost(t, "files")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)

	payload := []byte{0, 1, 2, 0xff, '\n', 'x', 0xfe}
	require.NoError(t, s.WriteFile(ctx, "dir/sub/blob.bin", payload, 0o600))
	got, err := s.ReadFile(ctx, "dir/sub/blob.bin")
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	onDisk, err := os.ReadFile(filepath.Join(hd.LocalPath, "dir/sub/blob.bin"))
	require.NoError(t, err)
	assert.Equal(t, payload, onDisk)

	outside := t.TempDir()
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"ln", "-s", outside, "escape"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	_, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"ln", "-s", "/etc/passwd", "passwd-link"}})
	require.NoError(t, err)

	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "escape/pwned", "passwd-link"} {
		_, err := s.ReadFile(ctx, p)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "read %s", p)
		err = s.WriteFile(ctx, p, []byte("pwned"), 0)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "write %s", p)
	}
	_, err = s.ListDir(ctx, "escape")
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
	for _, p := range []string{".git/config", "x/.git/hooks/post-checkout"} {
		assert.ErrorIs(t, s.WriteFile(ctx, p, []byte("x"), 0), sandboxapi.ErrInvalidWorkspacePath, p)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing may be created outside the worktree")
	_, err = os.Stat(filepath.Join(filepath.Dir(hd.LocalPath), "x"))
	assert.True(t, errors.Is(err, os.ErrNotExist))

	list, err := s.ListDir(ctx, "")
	require.NoError(t, err)
	names := map[string]string{}
	for _, e := range list {
		names[e.Name] = e.Type
	}
	assert.Equal(t, "symlink", names["escape"])
	assert.Equal(t, "dir", names["dir"])
	assert.Equal(t, "file", names["README.md"])

	sr, err := s.Search(ctx, sandboxapi.SearchRequest{Pattern: "hello"})
	require.NoError(t, err)
	require.Len(t, sr.Matches, 1)
	assert.Equal(t, "README.md", sr.Matches[0].Path)
}

func TestDiffAndCommit(t *testing.T) {
	h := startHost(t, "commit")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 2*time.Minute)
	user := uniq(t, "u")
	sA, hA, err := h.client.Acquire(ctx, editRequest(user, "p", "convA", url))
	require.NoError(t, err)
	sB, _, err := h.client.Acquire(ctx, editRequest(user, "p", "convB", url))
	require.NoError(t, err)

	require.NoError(t, sA.WriteFile(ctx, "README.md", []byte("hello\nworld\n"), 0))
	require.NoError(t, sA.WriteFile(ctx, "new.txt", []byte("brand new\n"), 0))
	d, err := sA.Diff(ctx)
	require.NoError(t, err)
	assert.Equal(t, hA.BaseCommit, d.BaseCommit)
	assert.ElementsMatch(t, []string{"README.md", "new.txt"}, d.Files)
	assert.Contains(t, d.Patch, "+world")
	assert.Contains(t, d.Patch, "+brand new")
	assert.NotContains(t, d.Patch, "-hello")

	c, err := sA.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: add world"})
	require.NoError(t, err)
	assert.False(t, c.NothingToCommit)
	assert.Equal(t, hA.Branch, c.Branch)

	bare := findBare(t, h.Config.DataDir)
	require.Len(t, bare, 1)
	tip := gittest.Git(t, bare[0], "rev-parse", "refs/heads/"+hA.Branch)
	assert.Equal(t, c.Commit, strings.TrimSpace(tip))
	msg := gittest.Git(t, bare[0], "log", "-1", "--format=%s", "refs/heads/"+hA.Branch)
	assert.Equal(t, "agent: add world", strings.TrimSpace(msg))

	st, err := sA.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty)
	assert.Equal(t, 1, st.CommitsSinceBase)
	d2, err := sA.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d2.Patch, "+world", "committed work still shows against the base")

	gotB, err := sB.ReadFile(ctx, "README.md")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(gotB), "conversation B does not see A's commit")

	c2, err := sA.Commit(ctx, sandboxapi.CommitRequest{Message: "nothing"})
	require.NoError(t, err)
	assert.True(t, c2.NothingToCommit)
}

func TestAnalysisWorkspaceIsReadOnly(t *testing.T) {
	h := startHost(t, "analysis")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	first := gittest.Commit(t, upstream, "README.md", "v1\n", "v1")
	gittest.Git(t, upstream, "tag", "rel-1")
	gittest.Commit(t, upstream, "README.md", "v2\n", "v2")
	ctx := ctxFor(t, time.Minute)
	s, hd, err := h.client.Acquire(ctx, sandboxapi.WorkspaceRequest{UserID: uniq(t, "u"), ProjectID: "p", RepoURL: gittest.FileURL(upstream), Mode: sandboxapi.ModeAnalysis, BaseRef: "rel-1"})
	require.NoError(t, err)
	assert.Equal(t, first, hd.BaseCommit)
	assert.Empty(t, hd.Branch)
	assert.False(t, hd.Capabilities.Writable)
	data, err := s.ReadFile(ctx, "README.md")
	require.NoError(t, err)
	assert.Equal(t, "v1\n", string(data))
	assert.ErrorIs(t, s.WriteFile(ctx, "x.txt", []byte("x"), 0), sandboxapi.ErrCommandRejected)
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "m"})
	assert.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
}

func TestHostileRequestsAreRejected(t *testing.T) {
	h := startHost(t, "hostile")
	ctx := ctxFor(t, time.Minute)
	good := gittest.FileURL(gittest.NewRepo(t, "trunk"))
	cases := map[string]sandboxapi.WorkspaceRequest{
		"ext transport":      editRequest("u", "p", "c", "ext::sh -c touch% /tmp/pwned"),
		"credentials in url": editRequest("u", "p", "c", "https://user:pass@example.com/o/r.git"),
		"dash url":           editRequest("u", "p", "c", "--upload-pack=touch /tmp/pwned"),
		"conversation path":  editRequest("u", "p", "../../../tmp/evil", good),
		"user path":          editRequest("../u", "p", "c", good),
		"repo dots":          editRequest("u", "p", "c", "https://example.com/owner/../../x"),
		"base ref option":    {UserID: "u", ProjectID: "p", RepoURL: good, Mode: sandboxapi.ModeEdit, ConversationID: "c", BaseRef: "--upload-pack=touch /tmp/pwned;git-upload-pack"},
		"bad mode":           {UserID: "u", ProjectID: "p", RepoURL: good, Mode: "root"},
	}
	for name, req := range cases {
		_, _, err := h.client.Acquire(ctx, req)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	_, err := os.Stat("/tmp/pwned")
	assert.True(t, errors.Is(err, os.ErrNotExist))
	assert.Empty(t, findBare(t, h.Config.DataDir))
}

func TestResumeAfterTheSessionRunCompleted(t *testing.T) {
	h := startHost(t, "idle", withIdle(time.Second, 2*time.Second))
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	require.NoError(t, s.WriteFile(ctx, "wip.txt", []byte("uncommitted\n"), 0))
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)

	waitClosed(t, hd.WorkflowID, 60*time.Second)

	// The same acquire finds the same workspace, edit intact.
	_, hd2, err := h.client.Acquire(ctx, editRequest(hd.UserID, hd.ProjectID, "c", hd.Repo.URL))
	require.NoError(t, err)
	assert.Equal(t, hd.WorkspaceID, hd2.WorkspaceID)
	assert.Equal(t, hd.LocalPath, hd2.LocalPath)
	assert.False(t, hd2.Created)
	s2, err := h.client.Session(hd.WorkspaceID)
	require.NoError(t, err)
	data, err := s2.ReadFile(ctx, "wip.txt")
	require.NoError(t, err)
	assert.Equal(t, "uncommitted\n", string(data))

	// An operation on a completed run resumes transparently.
	waitClosed(t, hd.WorkflowID, 60*time.Second)
	data, err = s.ReadFile(ctx, "wip.txt")
	require.NoError(t, err)
	assert.Equal(t, "uncommitted\n", string(data))
}

// waitClosed waits until the session's run ended: it continued as new into
// a dormant run (state released, closed or evicted: docs/API.md "Session
// states") or, for a run without a workspace, completed.
func waitClosed(t *testing.T, wfID string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		d, err := tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		require.NoError(t, err)
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return
		}
		if v, err := tc.QueryWorkflow(context.Background(), wfID, "", sandboxapi.QueryDescribe); err == nil {
			var desc sandboxapi.SessionDescription
			if v.Get(&desc) == nil && !desc.RuntimeRunning && desc.InFlight == 0 &&
				(desc.State == sandboxapi.StateReleased || desc.State == sandboxapi.StateClosed || desc.State == sandboxapi.StateEvicted) &&
				d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != "" && dormantRun(wfID) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("workflow %s still running after %s", wfID, within)
}

// dormantRun reports whether the session's current run was started as a
// dormant continuation (its first event carries the dormant carry).
func dormantRun(wfID string) bool {
	iter := tc.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return false
	}
	ev, err := iter.Next()
	if err != nil {
		return false
	}
	p := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	return len(p) == 1 && strings.Contains(string(p[0].GetData()), `"dormant":true`)
}

func TestReleaseAndHibernateKeepTheWorkspace(t *testing.T) {
	h := startHost(t, "release")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, time.Minute)
	require.NoError(t, s.WriteFile(ctx, "keep.txt", []byte("kept\n"), 0))
	_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	hib, err := s.Hibernate(ctx)
	require.NoError(t, err)
	assert.True(t, hib.Stopped)
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.False(t, d.RuntimeRunning)
	assert.Equal(t, sandboxapi.StateIdle, d.State)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "keep.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(res.Stdout))

	rel, err := s.Release(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, hd.WorkspaceID, rel.WorkspaceID)
	waitClosed(t, hd.WorkflowID, 30*time.Second)
	res, err = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "keep.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(res.Stdout))
}

func TestWorkerKilledMidAcquire(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	root := t.TempDir()
	srv := gittest.NewHTTPServer(t, root, "agent", "pw")
	dir := gittest.InitRepo(t, srv.RepoDir("team/slow.git"), "trunk")
	for i := 0; i < 5; i++ {
		gittest.Commit(t, dir, "f.txt", strings.Repeat("x", i*1000), "c")
	}
	url := srv.URL("team/slow.git")
	id, _ := sandboxapi.ParseRepoURL(url, sandboxapi.URLPolicy{AllowHTTP: true})
	credFile := filepath.Join(t.TempDir(), "creds.json")
	require.NoError(t, os.WriteFile(credFile, []byte(`{"hosts":{"`+id.Host+`":{"username":"agent","secret":"pw"}}}`), 0o600))

	dataDir := filepath.Join(t.TempDir(), "data")
	destroyLeftSandboxes(t, dataDir)
	env := append(os.Environ(), workerProcessEnv+"=1", "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_DATA_DIR="+dataDir,
		"SANDBOX_HOST_ID=crash", "SANDBOX_TASK_QUEUE=q-crash", "SANDBOX_ALLOW_HTTP_URLS=1", "SANDBOX_GIT_CREDENTIALS_FILE="+credFile)
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}

	// Every upload-pack request stalls while the first worker is alive.
	gate := make(chan struct{})
	var killed atomic.Bool
	srv.SetHook(func(r *http.Request) error {
		if !killed.Load() {
			select {
			case gate <- struct{}{}:
			default:
			}
			time.Sleep(3 * time.Second)
		}
		return nil
	})
	w1 := startWorker()
	client := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: "q-crash"})
	done := make(chan error, 1)
	var hd sandboxapi.Handle
	go func() {
		var err error
		_, hd, err = client.Acquire(ctxFor(t, 3*time.Minute), editRequest(uniq(t, "u"), "p", "c", url))
		done <- err
	}()
	select {
	case <-gate:
	case err := <-done:
		t.Fatalf("acquire finished before the clone started: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the clone never reached the server")
	}
	require.NoError(t, syscall.Kill(w1.Process.Pid, syscall.SIGKILL))
	_, _ = w1.Process.Wait()
	killed.Store(true)
	startWorker()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(150 * time.Second):
		t.Fatal("acquire did not complete after the worker restarted")
	}
	bare := findBare(t, dataDir)
	require.Len(t, bare, 1)
	gittest.Git(t, bare[0], "fsck", "--no-progress")
	list := gittest.Git(t, bare[0], "worktree", "list", "--porcelain")
	assert.Equal(t, 1, strings.Count(list, "worktree ")-1, "exactly one linked worktree besides the bare repo:\n%s", list)
	wts, err := os.ReadDir(filepath.Join(filepath.Dir(bare[0]), "worktrees"))
	require.NoError(t, err)
	require.Len(t, wts, 1)
	assert.Equal(t, filepath.Base(hd.LocalPath), wts[0].Name())
}

// TestPreviewURLNeedsTheCapability: preview_url on a host whose runtime
// cannot expose ports (bubblewrap, local: they publish nothing) is
// SandboxCommandRejected, saying why; a bad port is refused by the
// validator first (the Docker and Daytona runtimes' URLs are tested in
// TestDockerEndToEnd and TestDaytonaPreviewURL).
func TestPreviewURLNeedsTheCapability(t *testing.T) {
	h := startHost(t, "preview")
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" && k != "local" {
		t.Skipf("the %s runtime exposes ports (tested elsewhere)", k)
	}
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, time.Minute)
	_, err := s.PreviewURL(ctx, 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = s.PreviewURL(ctx, 8080)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	assert.Contains(t, err.Error(), "cannot expose ports")
}
