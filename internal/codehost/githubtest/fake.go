// Package githubtest is an httptest fake of the parts of GitHub's REST API
// that sandboxcore uses, faithful to GitHub's documented request and response
// shapes (https://docs.github.com/rest): pull requests, requested reviewers,
// issue labels, repositories, and the GitHub App installation endpoints. It
// authenticates bearer tokens, answers 401/404/422 the way GitHub does, can be
// told to answer with primary (403 + X-RateLimit-Remaining: 0 +
// X-RateLimit-Reset) or secondary (403 + Retry-After) rate limits, and records
// every request. It serves under /api/v3/ like GitHub Enterprise Server.
//
// It is imported by tests only.
package githubtest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// APIPrefix is the path prefix of every API route (GitHub Enterprise Server layout).
const APIPrefix = "/api/v3"

// Repo is one repository the fake knows.
type Repo struct {
	// Owner and Name are the repository's path (owner/name).
	Owner, Name string
	// DefaultBranch is reported by GET /repos/{owner}/{repo}.
	DefaultBranch string
	// Branch returns a branch's head commit, ok false when it does not exist
	// (e.g. read from a real git repository). Required.
	Branch func(name string) (sha string, ok bool)
	// Readers are the logins whose tokens may see the repository; empty means every known token.
	Readers []string
	// InstallationID is the GitHub App installation on it; 0 = the App is not installed.
	InstallationID int64
}

// Request is one recorded request.
type Request struct {
	// Method is the HTTP method.
	Method string
	Path   string // without APIPrefix, e.g. /repos/o/r/pulls
	// Query is the raw query string.
	Query string
	// Token is the bearer token ("" when none, the JWT for App routes).
	Token string
	// Body is the request body (at most 1 MiB).
	Body []byte
	// Status is the status code answered.
	Status int
}

// PR is a pull request held by the fake.
type PR struct {
	Number           int    // 1, 2, … per repository
	Title, Body      string // as sent
	Head, Base       string // branch names
	HeadSHA, BaseSHA string // the branches' commits at creation
	Draft            bool   // as sent
	State            string // "open"
	Author           string // the login of the creating token
	// RequestedReviewers, RequestedTeams and Labels accumulate the follow-up requests.
	RequestedReviewers []string
	RequestedTeams     []string
	Labels             []string
}

// App is a GitHub App the fake accepts JWTs for.
type App struct {
	// ID must be the JWT's iss claim.
	ID int64
	// PublicKey verifies the JWT's RS256 signature.
	PublicKey *rsa.PublicKey
}

// Server is the fake. All methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	tokens    map[string]string // token → login
	repos     map[string]*Repo  // "owner/name"
	prs       map[string][]*PR  // "owner/name" → PRs, number = index+1
	requests  []Request
	limited   int
	reset     time.Time
	secondary int
	retryIn   time.Duration
	app       *App
	minted    int
	labelID   int64
}

