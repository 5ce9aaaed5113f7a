package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxcore/sandboxcore/internal/codehost/githubtest"
	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// pushEnv is a worker host wired exactly as in production (credentials
// directory → … → GITHUB_TOKEN chain, gitx remote, access checks, the GitHub
// code host) against a smart-HTTP git server with basic auth and a GitHub API
// fake, with every log line of the host captured.
type pushEnv struct {
	srv      *gittest.Server
	gh       *githubtest.Server
	upstream string
	url      string
	repo     sandboxapi.RepoIdentity
	token    string
	credDir  string
	host     *hostworker.Host
	client   *sandboxclient.Client
	logs     *lockedBuffer
}

// newPushEnv starts it. The token holds characters that URL-encode
// differently, so every spelling of it is distinct.
func newPushEnv(t *testing.T, name string, opts ...hostOption) *pushEnv {
	t.Helper()
	e := &pushEnv{token: "ghp_S3cr+t/" + uniq(t, "tok") + "=", logs: &lockedBuffer{}}
	e.srv = gittest.NewHTTPServer(t, t.TempDir(), "x-access-token", e.token)
	e.upstream = gittest.InitRepo(t, e.srv.RepoDir("acme/app.git"), "trunk")
	e.url = e.srv.URL("acme/app.git")
	var err error
	e.repo, err = sandboxapi.ParseRepoURL(e.url, sandboxapi.URLPolicy{AllowHTTP: true})
	require.NoError(t, err)

	e.gh = githubtest.New(t)
	e.gh.AddRepo(githubtest.Repo{Owner: "acme", Name: "app", DefaultBranch: "trunk", Branch: func(b string) (string, bool) {
		sha, err := gittest.TryGit(e.upstream, "rev-parse", "--verify", "--quiet", "refs/heads/"+b)
		return sha, err == nil && sha != ""
	}})
	e.gh.AddToken(e.token, "alice-gh")
	e.credDir = t.TempDir()

	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hc, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(logger)})
	require.NoError(t, err)
	t.Cleanup(hc.Close)
	cfg := baseConfig(t, name)
	cfg.FetchFreshness = -1 // every acquire that reaches the cache fetches
	cfg.Auth.CredentialsDir = e.credDir
	cfg.Auth.GitHubAPIURL = e.gh.URL()
	cfg.Auth.GitHubHost = e.repo.Host
	for _, o := range opts {
		o(&cfg)
	}
	e.host, err = hostworker.Start(context.Background(), cfg, hostworker.Options{Client: hc, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(e.host.Stop)
	e.client = sandboxclient.New(hc, sandboxclient.Options{TaskQueue: cfg.TaskQueue})
	return e
}

// setCredential writes user's credentials file (as an operator would, out of band).
func (e *pushEnv) setCredential(t *testing.T, user, secret string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{e.repo.Host: map[string]string{"username": "x-access-token", "secret": secret}})
	require.NoError(t, err)
	tmp := filepath.Join(e.credDir, "."+user+".tmp")
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(e.credDir, user+".json")))
}

// forms are every spelling of a secret that must never leak: raw,
// URL-encoded (query and path), base64 of the basic-auth pairs, and base64
// of the token alone (how a []byte field carries it in JSON).
func forms(secret string, users ...string) []string {
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), base64.StdEncoding.EncodeToString([]byte(secret))}
	for _, u := range append([]string{"x-access-token"}, users...) {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(u+":"+secret)))
	}
	return out
}

func findLeak(data []byte, forms []string) string {
	for _, f := range forms {
		if bytes.Contains(data, []byte(f)) {
			return f
		}
	}
	return ""
}

// cmdlineSampler reads every process's command line in a loop while
// operations run, recording any that holds a secret, and the git processes
// talking to the test server (so a pass proves it saw them).
type cmdlineSampler struct {
	forms  []string
	needle string
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	leaks   []string
	gitSeen map[string]bool
	samples int
}

func startSampler(forms []string, needle string) *cmdlineSampler {
	s := &cmdlineSampler{forms: forms, needle: needle, stop: make(chan struct{}), done: make(chan struct{}), gitSeen: map[string]bool{}}
	self := fmt.Sprint(os.Getpid())
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			entries, _ := os.ReadDir("/proc")
			for _, ent := range entries {
				if ent.Name()[0] < '0' || ent.Name()[0] > '9' || ent.Name() == self {
					continue
				}
				raw, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
				if err != nil || len(raw) == 0 {
					continue
				}
				s.mu.Lock()
				if f := findLeak(raw, s.forms); f != "" {
					s.leaks = append(s.leaks, strings.ReplaceAll(string(raw), "\x00", " "))
				}
				line := strings.ReplaceAll(string(raw), "\x00", " ")
				if strings.Contains(line, "git") && strings.Contains(line, s.needle) {
					for _, op := range []string{"ls-remote", "fetch", "push", "clone"} {
						if strings.Contains(line, " "+op+" ") {
							s.gitSeen[op] = true
						}
					}
				}
				s.mu.Unlock()
			}
			s.mu.Lock()
			s.samples++
			s.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return s
}

