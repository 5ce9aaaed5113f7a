package credentials_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/credentials"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func scope(user, host string) sandbox.AuthScope {
	return sandbox.AuthScope{UserID: user, Repo: sandboxapi.RepoIdentity{Host: host, Owner: "o", Name: "r", URL: "https://" + host + "/o/r.git"}}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	// Write through a temporary file and rename: a new inode, like a secret rotation.
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func TestFileServesUserThenHostEntriesAndRereadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds.json")
	f := &credentials.File{Path: path}
	ctx := context.Background()

	c, err := f.Credential(ctx, scope("alice", "github.com"))
	require.NoError(t, err)
	assert.Nil(t, c, "a missing file means no credential")

	write(t, path, `{"hosts": {"github.com": {"username": "x-access-token", "secret": "host-token"}},
		"users": {"alice": {"github.com": {"secret": "alice-token"}}}}`)
	c, err = f.Credential(ctx, scope("alice", "github.com"))
	require.NoError(t, err)
	assert.Equal(t, &sandbox.Credential{Username: "x-access-token", Secret: "alice-token"}, c, "per-user wins; empty username = x-access-token")
	c, err = f.Credential(ctx, scope("bob", "github.com"))
	require.NoError(t, err)
	assert.Equal(t, "host-token", c.Secret)
	c, err = f.Credential(ctx, scope("bob", "gitlab.com"))
	require.NoError(t, err)
	assert.Nil(t, c)

	// Same size, new content: the inode changes, so it is re-read.
	write(t, path, `{"hosts": {"github.com": {"username": "x-access-token", "secret": "host-tokeN"}},
		"users": {"alice": {"github.com": {"secret": "alice-tokeN"}}}}`)
	c, err = f.Credential(ctx, scope("alice", "github.com"))
	require.NoError(t, err)
	assert.Equal(t, "alice-tokeN", c.Secret)

	write(t, path, `{"users": {"alice": {"github.com": {"secret": "SECRET-IN-BROKEN-FILE"`)
	_, err = f.Credential(ctx, scope("alice", "github.com"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.NotContains(t, err.Error(), "SECRET-IN-BROKEN-FILE", "errors never echo the file")
}

func TestDirServesPerUserFilesAndRereadsOnChange(t *testing.T) {
	dir := t.TempDir()
	d := &credentials.Dir{Path: dir}
	ctx := context.Background()
	write(t, filepath.Join(dir, "alice.json"), `{"127.0.0.1:8080": {"username": "alice", "secret": "a1"}}`)

	c, err := d.Credential(ctx, scope("alice", "127.0.0.1:8080"))
	require.NoError(t, err)
	assert.Equal(t, &sandbox.Credential{Username: "alice", Secret: "a1"}, c)
	c, err = d.Credential(ctx, scope("bob", "127.0.0.1:8080"))
	require.NoError(t, err)
	assert.Nil(t, c, "no file for bob")
	c, err = d.Credential(ctx, scope("../alice", "127.0.0.1:8080"))
	require.NoError(t, err)
	assert.Nil(t, c, "an invalid user id never reaches the file system")

	write(t, filepath.Join(dir, "alice.json"), `{"127.0.0.1:8080": {"username": "alice", "secret": "a2"}}`)
	c, err = d.Credential(ctx, scope("alice", "127.0.0.1:8080"))
	require.NoError(t, err)
	assert.Equal(t, "a2", c.Secret, "rotation is picked up without a restart")

	require.NoError(t, os.Remove(filepath.Join(dir, "alice.json")))
	c, err = d.Credential(ctx, scope("alice", "127.0.0.1:8080"))
	require.NoError(t, err)
	assert.Nil(t, c, "revocation is picked up without a restart")
}

func TestChainOrderAndEnv(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "alice.json"), `{"github.com": {"secret": "from-dir"}}`)
	file := filepath.Join(t.TempDir(), "c.json")
	write(t, file, `{"hosts": {"github.com": {"secret": "from-file"}}}`)
	env := credentials.Env{Lookup: func(k string) (string, bool) {
		if k == "GH_TOKEN" {
			return "from-env", true
		}
		return "", false
	}}
	chain := credentials.Chain{&credentials.Dir{Path: dir}, &credentials.File{Path: file}, env}
	ctx := context.Background()
	for user, want := range map[string]string{"alice": "from-dir", "bob": "from-file"} {
		c, err := chain.Credential(ctx, scope(user, "github.com"))
		require.NoError(t, err)
		assert.Equal(t, want, c.Secret, user)
	}
	c, err := credentials.Chain{env}.Credential(ctx, scope("bob", "github.com"))
	require.NoError(t, err)
	assert.Equal(t, &sandbox.Credential{Username: "x-access-token", Secret: "from-env"}, c)
	c, err = credentials.Chain{env}.Credential(ctx, scope("bob", "git.example.com"))
	require.NoError(t, err)
	assert.Nil(t, c, "GITHUB_TOKEN/GH_TOKEN are for github.com only")
	assert.Equal(t, "x-access-token:<redacted>", (&sandbox.Credential{Username: "x-access-token", Secret: "s"}).String())
}