// New starts a fake, closed by t.Cleanup.
func New(t testing.TB) *Server {
	s := &Server{tokens: map[string]string{}, repos: map[string]*Repo{}, prs: map[string][]*PR{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL returns the API base URL, "http://127.0.0.1:<port>/api/v3/".
func (s *Server) URL() string { return s.srv.URL + APIPrefix + "/" }

// WebURL returns the base of html_url links, "http://127.0.0.1:<port>".
func (s *Server) WebURL() string { return s.srv.URL }

// AddToken accepts token as login's credential.
func (s *Server) AddToken(token, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = login
}

// AddRepo registers a repository.
func (s *Server) AddRepo(r Repo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := r
	s.repos[r.Owner+"/"+r.Name] = &cp
}

// SetApp accepts JWTs signed by app's key (GitHub App routes).
func (s *Server) SetApp(app App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.app = &app
}

// RateLimitNext answers the next n requests with GitHub's primary rate-limit
// response: 403, X-RateLimit-Remaining: 0, X-RateLimit-Reset: reset (Unix seconds).
func (s *Server) RateLimitNext(n int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited, s.reset = n, reset
}

// SecondaryRateLimitNext answers the next n requests with GitHub's secondary
// rate-limit response: 403 with Retry-After (seconds).
func (s *Server) SecondaryRateLimitNext(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary, s.retryIn = n, retryAfter
}

// Requests returns the recorded requests, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// PullRequests returns copies of a repository's pull requests, by number.
func (s *Server) PullRequests(owner, name string) []PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PR
	for _, p := range s.prs[owner+"/"+name] {
		cp := *p
		cp.RequestedReviewers = append([]string(nil), p.RequestedReviewers...)
		cp.RequestedTeams = append([]string(nil), p.RequestedTeams...)
		cp.Labels = append([]string(nil), p.Labels...)
		out = append(out, cp)
	}
	return out
}

var (
	rePulls     = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls$`)
	reReviewers = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls/([0-9]+)/requested_reviewers$`)
	reLabels    = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/([0-9]+)/labels$`)
	reRepo      = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)$`)
	reInstall   = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/installation$`)
	reTokens    = regexp.MustCompile(`^/app/installations/([0-9]+)/access_tokens$`)
)

type reply struct {
	status int
	body   any
	header map[string]string
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	path := strings.TrimPrefix(r.URL.Path, APIPrefix)
	token := ""
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			token = t
		} else if t, ok := strings.CutPrefix(a, "token "); ok {
			token = t
		}
	}
	s.mu.Lock()
	rep := s.route(r.Method, path, r.URL.Query(), token, body)
	s.requests = append(s.requests, Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Token: token, Body: body, Status: rep.status})
	s.mu.Unlock()

	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("X-GitHub-Request-Id", fmt.Sprintf("FAKE:%d", time.Now().UnixNano()))
	if _, ok := rep.header["X-RateLimit-Remaining"]; !ok {
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "4999")
		h.Set("X-RateLimit-Used", "1")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
	}
	for k, v := range rep.header {
		h.Set(k, v)
	}
	w.WriteHeader(rep.status)
	if rep.body != nil {
		_ = json.NewEncoder(w).Encode(rep.body)
	}
}

func ghError(status int, msg, doc string, errs ...map[string]string) reply {
	b := map[string]any{"message": msg, "documentation_url": doc, "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		b["errors"] = errs
	}
	return reply{status: status, body: b}
}

const docBase = "https://docs.github.com/rest"

// route answers one request; s.mu is held. It stays long: one case per
// REST endpoint the fake serves, each a few lines.
func (s *Server) route(method, path string, q map[string][]string, token string, body []byte) reply {
	if s.limited > 0 {
		s.limited--
		return reply{status: http.StatusForbidden, body: map[string]any{
			"message":           "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID FAKE.",
			"documentation_url": docBase + "/overview/rate-limits-for-the-rest-api#about-rate-limits", "status": "403",
		}, header: map[string]string{
			"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
			"X-RateLimit-Reset": strconv.FormatInt(s.reset.Unix(), 10), "X-RateLimit-Resource": "core",
		}}
	}
	if s.secondary > 0 {
		s.secondary--
		return reply{status: http.StatusForbidden, body: map[string]any{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": docBase + "/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits", "status": "403",
		}, header: map[string]string{"Retry-After": strconv.Itoa(int(s.retryIn / time.Second))}}
	}
	// GitHub App routes authenticate with the App's JWT.
	if m := reTokens.FindStringSubmatch(path); m != nil && method == http.MethodPost {
		return s.mintToken(m[1], token, body)
	}
	if m := reInstall.FindStringSubmatch(path); m != nil && method == http.MethodGet {
		if !s.validJWT(token) {
			return ghError(http.StatusUnauthorized, "A JSON web token could not be decoded", docBase)
		}
		repo := s.repos[m[1]+"/"+m[2]]
		if repo == nil || repo.InstallationID == 0 {
			return ghError(http.StatusNotFound, "Not Found", docBase+"/apps/apps#get-a-repository-installation-for-the-authenticated-app")
		}
		return reply{status: http.StatusOK, body: map[string]any{
			"id": repo.InstallationID, "app_id": s.app.ID, "target_type": "Organization",
			"account":              map[string]any{"login": repo.Owner, "id": 1, "type": "Organization"},
			"repository_selection": "selected", "permissions": map[string]string{"contents": "write", "pull_requests": "write"},
		}}
	}
	login, ok := s.tokens[token]
	if !ok {
		return ghError(http.StatusUnauthorized, "Bad credentials", docBase)
	}
	var m []string
	route := func(re *regexp.Regexp) bool { m = re.FindStringSubmatch(path); return m != nil }
	switch {
	case route(rePulls):
		repo := s.visible(m[1], m[2], login)
		if repo == nil {
			return ghError(http.StatusNotFound, "Not Found", docBase+"/pulls/pulls")
		}
		if method == http.MethodPost {
			return s.createPR(repo, login, body)
		}
		if method == http.MethodGet {
			return s.listPRs(repo, q)
		}
	case route(reReviewers) && method == http.MethodPost:
		repo := s.visible(m[1], m[2], login)
		pr := s.pr(repo, m[3])
		if pr == nil {
			return ghError(http.StatusNotFound, "Not Found", docBase+"/pulls/review-requests#request-reviewers-for-a-pull-request")
		}
		var in struct {
			Reviewers     []string `json:"reviewers"`
			TeamReviewers []string `json:"team_reviewers"`
		}
		if json.Unmarshal(body, &in) != nil {
			return ghError(http.StatusBadRequest, "Problems parsing JSON", docBase)
		}
		for _, rv := range in.Reviewers {
			if rv == pr.Author {
				return ghError(http.StatusUnprocessableEntity, "Review cannot be requested from pull request author.", docBase+"/pulls/review-requests#request-reviewers-for-a-pull-request")
			}
		}
		pr.RequestedReviewers = appendNew(pr.RequestedReviewers, in.Reviewers...)
		pr.RequestedTeams = appendNew(pr.RequestedTeams, in.TeamReviewers...)
		return reply{status: http.StatusCreated, body: s.prJSON(repo, pr)}
	case route(reLabels) && method == http.MethodPost:
		repo := s.visible(m[1], m[2], login)
		pr := s.pr(repo, m[3])
		if pr == nil {
			return ghError(http.StatusNotFound, "Not Found", docBase+"/issues/labels#add-labels-to-an-issue")
		}
		// GitHub accepts {"labels": [...]} or a bare array.
		var labels []string
		if err := json.Unmarshal(body, &labels); err != nil {
			var in struct {
				Labels []string `json:"labels"`
			}
			if json.Unmarshal(body, &in) != nil {
				return ghError(http.StatusBadRequest, "Problems parsing JSON", docBase)
			}
			labels = in.Labels
		}
		pr.Labels = appendNew(pr.Labels, labels...)
		out := []map[string]any{}
		for _, l := range pr.Labels {
			s.labelID++
			out = append(out, map[string]any{"id": s.labelID, "node_id": "LA_fake", "url": s.URL() + "repos/" + repo.Owner + "/" + repo.Name + "/labels/" + l,
				"name": l, "color": "ededed", "default": false, "description": nil})
		}
		return reply{status: http.StatusOK, body: out}
	case route(reRepo) && method == http.MethodGet:
		repo := s.visible(m[1], m[2], login)
		if repo == nil {
			return ghError(http.StatusNotFound, "Not Found", docBase+"/repos/repos#get-a-repository")
		}
		return reply{status: http.StatusOK, body: s.repoJSON(repo)}
	}
	return ghError(http.StatusNotFound, "Not Found", docBase)
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			found = found || l == a
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

// visible returns the repository when login may see it (GitHub answers 404,
// not 403, for a private repository the token cannot see).
func (s *Server) visible(owner, name, login string) *Repo {
	repo := s.repos[owner+"/"+name]
	if repo == nil {
		return nil
	}
	if len(repo.Readers) == 0 {
		return repo
	}
	for _, r := range repo.Readers {
		if r == login {
			return repo
		}
	}
	return nil
}

func (s *Server) pr(repo *Repo, num string) *PR {
	if repo == nil {
		return nil
	}
	n, _ := strconv.Atoi(num)
	list := s.prs[repo.Owner+"/"+repo.Name]
	if n < 1 || n > len(list) {
		return nil
	}
	return list[n-1]
}

// createPR follows "Create a pull request" (POST /repos/{owner}/{repo}/pulls).
func (s *Server) createPR(repo *Repo, login string, body []byte) reply {
	const doc = docBase + "/pulls/pulls#create-a-pull-request"
	var in struct {
		Title               *string `json:"title"`
		Head                *string `json:"head"`
		HeadRepo            *string `json:"head_repo"`
		Base                *string `json:"base"`
		Body                *string `json:"body"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
		Draft               *bool   `json:"draft"`
		Issue               *int    `json:"issue"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return ghError(http.StatusBadRequest, "Problems parsing JSON", doc)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"head", in.Head}, {"base", in.Base}} {
		if f.v == nil || *f.v == "" {
			return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{"resource": "PullRequest", "code": "missing_field", "field": f.name})
		}
	}
	if (in.Title == nil || *in.Title == "") && in.Issue == nil {
		return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{"resource": "PullRequest", "code": "missing_field", "field": "title"})
	}
	head := *in.Head
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		if owner != repo.Owner {
			return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{"resource": "PullRequest", "code": "invalid", "field": "head"})
		}
		head = branch
	}
	headSHA, ok := repo.Branch(head)
	if !ok {
		return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{"resource": "PullRequest", "code": "invalid", "field": "head"})
	}
	baseSHA, ok := repo.Branch(*in.Base)
	if !ok {
		return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{"resource": "PullRequest", "code": "invalid", "field": "base"})
	}
	for _, p := range s.prs[repo.Owner+"/"+repo.Name] {
		if p.State == "open" && p.Head == head && p.Base == *in.Base {
			return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{
				"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + repo.Owner + ":" + head + "."})
		}
	}
	if headSHA == baseSHA {
		return ghError(http.StatusUnprocessableEntity, "Validation Failed", doc, map[string]string{
			"resource": "PullRequest", "code": "custom", "message": "No commits between " + *in.Base + " and " + head})
	}
	pr := &PR{Head: head, Base: *in.Base, HeadSHA: headSHA, BaseSHA: baseSHA, State: "open", Author: login}
	if in.Title != nil {
		pr.Title = *in.Title
	}
	if in.Body != nil {
		pr.Body = *in.Body
	}
	if in.Draft != nil {
		pr.Draft = *in.Draft
	}
	key := repo.Owner + "/" + repo.Name
	s.prs[key] = append(s.prs[key], pr)
	pr.Number = len(s.prs[key])
	return reply{status: http.StatusCreated, body: s.prJSON(repo, pr)}
}

// listPRs follows "List pull requests" (state, head=owner:branch, base filters).
func (s *Server) listPRs(repo *Repo, q map[string][]string) reply {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	state := get("state")
	if state == "" {
		state = "open"
	}
	out := []map[string]any{}
	for _, p := range s.prs[repo.Owner+"/"+repo.Name] {
		if state != "all" && p.State != state {
			continue
		}
		if h := get("head"); h != "" && h != repo.Owner+":"+p.Head {
			continue
		}
		if b := get("base"); b != "" && b != p.Base {
			continue
		}
		out = append(out, s.prJSON(repo, p))
	}
	return reply{status: http.StatusOK, body: out}
}

func user(login string) map[string]any {
	return map[string]any{"login": login, "id": len(login), "node_id": "U_fake", "type": "User", "site_admin": false}
}

func (s *Server) repoJSON(r *Repo) map[string]any {
	full := r.Owner + "/" + r.Name
	return map[string]any{
		"id": 1296269, "node_id": "R_fake", "name": r.Name, "full_name": full, "owner": user(r.Owner),
		"private": len(r.Readers) > 0, "html_url": s.WebURL() + "/" + full, "url": s.URL() + "repos/" + full,
		"default_branch": r.DefaultBranch, "visibility": "private",
		"permissions": map[string]bool{"admin": false, "push": true, "pull": true},
	}
}

// prJSON renders a pull request like GitHub's "pull-request" schema.
func (s *Server) prJSON(repo *Repo, p *PR) map[string]any {
	full := repo.Owner + "/" + repo.Name
	api := s.URL() + "repos/" + full
	web := s.WebURL() + "/" + full
	reviewers := []map[string]any{}
	for _, r := range p.RequestedReviewers {
		reviewers = append(reviewers, user(r))
	}
	teams := []map[string]any{}
	for _, t := range p.RequestedTeams {
		teams = append(teams, map[string]any{"slug": t, "name": t, "id": len(t)})
	}
	labels := []map[string]any{}
	for _, l := range p.Labels {
		labels = append(labels, map[string]any{"name": l, "color": "ededed", "default": false})
	}
	ref := func(branch, sha string) map[string]any {
		return map[string]any{"label": repo.Owner + ":" + branch, "ref": branch, "sha": sha, "user": user(repo.Owner), "repo": s.repoJSON(repo)}
	}
	return map[string]any{
		"url": fmt.Sprintf("%s/pulls/%d", api, p.Number), "id": 1000000 + p.Number, "node_id": "PR_fake",
		"html_url": fmt.Sprintf("%s/pull/%d", web, p.Number), "diff_url": fmt.Sprintf("%s/pull/%d.diff", web, p.Number),
		"patch_url": fmt.Sprintf("%s/pull/%d.patch", web, p.Number), "issue_url": fmt.Sprintf("%s/issues/%d", api, p.Number),
		"number": p.Number, "state": p.State, "locked": false, "title": p.Title, "user": user(p.Author), "body": p.Body,
		"created_at": time.Now().UTC().Format(time.RFC3339), "updated_at": time.Now().UTC().Format(time.RFC3339),
		"closed_at": nil, "merged_at": nil, "merge_commit_sha": nil, "draft": p.Draft,
		"requested_reviewers": reviewers, "requested_teams": teams, "labels": labels,
		"head": ref(p.Head, p.HeadSHA), "base": ref(p.Base, p.BaseSHA),
		"author_association": "OWNER", "merged": false, "mergeable": nil, "comments": 0, "review_comments": 0,
		"maintainer_can_modify": false, "commits": 1, "additions": 1, "deletions": 0, "changed_files": 1,
	}
}

// mintToken follows "Create an installation access token for an app".
func (s *Server) mintToken(id, jwt string, body []byte) reply {
	const doc = docBase + "/apps/apps#create-an-installation-access-token-for-an-app"
	if !s.validJWT(jwt) {
		return ghError(http.StatusUnauthorized, "A JSON web token could not be decoded", doc)
	}
	inst, _ := strconv.ParseInt(id, 10, 64)
	var known []*Repo
	for _, r := range s.repos {
		if r.InstallationID == inst {
			known = append(known, r)
		}
	}
	if len(known) == 0 {
		return ghError(http.StatusNotFound, "Not Found", doc)
	}
	var in struct {
		Repositories []string `json:"repositories"`
	}
	if len(body) > 0 && json.Unmarshal(body, &in) != nil {
		return ghError(http.StatusBadRequest, "Problems parsing JSON", doc)
	}
	repos := []map[string]any{}
	for _, name := range in.Repositories {
		found := false
		for _, r := range known {
			if r.Name == name {
				found = true
				repos = append(repos, s.repoJSON(r))
			}
		}
		if !found {
			return ghError(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.", doc)
		}
	}
	sort.Slice(repos, func(i, j int) bool { return repos[i]["name"].(string) < repos[j]["name"].(string) })
	s.minted++
	tok := fmt.Sprintf("ghs_fakeinstallation%dtoken%d", inst, s.minted)
	s.tokens[tok] = "sandboxcore-app[bot]"
	return reply{status: http.StatusCreated, body: map[string]any{
		"token": tok, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"permissions":          map[string]string{"contents": "write", "pull_requests": "write"},
		"repository_selection": "selected", "repositories": repos,
	}}
}

// validJWT checks an RS256 JWT: signature by the App's key, iss = App id,
// not expired, issued at most 10 minutes before it expires (GitHub's rules).
func (s *Server) validJWT(tok string) bool {
	if s.app == nil {
		return false
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(s.app.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Iss string `json:"iss"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil {
		return false
	}
	now := time.Now().Unix()
	return claims.Iss == strconv.FormatInt(s.app.ID, 10) && claims.Exp > now && claims.Exp-claims.Iat <= 600
}