func (s *cmdlineSampler) finish() ([]string, map[string]bool, int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaks, s.gitSeen, s.samples
}

// gitProcesses lists running git processes whose command line names needle.
func gitProcesses(needle string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		raw, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.Contains(line, "git") && strings.Contains(line, needle) {
			out = append(out, ent.Name()+": "+line)
		}
	}
	return out
}

// sessionHistories returns every event of every run of a workflow, newest
// run first, walking the continue-as-new chain back from the latest run.
func sessionHistories(t *testing.T, wfID string) [][]byte {
	t.Helper()
	var out [][]byte
	runID := ""
	for range 50 {
		iter := tc.GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		prev := ""
		first := true
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			b, err := proto.Marshal(ev)
			require.NoError(t, err)
			out = append(out, b)
			if first {
				prev = ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
				first = false
			}
		}
		if prev == "" {
			return out
		}
		runID = prev
	}
	t.Fatalf("more than 50 runs of %s", wfID)
	return nil
}

func TestPushAndPullRequestKeepTheTokenSecret(t *testing.T) {
	e := newPushEnv(t, "push")
	bin := buildCLI(t)
	ctx := ctxFor(t, 4*time.Minute)
	user := uniq(t, "alice")
	e.setCredential(t, user, e.token)
	secretForms := forms(e.token, user)
	// Every git request now takes a while, so the sampler sees each git process.
	e.srv.SetDelay(150 * time.Millisecond)
	sampler := startSampler(secretForms, e.srv.BaseURL()[len("http://"):])
	var errs []error

	// Clone (first acquire) and fetch (second conversation, FetchFreshness < 0).
	s, hd, err := e.client.Acquire(ctx, editRequest(user, "p", "c1", e.url))
	require.NoError(t, err)
	gittest.Commit(t, e.upstream, "NEWS.md", "upstream moved\n", "upstream change")
	s2, hd2, err := e.client.Acquire(ctx, editRequest(user, "p", "c2", e.url))
	require.NoError(t, err)
	assert.Equal(t, gittest.Git(t, e.upstream, "rev-parse", "trunk"), hd2.BaseCommit, "the second acquire fetched")

	// A pull request before the branch is pushed: "push first".
	require.NoError(t, s.WriteFile(ctx, "agent.txt", []byte("from the agent\n"), 0))
	c1, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: add agent.txt"})
	require.NoError(t, err)
	_, err = s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "too early"})
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), "push first")
	errs = append(errs, err)

	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.UnpushedCommits)

	// Push: a new remote branch, the commit recorded as pushed.
	pushed, err := s.Push(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushResult{Branch: hd.Branch, Commit: c1.Commit, Status: sandboxapi.PushCreated}, pushed)
	assert.Equal(t, c1.Commit, gittest.Git(t, e.upstream, "rev-parse", "refs/heads/"+hd.Branch))
	bare := findBare(t, e.host.Config.DataDir)
	require.Len(t, bare, 1)
	assert.Equal(t, c1.Commit, gittest.Git(t, bare[0], "rev-parse", sandbox.PushedRef(hd.WorkspaceID)), "push recorded")
	st, err = s.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, st.UnpushedCommits, "unpushed state cleared")
	assert.Equal(t, 1, st.CommitsSinceBase)

	// The pull request: base defaults to the default branch, head is the workspace branch.
	pr, err := s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "Agent: add agent.txt", Body: "Generated.",
		Draft: true, Reviewers: []string{"bob"}, Labels: []string{"agent"}})
	require.NoError(t, err)
	assert.Equal(t, 1, pr.Number)
	assert.Equal(t, e.gh.WebURL()+"/acme/app/pull/1", pr.URL)
	assert.Equal(t, "open", pr.State)
	assert.True(t, pr.Draft)
	assert.Equal(t, "trunk", pr.Base)
	assert.Equal(t, hd.Branch, pr.Head)
	assert.Equal(t, c1.Commit, pr.HeadCommit)
	assert.Empty(t, pr.Warnings)
	held := e.gh.PullRequests("acme", "app")
	require.Len(t, held, 1)
	assert.Equal(t, "Generated.", held[0].Body)
	assert.Equal(t, []string{"bob"}, held[0].RequestedReviewers)
	assert.Equal(t, []string{"agent"}, held[0].Labels)
	var sawCreate bool
	for _, r := range e.gh.Requests() {
		assert.Equal(t, e.token, r.Token, "the user's own token authenticated %s %s", r.Method, r.Path)
		if r.Method == "POST" && r.Path == "/repos/acme/app/pulls" {
			sawCreate = true
			assert.JSONEq(t, `{"title":"Agent: add agent.txt","head":"`+hd.Branch+`","base":"trunk","body":"Generated.","draft":true}`, string(r.Body))
		}
	}
	assert.True(t, sawCreate)

	// The same pull request again: GitHub's 422 "already exists" → SandboxConflict.
	_, err = s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "again"})
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	errs = append(errs, err)

	// The CLI: another commit, `sandboxctl push`, then `sandboxctl pr create` from the other workspace.
	require.NoError(t, s.WriteFile(ctx, "agent.txt", []byte("second\n"), 0))
	c2, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: second"})
	require.NoError(t, err)
	r := runCLI(t, bin, e.host.Config.TaskQueue, "", "push", hd.WorkspaceID, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var viaCLI sandboxapi.PushResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &viaCLI))
	assert.Equal(t, sandboxapi.PushResult{Branch: hd.Branch, Commit: c2.Commit, PreviousRemoteCommit: c1.Commit, Status: sandboxapi.PushFastForward}, viaCLI)
	require.NoError(t, s2.WriteFile(ctx, "other.txt", []byte("c2\n"), 0))
	_, err = s2.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: other"})
	require.NoError(t, err)
	r = runCLI(t, bin, e.host.Config.TaskQueue, "", "push", hd2.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "new remote branch "+hd2.Branch)
	r = runCLI(t, bin, e.host.Config.TaskQueue, "", "pr", "create", hd2.WorkspaceID, "--title", "From the CLI", "--body", "b", "--draft",
		"--base", "trunk", "--reviewer", "carol", "--label", "x", "--label", "y")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "opened pull request #2 (draft): "+hd2.Branch+" → trunk")
	held = e.gh.PullRequests("acme", "app")
	require.Len(t, held, 2)
	assert.Equal(t, []string{"x", "y"}, held[1].Labels)
	assert.Equal(t, []string{"carol"}, held[1].RequestedReviewers)
	r = runCLI(t, bin, e.host.Config.TaskQueue, "", "push", hd2.WorkspaceID, "--force-with-lease")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "up to date")

	leaks, seen, samples := sampler.finish()
	e.srv.SetDelay(0)

	// 1. Process command lines while everything ran.
	assert.Empty(t, leaks, "command lines holding the token")
	assert.Greater(t, samples, 20)
	for _, op := range []string{"ls-remote", "fetch", "push"} {
		assert.True(t, seen[op], "the sampler saw a git %s to the server (saw %v)", op, seen)
	}
	// 2. Every file under the data dir: the cache's and the worktrees' configs, the store, markers.
	_ = filepath.WalkDir(e.host.Config.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil {
			assert.Empty(t, findLeak(data, secretForms), "file %s holds the token", p)
		}
		return nil
	})
	for _, wt := range []string{hd.LocalPath, hd2.LocalPath} {
		// 3. git remote -v and the effective config, as an agent in the worktree sees them.
		remotes := gittest.Git(t, wt, "remote", "-v")
		assert.Empty(t, findLeak([]byte(remotes), secretForms), "git remote -v")
		for _, line := range strings.Split(remotes, "\n") {
			assert.Contains(t, line, e.url, "the remote URL carries no credential")
			assert.NotContains(t, line, "@", "no userinfo in the remote URL")
		}
		cfg := gittest.Git(t, wt, "config", "--list", "--show-origin")
		assert.Empty(t, findLeak([]byte(cfg), secretForms), "worktree config")
		assert.NotContains(t, strings.ToLower(cfg), "extraheader")
	}
	// 4. The worker's log output.
	logs := e.logs.String()
	assert.Contains(t, logs, `"msg":"pushed"`)
	assert.Contains(t, logs, `"msg":"pull request"`)
	assert.Empty(t, findLeak([]byte(logs), secretForms), "the worker log holds the token")
	// 5. Returned errors.
	for _, err := range errs {
		assert.Empty(t, findLeak([]byte(err.Error()), secretForms), "error %v", err)
	}
	// 6. Every event of every run of both sessions.
	events := 0
	for _, wf := range []string{hd.WorkflowID, hd2.WorkflowID} {
		for _, ev := range sessionHistories(t, wf) {
			events++
			assert.Empty(t, findLeak(ev, secretForms), "a history event of %s holds the token", wf)
		}
	}
	assert.Greater(t, events, 30)
}

