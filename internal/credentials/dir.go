package credentials

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Dir serves per-user credentials from a directory on the worker host
// (SANDBOX_GIT_CREDENTIALS_DIR), one JSON file per user named
// <user_id>.json (mode 0600 recommended), mapping repository hosts
// (RepoIdentity.Host: host[:port]) to entries:
//
//	{"github.com": {"username": "x-access-token", "secret": "ghp_…"},
//	 "git.example.com:8443": {"username": "alice", "secret": "…"}}
//
// An empty username means "x-access-token". Each file is re-read when it
// changes (size, modification time or inode), so tokens can be rotated or
// revoked without restarting the worker; a missing file means no credential
// for that user. A user id that is not a valid sandbox id
// (sandboxapi.ValidateID) never reaches the file system. Safe for concurrent use.
type Dir struct {
	Path string

	mu    sync.Mutex
	users map[string]*watchedJSON[map[string]FileEntry]
}

// maxWatchedUsers bounds Dir's per-user cache; past it the cache is dropped
// (files are simply read again).
const maxWatchedUsers = 10000

// Credential implements sandbox.CredentialProvider. Errors name the file,
// never its content.
func (d *Dir) Credential(_ context.Context, scope sandbox.AuthScope) (*sandbox.Credential, error) {
	if sandboxapi.ValidateID("user_id", scope.UserID) != nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users == nil || len(d.users) > maxWatchedUsers {
		d.users = map[string]*watchedJSON[map[string]FileEntry]{}
	}
	w := d.users[scope.UserID]
	if w == nil {
		w = &watchedJSON[map[string]FileEntry]{}
		d.users[scope.UserID] = w
	}
	data, ok, err := w.load(filepath.Join(d.Path, scope.UserID+".json"))
	if err != nil || !ok {
		return nil, err
	}
	if e, ok := data[scope.Repo.Host]; ok && e.Secret != "" {
		return e.credential(), nil
	}
	return nil, nil
}
