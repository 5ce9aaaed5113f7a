package codehost_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/codehost"
	"github.com/sandboxcore/sandboxcore/internal/codehost/githubtest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

const token = "ghp_pr+token/with=odd-chars"

type fixture struct {
	gh   *githubtest.Server
	host *codehost.GitHub
	repo sandboxapi.RepoIdentity
	cred *sandbox.Credential
}

func newFixture(t *testing.T) *fixture {
	gh := githubtest.New(t)
	gh.AddToken(token, "alice")
	gh.AddToken("ghp_carol", "carol")
	branches := map[string]string{"main": strings.Repeat("a", 40), "agent/edits-c1": strings.Repeat("b", 40)}
	gh.AddRepo(githubtest.Repo{Owner: "acme", Name: "app", DefaultBranch: "main", Readers: []string{"alice"},
		Branch: func(b string) (string, bool) { s, ok := branches[b]; return s, ok }})
	host, err := codehost.New(codehost.Options{APIURL: gh.URL(), Hosts: []string{"git.acme.test"}})
	require.NoError(t, err)
	return &fixture{gh: gh, host: host,
		repo: sandboxapi.RepoIdentity{Host: "git.acme.test", Owner: "acme", Name: "app", URL: "https://git.acme.test/acme/app.git"},
		cred: &sandbox.Credential{Username: "x-access-token", Secret: token}}
}

func (f *fixture) req() sandbox.PullRequestRequest {
	return sandbox.PullRequestRequest{Title: "Agent change", Body: "Made by an agent.", Head: "agent/edits-c1", Base: "main",
		Draft: true, Reviewers: []string{"bob", "acme/reviewers"}, Labels: []string{"agent", "needs review"}}
}

func TestCreatePullRequestFollowsTheRESTAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	assert.Equal(t, f.gh.URL(), f.host.APIURL())
	assert.True(t, f.host.Serves(f.repo))
	assert.False(t, f.host.Serves(sandboxapi.RepoIdentity{Host: "github.com"}))

	def, err := f.host.DefaultBranch(ctx, f.repo, f.cred)
	require.NoError(t, err)
	assert.Equal(t, "main", def)

	pr, err := f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.NoError(t, err)
	assert.Equal(t, 1, pr.Number)
	assert.Equal(t, f.gh.WebURL()+"/acme/app/pull/1", pr.URL)
	assert.Equal(t, "open", pr.State)
	assert.True(t, pr.Draft)
	assert.True(t, pr.Created)
	assert.Equal(t, "agent/edits-c1", pr.Head)
	assert.Equal(t, "main", pr.Base)
	assert.Equal(t, strings.Repeat("b", 40), pr.HeadCommit)
	assert.Empty(t, pr.Warnings)

	held := f.gh.PullRequests("acme", "app")
	require.Len(t, held, 1)
	assert.Equal(t, []string{"bob"}, held[0].RequestedReviewers)
	assert.Equal(t, []string{"reviewers"}, held[0].RequestedTeams)
	assert.Equal(t, []string{"agent", "needs review"}, held[0].Labels)
	assert.Equal(t, "alice", held[0].Author)

	var create, reviewers, labels *githubtest.Request
	for _, r := range f.gh.Requests() {
		assert.Equal(t, token, r.Token, "%s %s: bearer token", r.Method, r.Path)
		switch r.Method + " " + r.Path {
		case "POST /repos/acme/app/pulls":
			create = &r
		case "POST /repos/acme/app/pulls/1/requested_reviewers":
			reviewers = &r
		case "POST /repos/acme/app/issues/1/labels":
			labels = &r
		}
	}
	require.NotNil(t, create)
	var body map[string]any
	require.NoError(t, json.Unmarshal(create.Body, &body))
	assert.Equal(t, map[string]any{"title": "Agent change", "body": "Made by an agent.", "head": "agent/edits-c1", "base": "main", "draft": true}, body)
	require.NotNil(t, reviewers)
	assert.JSONEq(t, `{"reviewers":["bob"],"team_reviewers":["reviewers"]}`, string(reviewers.Body))
	require.NotNil(t, labels)
	assert.JSONEq(t, `["agent","needs review"]`, string(labels.Body))
}

func TestCreatePullRequestMapsErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.NoError(t, err)

	_, err = f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "422: a pull request exists for the head")
	assert.Contains(t, err.Error(), "A pull request already exists")

	reuse := f.req()
	reuse.ReuseOpen = true
	pr, err := f.host.CreatePullRequest(ctx, f.repo, f.cred, reuse)
	require.NoError(t, err, "an activity retry reuses the open pull request")
	assert.Equal(t, 1, pr.Number)
	assert.False(t, pr.Created)

	bad := f.req()
	bad.Base = "nope"
	_, err = f.host.CreatePullRequest(ctx, f.repo, f.cred, bad)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "422: invalid base")
	assert.Contains(t, err.Error(), "base")

	wrong := &sandbox.Credential{Username: "x-access-token", Secret: token + "-revoked"}
	_, err = f.host.CreatePullRequest(ctx, f.repo, wrong, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, "401")
	for _, form := range []string{wrong.Secret, url.QueryEscape(wrong.Secret), token} {
		assert.NotContains(t, err.Error(), form)
	}
	_, err = f.host.CreatePullRequest(ctx, f.repo, nil, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, "no credential")

	_, err = f.host.CreatePullRequest(ctx, f.repo, &sandbox.Credential{Secret: "ghp_carol"}, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "404: a private repository the token cannot see")

	_, err = f.host.CreatePullRequest(ctx, sandboxapi.RepoIdentity{Host: "elsewhere.test", Owner: "a", Name: "b"}, f.cred, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "a host this code host does not serve")

	self := f.req()
	self.Head, self.Reviewers, self.Labels = "agent/edits-c1", []string{"alice"}, nil
	self.Base = "main"
	f.gh.AddRepo(githubtest.Repo{Owner: "acme", Name: "app2", DefaultBranch: "main",
		Branch: func(b string) (string, bool) { return map[string]string{"main": "a", "agent/edits-c1": "b"}[b], true }})
	r2 := f.repo
	r2.Name = "app2"
	pr, err = f.host.CreatePullRequest(ctx, r2, f.cred, self)
	require.NoError(t, err, "a failed follow-up step does not fail the call")
	require.Len(t, pr.Warnings, 1)
	assert.Contains(t, pr.Warnings[0], "Review cannot be requested from pull request author")

	_, err = f.host.CreatePullRequest(ctx, f.repo, f.cred, sandbox.PullRequestRequest{Head: "agent/edits-c1", Base: "main"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a title is required")
}

func TestRateLimitsAreRetryableUntilTheReset(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	reset := time.Now().Add(90 * time.Second).Truncate(time.Second)
	f.gh.RateLimitNext(1, reset)
	_, err := f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	wait, ok := sandbox.RetryAfter(err)
	require.True(t, ok)
	assert.InDelta(t, time.Until(reset).Seconds(), wait.Seconds(), 3, "the delay runs to X-RateLimit-Reset")
	assert.True(t, sandboxapi.ErrRateLimited.Retryable)

	f.gh.SecondaryRateLimitNext(1, 7*time.Second)
	_, err = f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.ErrorIs(t, err, sandboxapi.ErrRateLimited)
	wait, ok = sandbox.RetryAfter(err)
	require.True(t, ok)
	assert.Equal(t, 7*time.Second, wait, "Retry-After of a secondary rate limit")

	pr, err := f.host.CreatePullRequest(ctx, f.repo, f.cred, f.req())
	require.NoError(t, err, "after the limits the call goes through")
	assert.Equal(t, 1, pr.Number)
}

func TestAPIBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 codehost.DefaultAPIURL,
		"https://ghe.example.com":          "https://ghe.example.com/api/v3/",
		"https://ghe.example.com/api/v3":   "https://ghe.example.com/api/v3/",
		"https://api.ghe.example.com":      "https://api.ghe.example.com/",
		"http://127.0.0.1:9999/api/v3/":    "http://127.0.0.1:9999/api/v3/",
		"https://ghe.example.com/proxied/": "https://ghe.example.com/proxied/api/v3/",
	} {
		got, err := codehost.APIBaseURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"ftp://x", "https://user:pw@ghe.example.com", "ghe.example.com", "https://ghe.example.com/?x=1"} {
		_, err := codehost.APIBaseURL(bad)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, bad)
	}
	h, err := codehost.New(codehost.Options{APIURL: "https://ghe.example.com"})
	require.NoError(t, err)
	assert.True(t, h.Serves(sandboxapi.RepoIdentity{Host: "ghe.example.com"}), "an Enterprise API serves its own host by default")
	h, err = codehost.New(codehost.Options{})
	require.NoError(t, err)
	assert.True(t, h.Serves(sandboxapi.RepoIdentity{Host: "github.com"}))
}
