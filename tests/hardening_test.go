package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// End to end: hostile input and git hardening through the real
// service (embedded Temporal, a worker host, real git). docs/SECURITY.md
// describes the threat model these tests check.

// lockedBuffer is an io.Writer safe for the concurrent writes of a logger.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLoggedHost is startHost with the worker's log (debug level) captured.
func startLoggedHost(t *testing.T, name string, logs io.Writer, opts ...hostOption) *testHost {
	t.Helper()
	cfg := baseConfig(t, name)
	for _, o := range opts {
		o(&cfg)
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: tc, Credentials: creds, Logger: log})
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	return &testHost{Host: h, client: sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfg.TaskQueue})}
}

// localRuntime makes the host run commands as plain host subprocesses: the
// agent can then write anything the worker can (the repo cache's config and
// hooks included), the worst case for host-side git.
func localRuntime(c *hostworker.Config) { c.RuntimeProvider = "local" }

// alwaysFetch makes every acquire fetch (no freshness window).
func alwaysFetch(c *hostworker.Config) { c.FetchFreshness = time.Nanosecond }

// TestHardeningHostileConfigThroughTheService: an agent (local runtime, so it
// can write the shared repo cache) sets every kind of config that makes git
// run a program — fsmonitor, hooksPath, hooks dropped into the cache, filter,
// diff and merge drivers, external diff, pager, ssh command, credential
// helper — plus .gitattributes using them and a url.insteadOf redirect. The
// next host-side calls on that workspace, on another workspace of the same
// repository, and a new worktree of it run none of it, and the next fetch
// still reads the real upstream.
func TestHardeningHostileConfigThroughTheService(t *testing.T) {
	h := startHost(t, "hostilecfg", localRuntime, alwaysFetch)
	upstream := gittest.NewRepo(t, "trunk")
	evilUp := gittest.InitRepo(t, filepath.Join(t.TempDir(), "evil", "team", "project"), "evilbranch")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")
	sA, hA, err := h.client.Acquire(ctx, editRequest(user, "p", "a", url))
	require.NoError(t, err)
	sB, _, err := h.client.Acquire(ctx, editRequest(user, "p", "b", url))
	require.NoError(t, err)

	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	evil := filepath.Join(dir, "evil.sh")
	require.NoError(t, os.WriteFile(evil, []byte("#!/bin/sh\necho \"ran $0 $*\" >> "+marker+"\ncase \"$1\" in clean|smudge) exec cat;; esac\nexit 1\n"), 0o755))
	script := `set -e
common=$(git rev-parse --path-format=absolute --git-common-dir)
mkdir -p "$common/hooks"
for h in post-checkout reference-transaction pre-commit post-commit post-index-change commit-msg; do cp "$EVIL" "$common/hooks/$h"; done
git config core.fsmonitor "$EVIL"
git config core.hooksPath "$(dirname "$EVIL")"
git config filter.evil.clean "$EVIL clean"
git config filter.evil.smudge "$EVIL smudge"
git config filter.evil.required true
git config diff.evil.textconv "$EVIL"
git config diff.evil.command "$EVIL"
git config diff.external "$EVIL"
git config merge.evil.driver "$EVIL"
git config core.pager "$EVIL"
git config core.sshCommand "$EVIL"
git config credential.helper "!$EVIL"
git config "url.$EVILURL.insteadOf" "$URL"
printf '* filter=evil diff=evil merge=evil\n' > .gitattributes
echo hello > x.txt
`
	res, err := sA.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script},
		Env: map[string]string{"EVIL": evil, "EVILURL": gittest.FileURL(evilUp), "URL": url}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	_ = os.Remove(marker) // only host-side runs count from here

	_, err = sA.Status(ctx)
	require.NoError(t, err)
	d, err := sA.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d.Patch, "+hello")
	c, err := sA.Commit(ctx, sandboxapi.CommitRequest{Message: "agent work"})
	require.NoError(t, err)
	_, err = sB.Status(ctx)
	require.NoError(t, err)
	_, err = sB.Diff(ctx)
	require.NoError(t, err)
	require.NoError(t, sB.WriteFile(ctx, "y.txt", []byte("y\n"), 0))
	_, err = sB.Commit(ctx, sandboxapi.CommitRequest{Message: "b work"})
	require.NoError(t, err)

	// A new worktree of the same repository (fetch, worktree add: checkout
	// with smudge and post-checkout), starting from the agent's branch.
	next := gittest.Commit(t, upstream, "later.txt", "later\n", "later")
	task := sandboxapi.WorkspaceRequest{UserID: user, ProjectID: "p", RepoURL: url, Mode: sandboxapi.ModeTask, TaskID: "t", FromBranch: hA.Branch}
	sC, _, err := h.client.Acquire(ctx, task)
	require.NoError(t, err)
	got, err := sC.ReadFile(ctx, "x.txt")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(got), "no smudge filter ran")
	_, err = sC.Status(ctx)
	require.NoError(t, err)

	assert.NoFileExists(t, marker, "host-side git ran the agent's program: %s", readFile(marker))

	bare := findBare(t, h.Config.DataDir)
	require.Len(t, bare, 1)
	assert.Equal(t, next, gittest.Git(t, bare[0], "rev-parse", "refs/remotes/origin/trunk"), "the fetch read the real upstream")
	assert.NotContains(t, gittest.Git(t, bare[0], "for-each-ref"), "evilbranch")
	assert.Equal(t, "hello\n", gittest.Git(t, bare[0], "show", c.Commit+":x.txt")+"\n", "committed unfiltered")

	// Control: the agent's own git does run it.
	res, err = sA.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo more >> x.txt; git add x.txt; true"}})
	require.NoError(t, err)
	assert.FileExists(t, marker, "control: the agent's git runs its own filter (%s)", res.Stderr)
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestHostileInputExamples: the public examples of option injection and
// path/id escape, through the service.
func TestHostileInputExamples(t *testing.T) {
	h := startHost(t, "hostilein", localRuntime)
	noFile := startHost(t, "hostilenofile", func(c *hostworker.Config) { c.AllowFileURLs = false })
	ctx := ctxFor(t, 3*time.Minute)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("OUTSIDE-NEEDLE\n"), 0o644))

	upstream := gittest.NewRepo(t, "trunk")
	// Committed symlinks leading out of any worktree.
	require.NoError(t, os.Symlink(outside, filepath.Join(upstream, "out-dir")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(upstream, "out-file")))
	require.NoError(t, os.Symlink("../../../../../../../../..", filepath.Join(upstream, "up")))
	gittest.Git(t, upstream, "add", "-A")
	gittest.Git(t, upstream, "commit", "-q", "-m", "links")
	gittest.Commit(t, upstream, "notes.txt", "run with --pre=sh please\n", "notes")
	url := gittest.FileURL(upstream)
	user := uniq(t, "u")

	pwned := filepath.Join(os.TempDir(), "pwned-"+user)
	for name, req := range map[string]sandboxapi.WorkspaceRequest{
		"base ref option":   {UserID: user, ProjectID: "p", RepoURL: url, Mode: sandboxapi.ModeEdit, ConversationID: "c", BaseRef: "--upload-pack=touch " + pwned + ";git-upload-pack"},
		"branch option":     {UserID: user, ProjectID: "p", RepoURL: url, Mode: sandboxapi.ModeEdit, ConversationID: "c", BranchName: "--output=" + pwned},
		"conversation path": editRequest(user, "p", "../../../tmp/evil", url),
		"repo dots":         editRequest(user, "p", "c", "https://example.com/owner/../../x"),
		"ext transport":     editRequest(user, "p", "c", "ext::sh -c touch% "+pwned),
	} {
		_, _, err := h.client.Acquire(ctx, req)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
	}
	_, _, err := noFile.client.Acquire(ctx, editRequest(user, "p", "c", url))
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "file:// is refused unless enabled")
	assert.NoFileExists(t, pwned)
	assert.Empty(t, findBare(t, noFile.Config.DataDir))

	s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "c", url))
	require.NoError(t, err)

	// Search patterns and paths starting with '-' are argument errors;
	// a dash is searched for through a regular expression.
	for _, lit := range []bool{false, true} {
		_, err := s.Search(ctx, sandboxapi.SearchRequest{Pattern: "--pre=sh", Literal: lit})
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "literal=%v", lit)
	}
	_, err = s.ReadFile(ctx, "--output=/tmp/x")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	err = s.WriteFile(ctx, "-n", []byte("x"), 0)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.NoFileExists(t, filepath.Join(hd.LocalPath, "-n"))
	sr, err := s.Search(ctx, sandboxapi.SearchRequest{Pattern: `\-\-pre=sh`})
	require.NoError(t, err)
	require.Len(t, sr.Matches, 1)
	assert.Equal(t, "notes.txt", sr.Matches[0].Path)

	// Agent-made links too.
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "ln -s " + outside + " agent-dir && ln -s /etc/passwd agent-file"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)

	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "out-file", "out-dir/secret.txt", "up/etc/passwd", "agent-file", "agent-dir/secret.txt"} {
		_, err := s.ReadFile(ctx, p)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "read %s", p)
	}
	for _, p := range []string{"/tmp/x", "../x", "out-dir/new.txt", "out-dir/sub/new.txt", "up/tmp/new.txt", "agent-dir/new.txt", "out-file", "agent-file"} {
		assert.ErrorIs(t, s.WriteFile(ctx, p, []byte("pwned\n"), 0), sandboxapi.ErrInvalidWorkspacePath, "write %s", p)
	}
	for _, p := range []string{"/", "..", "out-dir", "up", "agent-dir"} {
		_, err := s.ListDir(ctx, p)
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "list %s", p)
		_, err = s.Search(ctx, sandboxapi.SearchRequest{Pattern: "NEEDLE", Path: p})
		assert.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath, "search %s", p)
	}
	sr, err = s.Search(ctx, sandboxapi.SearchRequest{Pattern: "OUTSIDE-NEEDLE|root:x:0", Path: ""})
	require.NoError(t, err)
	assert.Empty(t, sr.Matches, "search does not follow links out of the worktree")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing was created outside")

	// Links are committed as links (mode 120000, the blob is the link text).
	cm, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "links"})
	require.NoError(t, err)
	bare := findBare(t, h.Config.DataDir)
	require.Len(t, bare, 1)
	tree := gittest.Git(t, bare[0], "ls-tree", "--full-tree", cm.Commit)
	for name, target := range map[string]string{"agent-dir": outside, "agent-file": "/etc/passwd", "out-dir": outside} {
		line := ""
		for _, l := range strings.Split(tree, "\n") {
			if strings.HasSuffix(l, "\t"+name) {
				line = l
			}
		}
		require.NotEmpty(t, line, name)
		f := strings.Fields(line)
		assert.Equal(t, "120000", f[0], name)
		assert.Equal(t, target, gittest.Git(t, bare[0], "cat-file", "-p", f[2]), name)
	}
	assert.NotContains(t, tree, "secret.txt")
	assert.DirExists(t, hd.LocalPath)
}

