package gittest

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRepo(t *testing.T) {
	t.Parallel()
	dir := NewRepo(t, "trunk")
	assert.Equal(t, "trunk", Git(t, dir, "symbolic-ref", "--short", "HEAD"))
	assert.Equal(t, "2", Git(t, dir, "rev-list", "--count", "HEAD"))
	assert.Equal(t, "tag", Git(t, dir, "cat-file", "-t", "v1"))
	sha := Commit(t, dir, "a/b.txt", "x\n", "third")
	assert.Equal(t, sha, Git(t, dir, "rev-parse", "HEAD"))
	assert.True(t, strings.HasPrefix(FileURL(dir), "file:///"))
}

func TestHTTPServer(t *testing.T) {
	t.Parallel()
	srv := NewHTTPServer(t, t.TempDir(), "alice", "pw-123")
	src := InitRepo(t, srv.RepoDir("team/project.git"), "trunk")
	authURL := strings.Replace(srv.URL("team/project.git"), "http://", "http://alice:pw-123@", 1)

	_, err := TryGit(t.TempDir(), "ls-remote", srv.URL("team/project.git"))
	require.Error(t, err, "no credentials")
	assert.Positive(t, srv.Unauthorized())
	assert.Zero(t, srv.UploadPackRequests())

	clone := filepath.Join(t.TempDir(), "clone")
	Git(t, t.TempDir(), "clone", "--quiet", authURL, clone)
	assert.Equal(t, Git(t, src, "rev-parse", "HEAD"), Git(t, clone, "rev-parse", "HEAD"))
	assert.Positive(t, srv.UploadPackRequests())

	// Push (receive-pack) updates the served non-bare repository.
	pushed := Commit(t, clone, "pushed.txt", "p\n", "pushed")
	Git(t, clone, "push", "--quiet", "origin", "trunk")
	assert.Equal(t, pushed, Git(t, src, "rev-parse", "HEAD"))
	assert.Positive(t, srv.ReceivePackRequests())

	// Hook: an error refuses the request; delay slows it.
	srv.SetHook(func(r *http.Request) error { return errors.New("nope") })
	_, err = TryGit(clone, "fetch", "--quiet", "origin")
	require.Error(t, err)
	srv.SetHook(nil)
	srv.SetDelay(200 * time.Millisecond)
	start := time.Now()
	Git(t, clone, "fetch", "--quiet", "origin")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
}
