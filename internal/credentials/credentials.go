// Package credentials resolves git credentials inside activities, from an auth
// scope (user id + repository), so no secret ever enters a workflow payload
// (DESIGN.md "Payload discipline"; docs/DESIGN.md "Rules").
//
// The chain (hostworker wires it; first match wins; nothing ever prompts):
//
//  1. per-user token sources configured out of band on the worker host: a
//     credentials directory with one file per user (Dir,
//     SANDBOX_GIT_CREDENTIALS_DIR) and a credentials file with per-user and
//     per-host entries (File, SANDBOX_GIT_CREDENTIALS_FILE), both re-read when
//     they change;
//  2. a GitHub App installation token (GitHubApp, SANDBOX_GITHUB_APP_*),
//     minted with github.com/bradleyfalzon/ghinstallation/v2 and scoped to
//     the one repository;
//  3. GITHUB_TOKEN / GH_TOKEN for github.com (Env).
//
// Access verifies, with the resolved credential, that a user may read a
// repository before cached content is served to them.
package credentials

import (
	"context"
	"os"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Chain asks each provider in turn and returns the first credential found.
type Chain []sandbox.CredentialProvider

// Credential implements sandbox.CredentialProvider.
func (c Chain) Credential(ctx context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	for _, p := range c {
		cred, err := p.Credential(ctx, scope)
		if err != nil || cred != nil {
			return cred, err
		}
	}
	return nil, nil
}

// Static serves fixed credentials by repository host (host[:port] as in
// RepoIdentity.Host); for tests and embedding.
type Static map[string]sandbox.Credential

// Credential implements sandbox.CredentialProvider.
func (s Static) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	if c, ok := s[scope.Repo.Host]; ok {
		return &c, nil
	}
	return nil, nil
}

// Env serves GITHUB_TOKEN (or GH_TOKEN) as x-access-token for github.com.
type Env struct {
	// Lookup reads a variable; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
}

// Credential implements sandbox.CredentialProvider.
func (e Env) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	if scope.Repo.Host != "github.com" {
		return nil, nil
	}
	lookup := e.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, name := range []string{"GITHUB_TOKEN", "GH_TOKEN"} {
		if v, ok := lookup(name); ok && v != "" {
			return &sandbox.Credential{Username: "x-access-token", Secret: v}, nil
		}
	}
	return nil, nil
}

// FileEntry is one credential in a credentials file.
type FileEntry struct {
	Username string `json:"username"`
	Secret   string `json:"secret"`
}

// fileFormat is the credentials file (JSON, mode 0600 recommended):
//
//	{
//	  "hosts": {"github.com": {"username": "x-access-token", "secret": "..."}},
//	  "users": {"alice": {"github.com": {"username": "x-access-token", "secret": "..."}}}
//	}
//
// A per-user entry wins over a host entry.
type fileFormat struct {
	Hosts map[string]FileEntry            `json:"hosts"`
	Users map[string]map[string]FileEntry `json:"users"`
}

// File serves credentials from a JSON file (format above), re-read whenever
// it changes (size, modification time or inode: an in-place rewrite and an
// atomic replacement both count). Safe for concurrent use.
type File struct {
	Path string

	mu sync.Mutex
	w  watchedJSON[fileFormat]
}

// Credential implements sandbox.CredentialProvider. A missing file means no
// credential; an unreadable or malformed one is an error naming the path
// (never its content).
func (f *File) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok, err := f.w.load(f.Path)
	if err != nil || !ok {
		return nil, err
	}
	if e, ok := data.Users[scope.UserID][scope.Repo.Host]; ok && e.Secret != "" {
		return e.credential(), nil
	}
	if e, ok := data.Hosts[scope.Repo.Host]; ok && e.Secret != "" {
		return e.credential(), nil
	}
	return nil, nil
}

// credential converts an entry; an empty Username means "x-access-token"
// (the GitHub convention for tokens over HTTP basic auth).
func (e FileEntry) credential() *sandbox.Credential {
	user := e.Username
	if user == "" {
		user = DefaultUsername
	}
	return &sandbox.Credential{Username: user, Secret: e.Secret}
}

// DefaultUsername is the basic-auth user name of an entry that names none.
const DefaultUsername = "x-access-token"