// TestHardeningCredentialsUnderFailure: a wrong token, a missing repository,
// an unreachable host and no token at all each give a typed error within
// seconds, without a prompt or a leftover git process, and the token appears
// in no error, log line or workflow history.
func TestHardeningCredentialsUnderFailure(t *testing.T) {
	logs := &lockedBuffer{}
	h := startLoggedHost(t, "credfail", logs)
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "u")

	newServer := func(token string) (*gittest.Server, string) {
		srv := gittest.NewHTTPServer(t, t.TempDir(), "agent", "the-right-token-"+user)
		gittest.InitRepo(t, srv.RepoDir("team/project.git"), "trunk")
		if token != "" {
			id, err := sandboxapi.ParseRepoURL(srv.URL("team/project.git"), sandboxapi.URLPolicy{AllowHTTP: true})
			require.NoError(t, err)
			creds.set(id.Host, sandbox.Credential{Username: "agent", Secret: token})
		}
		return srv, srv.URL("team/project.git")
	}
	closedPort := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())
		return port
	}

	wrongToken := "wrong-token-" + user
	_, wrongURL := newServer(wrongToken)
	rightToken := "the-right-token-" + user
	srv404, _ := newServer(rightToken)
	missingURL := srv404.URL("team/missing.git")
	_, noTokenURL := newServer("")
	unreachableURL := fmt.Sprintf("http://127.0.0.1:%d/team/project.git", closedPort())
	unreachableToken := "unreachable-token-" + user
	id, err := sandboxapi.ParseRepoURL(unreachableURL, sandboxapi.URLPolicy{AllowHTTP: true})
	require.NoError(t, err)
	creds.set(id.Host, sandbox.Credential{Username: "agent", Secret: unreachableToken})

	secrets := []string{wrongToken, rightToken, unreachableToken}
	for i, c := range []struct {
		name string
		url  string
		want *sandboxapi.Kind
	}{
		{"wrong token", wrongURL, sandboxapi.ErrRepoAuthFailed},
		{"missing repository", missingURL, sandboxapi.ErrRepoNotFound},
		{"unreachable host", unreachableURL, sandboxapi.ErrRepoCacheUnavailable},
		{"no token", noTokenURL, sandboxapi.ErrRepoAuthFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := editRequest(user, "p", fmt.Sprintf("c%d", i), c.url)
			start := time.Now()
			_, _, err := h.client.Acquire(ctx, req)
			took := time.Since(start)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want)
			assert.Less(t, took, 20*time.Second, "typed error within seconds (no prompt)")
			for _, s := range secrets {
				assert.NotContains(t, err.Error(), s)
			}
			assertNoProcessMentions(t, strings.TrimPrefix(c.url, "http://"))

			wfID, err := sandboxapi.SessionWorkflowID(sandboxapi.WorkspaceIDForKey(req.Key()))
			require.NoError(t, err)
			hist := historyBytes(t, wfID)
			for _, s := range secrets {
				for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte("agent:" + s))} {
					assert.False(t, bytes.Contains(hist, []byte(form)), "a credential is in the workflow history of %s", wfID)
				}
			}
		})
	}
	out := logs.String()
	require.NotEmpty(t, out)
	for _, s := range secrets {
		assert.NotContains(t, out, s, "a credential is in the worker's log")
		assert.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte("agent:"+s)))
	}
	assert.Empty(t, findBare(t, h.Config.DataDir), "nothing left at a final path")
}

