package credentials

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
	github88 "github.com/google/go-github/v88/github"

	"github.com/sandboxcore/sandboxcore/internal/codehost"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// GitHubAppOptions configure a GitHubApp (SANDBOX_GITHUB_APP_*).
type GitHubAppOptions struct {
	// AppID is the App's numeric id. Required.
	AppID int64
	// PrivateKeyPEM is the App's RSA private key (PEM). Required.
	PrivateKeyPEM []byte
	// InstallationID, when not 0, is used for every repository; 0 means look
	// the installation up per repository (GET /repos/{owner}/{repo}/installation).
	InstallationID int64
	// APIURL is the REST API base (as codehost.Options.APIURL); "" = GitHub.com.
	APIURL string
	// Hosts are the git hosts served; empty means codehost's default for APIURL.
	Hosts []string
	// HTTPClient is the base client; nil means one with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock (negative-lookup expiry); nil means time.Now.
	Now func() time.Time
}

// notInstalledTTL is how long "the App is not installed on this repository" is remembered.
const notInstalledTTL = 5 * time.Minute

// GitHubApp is the chain's second source: a GitHub App installation
// token, minted with github.com/bradleyfalzon/ghinstallation/v2 (JWT signed
// with the App's key → POST /app/installations/{id}/access_tokens, cached and
// refreshed a minute before it expires) and scoped to the one repository
// asked for (InstallationTokenOptions.Repositories), served as
// {Username: "x-access-token", Secret: <token>}. A repository the App is not
// installed on (404) or cannot reach (422) yields no credential, so the chain
// goes on. App tokens are not per user: whoever reaches this source gets what
// the App may read, so wire it only where every user may read that.
// Safe for concurrent use.
type GitHubApp struct {
	atr     *ghinstallation.AppsTransport
	lookup  *github.Client
	fixedID int64
	serves  func(sandboxapi.RepoIdentity) bool
	now     func() time.Time

	mu      sync.Mutex
	install map[string]installEntry              // "owner/name" → installation
	tokens  map[string]*ghinstallation.Transport // "<installation>/<owner>/<name>"
}

type installEntry struct {
	id      int64 // 0 = not installed
	expires time.Time
}

// NewGitHubApp returns the App source. Errors: ErrInvalidArgument for a
// missing id, an unparsable key or a bad API URL.
func NewGitHubApp(o GitHubAppOptions) (*GitHubApp, error) {
	if o.AppID <= 0 {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "GitHub App: the app id is required")
	}
	api, err := codehost.APIBaseURL(o.APIURL)
	if err != nil {
		return nil, err
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: codehost.DefaultRequestTimeout}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	atr, err := ghinstallation.NewAppsTransport(base, o.AppID, o.PrivateKeyPEM)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "GitHub App: private key: not a PEM RSA key")
	}
	atr.BaseURL = strings.TrimRight(api, "/")
	lookup := github.NewClient(&http.Client{Transport: atr, Timeout: hc.Timeout})
	if api != codehost.DefaultAPIURL {
		if lookup, err = lookup.WithEnterpriseURLs(api, api); err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "GitHub App: API URL: %v", err)
		}
	}
	lookup.UserAgent = "sandboxcore"
	// The same host rule as the code host of that API.
	ch, err := codehost.New(codehost.Options{APIURL: o.APIURL, Hosts: o.Hosts})
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &GitHubApp{atr: atr, lookup: lookup, fixedID: o.InstallationID, serves: ch.Serves, now: now,
		install: map[string]installEntry{}, tokens: map[string]*ghinstallation.Transport{}}, nil
}

// Credential implements sandbox.CredentialProvider.
func (g *GitHubApp) Credential(ctx context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	repo := scope.Repo
	if !g.serves(repo) || strings.Contains(repo.Owner, "/") {
		return nil, nil
	}
	id, err := g.installation(ctx, repo)
	if err != nil || id == 0 {
		return nil, err
	}
	itr := g.transport(id, repo)
	tok, err := itr.Token(ctx)
	if err != nil {
		var he *ghinstallation.HTTPError
		if errors.As(err, &he) && he.Response != nil {
			_ = he.Response.Body.Close()
			switch he.Response.StatusCode {
			case http.StatusNotFound, http.StatusUnprocessableEntity:
				return nil, nil // not installed on / not accessible to this repository
			case http.StatusUnauthorized, http.StatusForbidden:
				return nil, sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "GitHub App: GitHub refused the App's key (%d)", he.Response.StatusCode)
			}
		}
		return nil, sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "GitHub App: cannot mint an installation token for %s", repo.FullName())
	}
	return &sandbox.Credential{Username: DefaultUsername, Secret: tok}, nil
}

// installation returns the installation id for repo (0 = not installed).
func (g *GitHubApp) installation(ctx context.Context, repo sandboxapi.RepoIdentity) (int64, error) {
	if g.fixedID != 0 {
		return g.fixedID, nil
	}
	key := repo.FullName()
	now := g.now()
	g.mu.Lock()
	e, ok := g.install[key]
	g.mu.Unlock()
	if ok && (e.id != 0 || now.Before(e.expires)) {
		return e.id, nil
	}
	inst, resp, err := g.lookup.Apps.FindRepositoryInstallation(ctx, repo.Owner, repo.Name)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			g.mu.Lock()
			g.install[key] = installEntry{expires: now.Add(notInstalledTTL)}
			g.mu.Unlock()
			return 0, nil
		}
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return 0, sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "GitHub App: GitHub refused the App's key (%d)", resp.StatusCode)
		}
		return 0, sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "GitHub App: installation lookup for %s failed", key)
	}
	g.mu.Lock()
	if len(g.install) > maxWatchedUsers {
		g.install = map[string]installEntry{}
	}
	g.install[key] = installEntry{id: inst.GetID()}
	g.mu.Unlock()
	return inst.GetID(), nil
}

// transport returns the token source of (installation, repository).
func (g *GitHubApp) transport(id int64, repo sandboxapi.RepoIdentity) *ghinstallation.Transport {
	key := strconv.FormatInt(id, 10) + "/" + repo.FullName()
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.tokens[key]; ok {
		return t
	}
	t := ghinstallation.NewFromAppsTransport(g.atr, id)
	t.InstallationTokenOptions = &github88.InstallationTokenOptions{Repositories: []string{repo.Name}}
	if len(g.tokens) > maxWatchedUsers {
		g.tokens = map[string]*ghinstallation.Transport{}
	}
	g.tokens[key] = t
	return t
}
