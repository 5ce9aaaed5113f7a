// Package codehost implements sandbox.CodeHost: pull requests on GitHub and
// GitHub Enterprise Server through go-github (docs/DESIGN.md "Ports";
// the calling user's own credential, resolved per call inside
// the activity, is the API token).
//
// Error mapping: 401 → ErrRepoAuthFailed; 403 with an exhausted
// rate limit, 429, or a secondary rate limit → ErrRateLimited carrying
// sandbox.RetryAfter (time left until X-RateLimit-Reset, or Retry-After);
// other 403 → ErrRepoAuthFailed (the token lacks the permission); 404 →
// ErrNotFound; 409 → ErrConflict; 422 → ErrConflict when a pull request for
// the head already exists, else ErrInvalidArgument; 5xx and network errors →
// ErrRuntimeUnavailable (retryable). Messages carry GitHub's message, never
// the token.
package codehost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DefaultAPIURL is GitHub.com's REST API.
const DefaultAPIURL = "https://api.github.com/"

// DefaultHost is the git host GitHub.com's API serves.
const DefaultHost = "github.com"

// DefaultRequestTimeout bounds one API request when no HTTP client is given.
const DefaultRequestTimeout = 30 * time.Second

// defaultRateLimitWait is the retry delay of a secondary rate limit that
// names no Retry-After (GitHub asks for "at least one minute").
const defaultRateLimitWait = time.Minute

// APIBaseURL normalizes a REST API base URL (SANDBOX_GITHUB_API_URL): ""
// means DefaultAPIURL; a GitHub Enterprise Server URL without a path gets
// "/api/v3/" (as go-github's WithEnterpriseURLs does); the result ends in
// "/". Errors: ErrInvalidArgument for anything but an absolute http(s) URL
// without credentials, query or fragment.
func APIBaseURL(raw string) (string, error) {
	if raw == "" {
		return DefaultAPIURL, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "GitHub API URL %q: want https://host[/path]", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if !strings.HasSuffix(u.Path, "/api/v3/") && !strings.HasPrefix(u.Host, "api.") && !strings.Contains(u.Host, ".api.") {
		u.Path += "api/v3/"
	}
	return u.String(), nil
}

// Options configure a GitHub code host.
type Options struct {
	// APIURL is the REST API base URL (SANDBOX_GITHUB_API_URL); "" means
	// DefaultAPIURL. Normalized with APIBaseURL.
	APIURL string
	// Hosts are the git hosts (sandboxapi.RepoIdentity.Host, host[:port]) whose
	// repositories this API serves (SANDBOX_GITHUB_HOST). Empty means
	// DefaultHost for GitHub.com, or the API URL's host for an Enterprise server.
	Hosts []string
	// HTTPClient sends the requests; nil means a client with
	// DefaultRequestTimeout. The token is added per call.
	HTTPClient *http.Client
	// UserAgent is sent with every request; "" means "sandboxcore".
	UserAgent string
	// Now is the clock for rate-limit delays; nil means time.Now.
	Now func() time.Time
}

// GitHub is sandbox.CodeHost for GitHub.com and GitHub Enterprise Server
// (go-github v62). It holds no credential: each call authenticates with the
// caller's credential's Secret as a bearer token. Safe for concurrent use.
type GitHub struct {
	base  *github.Client
	api   string
	hosts map[string]bool
	now   func() time.Time
}

var _ sandbox.CodeHost = (*GitHub)(nil)

// New returns a GitHub code host. Errors: ErrInvalidArgument for a bad API URL.
func New(opts Options) (*GitHub, error) {
	api, err := APIBaseURL(opts.APIURL)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultRequestTimeout}
	}
	c := github.NewClient(hc)
	if api != DefaultAPIURL {
		if c, err = c.WithEnterpriseURLs(api, api); err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "GitHub API URL %q: %v", api, err)
		}
	}
	c.UserAgent = opts.UserAgent
	if c.UserAgent == "" {
		c.UserAgent = "sandboxcore"
	}
	hosts := map[string]bool{}
	for _, h := range opts.Hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			hosts[h] = true
		}
	}
	if len(hosts) == 0 {
		if api == DefaultAPIURL {
			hosts[DefaultHost] = true
		} else {
			u, _ := url.Parse(api)
			hosts[strings.ToLower(u.Host)] = true
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &GitHub{base: c, api: api, hosts: hosts, now: now}, nil
}

// APIURL returns the normalized REST API base URL.
func (g *GitHub) APIURL() string { return g.api }

// Serves implements sandbox.CodeHost.
func (g *GitHub) Serves(repo sandboxapi.RepoIdentity) bool {
	return g.hosts[strings.ToLower(repo.Host)]
}

func (g *GitHub) client(repo sandboxapi.RepoIdentity, cred *sandbox.Credential) (*github.Client, error) {
	if !g.Serves(repo) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "no code host is configured for %s (SANDBOX_GITHUB_API_URL, SANDBOX_GITHUB_HOST)", repo.Host)
	}
	if strings.Contains(repo.Owner, "/") {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repository %s: GitHub owners have no subgroups", repo.FullName())
	}
	if cred == nil || cred.Secret == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "no credential for %s: configure one for this user (README \"Configuration\")", repo.Host)
	}
	return g.base.WithAuthToken(cred.Secret), nil
}