func TestCredentialRefusalsAreFastTypedAndLeaveNoGit(t *testing.T) {
	e := newPushEnv(t, "refuse", func(c *hostworker.Config) { c.FetchFreshness = time.Hour })
	ctx := ctxFor(t, 3*time.Minute)
	alice, bob, carol := uniq(t, "alice"), uniq(t, "bob"), uniq(t, "carol")
	wrong := e.token[:len(e.token)-1] + "X"
	e.setCredential(t, alice, e.token)
	e.setCredential(t, bob, wrong)
	secretForms := append(forms(e.token, alice, bob), forms(wrong, bob)...)
	serverAddr := e.srv.BaseURL()[len("http://"):]
	var errs []error

	expectAuthFailed := func(name string, op func() error) {
		t.Helper()
		start := time.Now()
		err := op()
		require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, name)
		assert.Less(t, time.Since(start), 15*time.Second, "%s: refused within seconds, no prompt", name)
		assert.Empty(t, gitProcesses(serverAddr), "%s: no git process left behind", name)
		errs = append(errs, err)
	}

	// Nothing cached yet: a wrong token and no token fail the clone.
	expectAuthFailed("wrong token, clone", func() error {
		_, _, err := e.client.Acquire(ctx, editRequest(bob, "p", "cb", e.url))
		return err
	})
	expectAuthFailed("no token, clone", func() error {
		_, _, err := e.client.Acquire(ctx, editRequest(carol, "p", "cc", e.url))
		return err
	})

	// Alice clones; the cache is fresh for an hour, so nothing needs fetching.
	s, _, err := e.client.Acquire(ctx, editRequest(alice, "p", "c", e.url))
	require.NoError(t, err)
	uploads := e.srv.UploadPackRequests()
	_, _, err = e.client.Acquire(ctx, editRequest(alice, "p", "c2", e.url))
	require.NoError(t, err)
	assert.Equal(t, uploads, e.srv.UploadPackRequests(), "alice's access check is remembered briefly: no request")

	// The cached content is still refused to tokens that cannot read the repository.
	expectAuthFailed("wrong token, cached repository", func() error {
		_, _, err := e.client.Acquire(ctx, editRequest(bob, "p", "cb", e.url))
		return err
	})
	expectAuthFailed("no token, cached repository", func() error {
		_, _, err := e.client.Acquire(ctx, editRequest(carol, "p", "cc", e.url))
		return err
	})

	// Bob's token is fixed out of band: picked up without a restart.
	e.setCredential(t, bob, e.token)
	_, _, err = e.client.Acquire(ctx, editRequest(bob, "p", "cb", e.url))
	require.NoError(t, err)

	// Alice's token is revoked: her push and her next acquire are refused.
	require.NoError(t, s.WriteFile(ctx, "a.txt", []byte("a\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "a"})
	require.NoError(t, err)
	e.setCredential(t, alice, wrong)
	expectAuthFailed("wrong token, push", func() error {
		_, err := s.Push(ctx, false)
		return err
	})
	expectAuthFailed("wrong token, pull request", func() error {
		_, err := s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "t"})
		return err
	})
	_, err = s.Release(ctx, false)
	require.NoError(t, err)
	expectAuthFailed("wrong token, existing workspace", func() error {
		_, _, err := e.client.Acquire(ctx, editRequest(alice, "p", "c", e.url))
		return err
	})
	assert.Zero(t, e.srv.ReceivePackRequests(), "nothing was pushed")
	for _, err := range errs {
		assert.Empty(t, findLeak([]byte(err.Error()), secretForms), "error %v", err)
	}
	assert.Empty(t, findLeak([]byte(e.logs.String()), secretForms), "the worker log")
}

