package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// DefaultAccessTTL is how long Access remembers a successful check when
// Access.TTL is zero.
const DefaultAccessTTL = 2 * time.Minute

// maxAccessEntries bounds Access's memory; past it expired entries are dropped
// (and, if still full, all of them).
const maxAccessEntries = 10000

// Access is sandbox.AccessVerifier: before a worker serves a repository's
// cached content (a shared bare mirror, fetched by whichever user came first)
// to a user, it checks with that user's credential that the remote lets them
// read the repository (git ls-remote through sandbox.RemoteGit), so a token
// that cannot read it gets ErrRepoAuthFailed even when nothing needs fetching.
// No credential is the same check, anonymously.
//
// Successes are remembered for TTL per (user, repository, credential
// fingerprint): a rotated or revoked token is a new fingerprint and is checked
// again at once. Failures are never remembered. The fingerprint is a SHA-256
// of the credential kept in memory only. Only http(s) repositories are
// checked: file:// access is the file system's business and ssh URLs carry no
// per-user credential. A check that cannot reach the remote fails closed
// (ErrRepoCacheUnavailable, retryable). Safe for concurrent use.
type Access struct {
	// Remote runs ls-remote. Required.
	Remote sandbox.RemoteGit
	// TTL is how long a success is remembered; 0 means DefaultAccessTTL, a
	// negative value disables remembering.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	ok map[string]time.Time // key → expiry
}

var _ sandbox.AccessVerifier = (*Access)(nil)

// VerifyAccess implements sandbox.AccessVerifier. Errors: ErrRepoAuthFailed,
// ErrRepoCacheUnavailable, ErrTimeout (from RemoteGit.CheckAccess).
func (a *Access) VerifyAccess(ctx context.Context, scope sandbox.AuthScope, cred *sandbox.Credential) error {
	u := scope.Repo.URL
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return nil
	}
	key := accessKey(scope, cred)
	now := a.now()
	ttl := a.TTL
	if ttl == 0 {
		ttl = DefaultAccessTTL
	}
	if ttl > 0 {
		a.mu.Lock()
		exp, hit := a.ok[key]
		a.mu.Unlock()
		if hit && now.Before(exp) {
			return nil
		}
	}
	if err := a.Remote.CheckAccess(ctx, scope.Repo, cred); err != nil {
		a.forget(key)
		return err
	}
	if ttl > 0 {
		a.remember(key, now.Add(ttl), now)
	}
	return nil
}

func (a *Access) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Access) forget(key string) {
	a.mu.Lock()
	delete(a.ok, key)
	a.mu.Unlock()
}

func (a *Access) remember(key string, exp, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ok == nil {
		a.ok = map[string]time.Time{}
	}
	if len(a.ok) >= maxAccessEntries {
		for k, e := range a.ok {
			if !now.Before(e) {
				delete(a.ok, k)
			}
		}
		if len(a.ok) >= maxAccessEntries {
			a.ok = map[string]time.Time{}
		}
	}
	a.ok[key] = exp
}

// accessKey is user, repository key and the credential's fingerprint.
func accessKey(scope sandbox.AuthScope, cred *sandbox.Credential) string {
	fp := "anonymous"
	if cred != nil {
		sum := sha256.Sum256([]byte(cred.Username + "\x00" + cred.Secret))
		fp = hex.EncodeToString(sum[:])
	}
	return scope.UserID + "\x00" + scope.Repo.Key() + "\x00" + fp
}