// assertNoProcessMentions fails when a process still mentions pattern in its
// command line a moment after the call returned (a leftover git).
func assertNoProcessMentions(t *testing.T, pattern string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		out, err := exec.Command("pgrep", "-af", pattern).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return // no process
		}
		if err != nil && !errors.As(err, &ee) {
			t.Skipf("pgrep unavailable: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("leftover processes mention %q:\n%s", pattern, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// historyBytes returns the serialized events of every run of a workflow.
func historyBytes(t *testing.T, wfID string) []byte {
	t.Helper()
	var all []byte
	it := tc.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		all = append(all, b...)
		all = append(all, []byte(ev.String())...)
	}
	return all
}

// TestHardeningConcurrentAcquires: eight acquires of different conversations
// at once on a cold cache make one clone and eight worktrees, each agent
// branch checked out in exactly one, and no branch.* config; two acquires of
// the same conversation at once make one workspace; an acquire while the
// cache's config.lock is held by someone else succeeds once it is released.
func TestHardeningConcurrentAcquires(t *testing.T) {
	logs := &lockedBuffer{}
	h := startLoggedHost(t, "concurrent", logs)
	upstream := gittest.NewRepo(t, "trunk")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 4*time.Minute)
	user := uniq(t, "u")

	var wg sync.WaitGroup
	handles := make([]sandboxapi.Handle, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, handles[i], errs[i] = h.client.Acquire(ctx, editRequest(user, "p", fmt.Sprintf("conv%d", i), url))
		}()
	}
	wg.Wait()
	for i := range 8 {
		require.NoError(t, errs[i], "acquire %d", i)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "repocache: cloned"), "one clone")
	bare := findBare(t, h.Config.DataDir)
	require.Len(t, bare, 1)
	list := gittest.Git(t, bare[0], "worktree", "list", "--porcelain")
	for i := range 8 {
		branch := "branch refs/heads/" + sandboxapi.EditBranch(user, "p", fmt.Sprintf("conv%d", i))
		assert.Equal(t, 1, strings.Count(list+"\n", branch+"\n"), "%s checked out once:\n%s", branch, list)
		assert.Contains(t, list, "worktree "+handles[i].LocalPath+"\n")
	}
	assert.Equal(t, 9, strings.Count(list, "worktree "), list)
	cfg, err := os.ReadFile(filepath.Join(bare[0], "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(cfg), "[branch")

	// Two acquires of one conversation at once: one workspace.
	var same [2]sandboxapi.Handle
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, same[i], errs[i] = h.client.Acquire(ctx, editRequest(user, "p", "twice", url))
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, same[0].WorkspaceID, same[1].WorkspaceID)
	assert.Equal(t, same[0].LocalPath, same[1].LocalPath)
	list = gittest.Git(t, bare[0], "worktree", "list", "--porcelain")
	assert.Equal(t, 10, strings.Count(list, "worktree "), list)

	// The cache's config.lock held by someone else (an agent's `git config`).
	lock := filepath.Join(bare[0], "config.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	done := make(chan error, 1)
	go func() {
		_, _, err := h.client.Acquire(ctx, editRequest(user, "p", "whilelocked", url))
		done <- err
	}()
	select {
	case err := <-done: // host-side git never needs the config lock
		require.NoError(t, err)
		require.NoError(t, os.Remove(lock))
	case <-time.After(3 * time.Second):
		require.NoError(t, os.Remove(lock))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(90 * time.Second):
			t.Fatal("acquire did not succeed after the config.lock was released")
		}
	}
	staging, _ := os.ReadDir(filepath.Join(h.Config.DataDir, "repos", ".staging"))
	assert.Empty(t, staging)
}

// TestDiskQuotaThroughTheSession: on bubblewrap, a command that passes the
// runtime's disk quota (SANDBOX_RUNTIME_DISK_GB=1) is killed with the
// notice the runtime gives, through the session's exec as through the
// runtime; the next command starts unable to grow files, saying why; after
// an rm, commands write again.
func TestDiskQuotaThroughTheSession(t *testing.T) {
	h := startHost(t, "diskquota", func(c *hostworker.Config) {
		c.RuntimeResources = &sandbox.ResourceHints{DiskGB: 1}
	})
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" {
		t.Skipf("the disk quota is bubblewrap's; this host runs %s", k)
	}
	ctx := ctxFor(t, 4*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	exec := func(script string) sandboxapi.ExecResult {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: 120})
		require.NoError(t, err)
		return res
	}
	res := exec(`i=0; while [ $i -lt 32 ]; do head -c 67108864 /dev/zero > /tmp/f$i || exit 7; i=$((i+1)); done; sleep 5`)
	require.Equal(t, 137, res.ExitCode, "stderr %q", res.Stderr)
	require.Contains(t, string(res.Stderr), "sandbox: killed: the runtime's disk quota was exceeded (")
	require.Contains(t, string(res.Stderr), "of 1.00 GiB")

	res = exec("sh -c 'printf x >> /tmp/f0'; echo $?")
	require.Equal(t, "153\n", string(res.Stdout), "stderr %q", res.Stderr)
	require.Contains(t, string(res.Stderr), "sandbox: the runtime is over its disk quota (")
	require.Contains(t, string(res.Stderr), "remove files (rm works)")

	// A command started over the quota stays unable to grow files: remove
	// first, write in the next command.
	res = exec("rm /tmp/f*")
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	res = exec("printf ok > /tmp/small && cat /tmp/small")
	require.Equal(t, 0, res.ExitCode, "stderr %q", res.Stderr)
	require.Equal(t, "ok", string(res.Stdout))
	require.NotContains(t, string(res.Stderr), "quota")
}