// DefaultBranch implements sandbox.CodeHost (GET /repos/{owner}/{repo}).
func (g *GitHub) DefaultBranch(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential) (string, error) {
	c, err := g.client(repo, cred)
	if err != nil {
		return "", err
	}
	r, _, err := c.Repositories.Get(ctx, repo.Owner, repo.Name)
	if err != nil {
		return "", g.mapError(err, "get repository "+repo.FullName(), cred)
	}
	if r.GetDefaultBranch() == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "repository %s has no default branch", repo.FullName())
	}
	return r.GetDefaultBranch(), nil
}

// CreatePullRequest implements sandbox.CodeHost:
//
//	POST /repos/{owner}/{repo}/pulls                         {title, head, base, body, draft}
//	POST /repos/{owner}/{repo}/pulls/{n}/requested_reviewers {reviewers, team_reviewers}
//	POST /repos/{owner}/{repo}/issues/{n}/labels             {labels}
//
// With req.ReuseOpen, a 422 "already exists" answer is resolved by
// GET /repos/{owner}/{repo}/pulls?state=open&head=<owner>:<head>&base=<base>
// and the open pull request is returned (Created false).
func (g *GitHub) CreatePullRequest(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, req sandbox.PullRequestRequest) (sandboxapi.PullRequest, error) {
	if err := req.Validate(); err != nil {
		return sandboxapi.PullRequest{}, err
	}
	if err := sandboxapi.ValidateRef(req.Head); err != nil {
		return sandboxapi.PullRequest{}, err
	}
	if req.Base == "" {
		return sandboxapi.PullRequest{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "base is required")
	}
	c, err := g.client(repo, cred)
	if err != nil {
		return sandboxapi.PullRequest{}, err
	}
	what := "create pull request " + req.Head + " → " + req.Base + " on " + repo.FullName()
	pr, _, err := c.PullRequests.Create(ctx, repo.Owner, repo.Name, &github.NewPullRequest{
		Title: github.String(req.Title), Head: github.String(req.Head), Base: github.String(req.Base),
		Body: github.String(req.Body), Draft: github.Bool(req.Draft),
	})
	created := true
	if err != nil {
		mapped := g.mapError(err, what, cred)
		if !req.ReuseOpen || !errors.Is(mapped, sandboxapi.ErrConflict) {
			return sandboxapi.PullRequest{}, mapped
		}
		open, _, lerr := c.PullRequests.List(ctx, repo.Owner, repo.Name, &github.PullRequestListOptions{
			State: "open", Head: repo.Owner + ":" + req.Head, Base: req.Base,
		})
		if lerr != nil || len(open) == 0 {
			return sandboxapi.PullRequest{}, mapped
		}
		pr, created = open[0], false
	}
	out := convert(pr)
	out.Created = created
	var users, teams []string
	for _, r := range req.Reviewers {
		if _, team, ok := strings.Cut(r, "/"); ok {
			teams = append(teams, team)
		} else {
			users = append(users, r)
		}
	}
	if len(users)+len(teams) > 0 {
		if _, _, err := c.PullRequests.RequestReviewers(ctx, repo.Owner, repo.Name, out.Number,
			github.ReviewersRequest{Reviewers: users, TeamReviewers: teams}); err != nil {
			out.Warnings = append(out.Warnings, sandboxapi.Message(g.mapError(err, "request reviewers", cred)))
		}
	}
	if len(req.Labels) > 0 {
		if _, _, err := c.Issues.AddLabelsToIssue(ctx, repo.Owner, repo.Name, out.Number, req.Labels); err != nil {
			out.Warnings = append(out.Warnings, sandboxapi.Message(g.mapError(err, "add labels", cred)))
		}
	}
	return out, nil
}

