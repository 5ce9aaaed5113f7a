package repocache

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// incompleteUpstreams makes, from one full repository with history, a
// shallow clone and a partial (blobless) clone of it, each served over
// file:// and over smart HTTP.
func incompleteUpstreams(t *testing.T) map[string]sandboxapi.RepoIdentity {
	t.Helper()
	full := gittest.NewRepo(t, "trunk")
	gittest.Commit(t, full, "b.txt", "two\n", "second")
	gittest.Commit(t, full, "c.txt", "three\n", "third")
	gittest.Git(t, full, "config", "uploadpack.allowFilter", "true")
	srv := gittest.NewHTTPServer(t, t.TempDir(), httpUser, httpPass)
	out := map[string]sandboxapi.RepoIdentity{}
	for name, args := range map[string][]string{
		"shallow": {"--depth", "1"},
		"partial": {"--filter=blob:none"},
	} {
		local := t.TempDir() + "/" + name
		gittest.Git(t, full, append(append([]string{"-c", "protocol.file.allow=always", "clone", "--quiet", "--no-local", "--bare"}, args...), gittest.FileURL(full), local)...)
		out[name+"/file"] = parse(t, gittest.FileURL(local))
		served := srv.RepoDir("team/" + name + ".git")
		gittest.Git(t, full, append(append([]string{"-c", "protocol.file.allow=always", "clone", "--quiet", "--no-local", "--bare"}, args...), gittest.FileURL(full), served)...)
		out[name+"/http"] = parse(t, srv.URL("team/"+name+".git"))
	}
	return out
}

// A shallow or partial upstream cannot serve the complete history a repo
// cache holds: cloning from one fails at once with InvalidArgument (not
// retried) saying so, never as a retryable RepoCacheUnavailable with git's
// raw output, and leaves nothing behind.
func TestIncompleteUpstreamIsRefusedAsSuch(t *testing.T) {
	for name, id := range incompleteUpstreams(t) {
		t.Run(name, func(t *testing.T) {
			c := newCache(t, nil)
			_, err := c.Ensure(context.Background(), id, goodCred(), false)
			require.Error(t, err)
			t.Logf("%v", err)
			require.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "%v", err)
			require.False(t, sandboxapi.IsRetryable(err))
			require.Contains(t, err.Error(), "shallow or partial")
			require.Empty(t, leftovers(t, c))
		})
	}
}