// bigPayloads is a data converter that counts, in n, the payloads of more
// than 64 KiB converted the way only workflow code converts an exec's
// result: decoded as an exec activity's typed result (wire.ExecStartResult,
// wire.ExecActivityResult), or encoded from a sandboxapi.ExecResult (the
// update's result). Clients decode into a sandboxapi.ExecResult; activities
// encode their own types.
type bigPayloads struct {
	converter.DataConverter
	n atomic.Int64
}

func (c *bigPayloads) count(size int, v any) {
	switch v.(type) {
	case *wire.ExecStartResult, *wire.ExecActivityResult, sandboxapi.ExecResult, *sandboxapi.ExecResult:
		if size > 64<<10 {
			c.n.Add(1)
		}
	}
}

func (c *bigPayloads) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := c.DataConverter.ToPayload(v)
	c.count(len(p.GetData()), v)
	return p, err
}

func (c *bigPayloads) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	ps, err := c.DataConverter.ToPayloads(vs...)
	for i, p := range ps.GetPayloads() {
		c.count(len(p.GetData()), vs[i])
	}
	return ps, err
}

func (c *bigPayloads) FromPayload(p *commonpb.Payload, ptr any) error {
	if _, ok := ptr.(*sandboxapi.ExecResult); !ok {
		c.count(len(p.GetData()), ptr)
	}
	return c.DataConverter.FromPayload(p, ptr)
}