func convert(pr *github.PullRequest) sandboxapi.PullRequest {
	return sandboxapi.PullRequest{
		Number: pr.GetNumber(), URL: pr.GetHTMLURL(), State: pr.GetState(), Draft: pr.GetDraft(),
		Base: pr.GetBase().GetRef(), Head: pr.GetHead().GetRef(), HeadCommit: pr.GetHead().GetSHA(),
	}
}

// mapError turns a go-github error into a typed sandbox error (package doc).
func (g *GitHub) mapError(err error, what string, cred *sandbox.Credential) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sandboxapi.Errorf(sandboxapi.ErrTimeout, "%s: %v", what, err)
	}
	clean := func(s string) string { return scrub(s, cred) }
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		reset := rl.Rate.Reset.Time
		return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "%s: GitHub API rate limit exceeded (%s); it resets at %s",
			what, clean(rl.Message), reset.UTC().Format(time.RFC3339)), reset.Sub(g.now())+time.Second)
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		wait := defaultRateLimitWait
		if abuse.RetryAfter != nil {
			wait = *abuse.RetryAfter
		}
		return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "%s: GitHub secondary rate limit (%s); retry after %s",
			what, clean(abuse.Message), wait), wait)
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		msg := clean(describe(er))
		switch code := er.Response.StatusCode; {
		case code == http.StatusUnauthorized:
			return sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "%s: GitHub refused the credential (401): %s", what, msg)
		case code == http.StatusTooManyRequests || (code == http.StatusForbidden && strings.Contains(strings.ToLower(er.Message), "rate limit")):
			wait := g.headerWait(er.Response)
			return sandbox.WithRetryAfter(sandboxapi.Errorf(sandboxapi.ErrRateLimited, "%s: GitHub rate limit (%d): %s; retry after %s", what, code, msg, wait), wait)
		case code == http.StatusForbidden:
			return sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "%s: the credential lacks the permission (403): %s", what, msg)
		case code == http.StatusNotFound:
			return sandboxapi.Errorf(sandboxapi.ErrNotFound, "%s: not found (404; a private repository the token cannot see looks the same): %s", what, msg)
		case code == http.StatusConflict:
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: conflict (409): %s", what, msg)
		case code == http.StatusUnprocessableEntity:
			if strings.Contains(strings.ToLower(msg), "already exists") {
				return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: %s", what, msg)
			}
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: GitHub rejected the request (422): %s", what, msg)
		case code >= 500:
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "%s: GitHub is unavailable (%d): %s", what, code, msg)
		default:
			return sandboxapi.Errorf(sandboxapi.ErrSandbox, "%s: GitHub answered %d: %s", what, code, msg)
		}
	}
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "%s: %s", what, clean(err.Error()))
}

// headerWait reads Retry-After (seconds) or X-RateLimit-Reset (Unix seconds).
func (g *GitHub) headerWait(r *http.Response) time.Duration {
	if v := r.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
	}
	if v := r.Header.Get("X-RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Unix(s, 0).Sub(g.now())+time.Second, 0)
		}
	}
	return defaultRateLimitWait
}

// describe renders GitHub's message and its validation errors.
func describe(er *github.ErrorResponse) string {
	parts := []string{er.Message}
	for _, e := range er.Errors {
		switch {
		case e.Message != "":
			parts = append(parts, e.Message)
		case e.Field != "":
			parts = append(parts, fmt.Sprintf("%s %s is %s", e.Resource, e.Field, e.Code))
		}
	}
	return strings.Join(parts, ": ")
}

// scrub removes the token, in every spelling, from text that leaves the package.
func scrub(s string, cred *sandbox.Credential) string {
	if cred == nil || len(cred.Secret) < 4 {
		return s
	}
	for _, form := range []string{cred.Secret, url.QueryEscape(cred.Secret), url.PathEscape(cred.Secret)} {
		s = strings.ReplaceAll(s, form, "<redacted>")
	}
	return s
}