func TestPullRequestWaitsForTheRateLimitReset(t *testing.T) {
	e := newPushEnv(t, "ratelimit")
	ctx := ctxFor(t, 3*time.Minute)
	user := uniq(t, "alice")
	e.setCredential(t, user, e.token)
	s, _, err := e.client.Acquire(ctx, editRequest(user, "p", "c", e.url))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "a.txt", []byte("a\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "a"})
	require.NoError(t, err)
	_, err = s.Push(ctx, false)
	require.NoError(t, err)

	// A reset far away fails at once with the retryable type's name.
	e.gh.RateLimitNext(1, time.Now().Add(time.Hour))
	_, err = s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "t"})
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	assert.Contains(t, err.Error(), "resets at")

	// A reset two seconds away is waited for: Temporal retries right after it.
	reset := time.Now().Add(2 * time.Second).Truncate(time.Second)
	e.gh.RateLimitNext(1, reset)
	start := time.Now()
	pr, err := s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "t"})
	require.NoError(t, err)
	assert.Equal(t, 1, pr.Number)
	assert.False(t, time.Now().Before(reset), "the retry came after the reset (took %s)", time.Since(start))
	assert.Less(t, time.Since(start), 30*time.Second)
	var statuses []int
	for _, r := range e.gh.Requests() {
		if r.Method == "POST" && r.Path == "/repos/acme/app/pulls" {
			statuses = append(statuses, r.Status)
		}
	}
	assert.Equal(t, []int{403, 403, 201}, statuses)
}