// fakeRemote counts access checks and fails for one secret.
type fakeRemote struct {
	sandbox.RemoteGit
	mu     sync.Mutex
	checks int
	deny   string
}

func (f *fakeRemote) CheckAccess(_ context.Context, _ sandboxapi.RepoIdentity, cred *sandbox.Credential) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if cred == nil || cred.Secret == f.deny {
		return sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "refused")
	}
	return nil
}

func TestAccessRemembersSuccessesPerUserRepoAndCredential(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	remote := &fakeRemote{deny: "revoked"}
	a := &credentials.Access{Remote: remote, TTL: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	good := &sandbox.Credential{Username: "x-access-token", Secret: "good"}
	s := scope("alice", "github.com")

	require.NoError(t, a.VerifyAccess(ctx, s, good))
	require.NoError(t, a.VerifyAccess(ctx, s, good))
	assert.Equal(t, 1, remote.checks, "the second check within the TTL is remembered")

	require.NoError(t, a.VerifyAccess(ctx, scope("bob", "github.com"), good))
	assert.Equal(t, 2, remote.checks, "another user is checked on its own")

	err := a.VerifyAccess(ctx, s, &sandbox.Credential{Username: "x-access-token", Secret: "revoked"})
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, "a new credential is checked at once")
	require.ErrorIs(t, a.VerifyAccess(ctx, s, nil), sandboxapi.ErrRepoAuthFailed, "no credential is checked too")
	require.ErrorIs(t, a.VerifyAccess(ctx, s, &sandbox.Credential{Secret: "revoked"}), sandboxapi.ErrRepoAuthFailed, "failures are not remembered")
	assert.Equal(t, 5, remote.checks)

	now = now.Add(2 * time.Minute)
	require.NoError(t, a.VerifyAccess(ctx, s, good))
	assert.Equal(t, 6, remote.checks, "checked again after the TTL")

	file := sandbox.AuthScope{UserID: "alice", Repo: sandboxapi.RepoIdentity{Host: sandboxapi.FileHost, URL: "file:///srv/r"}}
	require.NoError(t, a.VerifyAccess(ctx, file, nil))
	assert.Equal(t, 6, remote.checks, "file:// repositories are not checked")

	never := &credentials.Access{Remote: remote, TTL: -1}
	require.NoError(t, never.VerifyAccess(ctx, s, good))
	require.NoError(t, never.VerifyAccess(ctx, s, good))
	assert.Equal(t, 8, remote.checks, "a negative TTL checks every time")
}

// TestFileRefusesDuplicateKeys: two entries for one key (which credential
// applies would depend on their order) make the file an error naming the
// key, never the secret; user ids that differ in case are two users.
func TestFileRefusesDuplicateKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds.json")
	f := &credentials.File{Path: path}
	ctx := context.Background()
	write(t, path, `{"users": {"alice": {"github.com": {"secret": "first-SECRET"}}, "alice": {"github.com": {"secret": "second-SECRET"}}}}`)
	_, err := f.Credential(ctx, scope("alice", "github.com"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `duplicate key "users.alice"`)
	assert.NotContains(t, err.Error(), "SECRET")
	write(t, path, `{"hosts": {"github.com": {"secret": "a-SECRET", "Secret": "b-SECRET"}}}`)
	_, err = f.Credential(ctx, scope("bob", "github.com"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `duplicate key "hosts.github.com.Secret"`)

	write(t, path, `{"users": {"alice": {"github.com": {"secret": "lower"}}, "Alice": {"github.com": {"secret": "upper"}}}}`)
	c, err := f.Credential(ctx, scope("Alice", "github.com"))
	require.NoError(t, err)
	assert.Equal(t, "upper", c.Secret)
}
