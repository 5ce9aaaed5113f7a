// Package credentials resolves git credentials inside activities, from an auth
// scope (user id + repository), so no secret ever enters a workflow payload
// (DESIGN.md "Payload discipline"; seed "Keep git credentials out of remotes").
//
// The chain, first match wins: a credentials file on the worker host
// (SANDBOX_GIT_CREDENTIALS_FILE, re-read when it changes), then GITHUB_TOKEN /
// GH_TOKEN for github.com.
package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

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
// its modification time or size changes.
type File struct {
	Path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	data    fileFormat
}

// Credential implements sandbox.CredentialProvider. A missing file means no
// credential; an unreadable or malformed one is an error naming the path
// (never its content).
func (f *File) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.Path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", f.Path, err)
	}
	if !st.ModTime().Equal(f.modTime) || st.Size() != f.size {
		raw, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("credentials file %s: %w", f.Path, err)
		}
		var data fileFormat
		if err := json.Unmarshal(raw, &data); err != nil {
			return nil, fmt.Errorf("credentials file %s: malformed JSON", f.Path)
		}
		f.data, f.modTime, f.size = data, st.ModTime(), st.Size()
	}
	if e, ok := f.data.Users[scope.UserID][scope.Repo.Host]; ok {
		return &sandbox.Credential{Username: e.Username, Secret: e.Secret}, nil
	}
	if e, ok := f.data.Hosts[scope.Repo.Host]; ok {
		return &sandbox.Credential{Username: e.Username, Secret: e.Secret}, nil
	}
	return nil, nil
}