func (c *bigPayloads) FromPayloads(ps *commonpb.Payloads, ptrs ...any) error {
	for i, p := range ps.GetPayloads() {
		if i >= len(ptrs) {
			break
		}
		if _, ok := ptrs[i].(*sandboxapi.ExecResult); !ok {
			c.count(len(p.GetData()), ptrs[i])
		}
	}
	return c.DataConverter.FromPayloads(ps, ptrs...)
}

// TestLargeExecResultsPassThroughTheWorkflow: a command's output of
// 800 KB reaches the client byte for byte, through the fast path (the
// command ends within the start's wait) and the waiting one, while the
// worker (its workflow code and activities) never converts a payload of
// more than 64 KiB to or from a typed value: the session returns the
// activity's payload as it is.
func TestLargeExecResultsPassThroughTheWorkflow(t *testing.T) {
	counting := &bigPayloads{DataConverter: converter.GetDefaultDataConverter()}
	wc, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(quiet), DataConverter: counting})
	require.NoError(t, err)
	t.Cleanup(wc.Close)
	h := startHostWith(t, "bigexec", hostworker.Options{Client: wc})
	ctx := ctxFor(t, 3*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	// The client decodes the result with a converter of its own.
	sc := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: h.Config.TaskQueue})
	s, _, err := sc.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	wantOut := strings.Repeat("0123456789abcdef", 500_000/16)
	wantErr := strings.Repeat("err-line\n", 300_000/9)
	for _, pause := range []string{"", "sleep 1.5; "} {
		before := counting.n.Load()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", pause + "yes 0123456789abcdef | tr -d '\\n' | head -c 500000; yes err-line | head -c 299997 >&2; exit 3"},
			MaxOutputBytes: sandboxapi.MaxOutputBytesLimit})
		require.NoError(t, err)
		require.Equal(t, 3, res.ExitCode)
		require.Equal(t, len(wantOut), len(res.Stdout), "pause %q", pause)
		require.Equal(t, wantOut, string(res.Stdout))
		require.Equal(t, wantErr, string(res.Stderr))
		require.Equal(t, int64(500_000), res.StdoutBytes)
		require.False(t, res.Truncated)
		require.Equal(t, before, counting.n.Load(), "pause %q: a large payload was converted by the worker", pause)
	}
	assert.Contains(t, currentDetails(t, s.WorkflowID()), "exit 3", "the session still knows how the command ended")
	replayRuns(t, s.WorkflowID())
}
