package repocache

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestMovedRepository: a repository renamed on its host (HTTP 301 from the
// old path to the new one) is followed on the same host with the
// credential (no raw "returned error: 301"), the old name's mirror keeps
// serving from the new location, an acquire by the new name reuses the old
// mirror's objects (hard links: no second clone), and once the old name is
// gone (404) it is RepoNotFound at once. A temporary redirect is followed
// without being recorded; a move to another host, a redirect loop and a
// target that is no repository are RepoNotFound and reach nothing.
func TestMovedRepository(t *testing.T) {
	srv, src, old := httpRepo(t)
	c := newCache(t, nil)
	ctx := context.Background()
	rc, err := c.Ensure(ctx, old, goodCred(), false)
	require.NoError(t, err)

	// Renamed upstream: the directory moves, the old path redirects.
	require.NoError(t, os.Rename(src, srv.RepoDir("team/renamed.git")))
	src = srv.RepoDir("team/renamed.git")
	srv.SetRedirect("team/project.git", "team/renamed.git", http.StatusMovedPermanently)
	want := gittest.Commit(t, src, "after.txt", "after the move\n", "after the move")
	start := time.Now()
	rc2, err := c.Ensure(ctx, old, goodCred(), true)
	require.NoError(t, err, "the move is followed")
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, rc.LocalPath, rc2.LocalPath, "the old name keeps its mirror")
	assert.Equal(t, want, bareGit(t, rc2.LocalPath, "rev-parse", "refs/remotes/origin/trunk"))
	assert.Positive(t, srv.Redirected())
	loc, err := os.ReadFile(filepath.Join(rc2.LocalPath, LocationMarker))
	require.NoError(t, err)
	assert.Equal(t, srv.URL("team/renamed.git"), strings.TrimSpace(string(loc)))

	// The new name: seeded from the old mirror, not cloned again.
	renamed := parse(t, srv.URL("team/renamed.git"))
	rc3, err := c.Ensure(ctx, renamed, goodCred(), false)
	require.NoError(t, err)
	assert.NotEqual(t, rc.LocalPath, rc3.LocalPath)
	assert.Equal(t, want, bareGit(t, rc3.LocalPath, "rev-parse", "refs/remotes/origin/trunk"))
	assert.Equal(t, bareGit(t, rc2.LocalPath, "rev-parse", "refs/tags/v1"), bareGit(t, rc3.LocalPath, "rev-parse", "refs/tags/v1"))
	var files, shared int
	objs := filepath.Join(rc.LocalPath, "objects")
	require.NoError(t, filepath.WalkDir(objs, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(objs, p)
		if d.Type().IsRegular() && !strings.HasPrefix(rel, "info") {
			files++
			a, _ := os.Stat(p)
			if b, err := os.Stat(filepath.Join(rc3.LocalPath, "objects", rel)); err == nil && os.SameFile(a, b) {
				shared++
			}
		}
		return nil
	}))
	require.Positive(t, files)
	assert.Equal(t, files, shared, "every object file of the old mirror is shared (hard links), none fetched again")
	assert.Empty(t, refs(t, rc3.LocalPath, "refs/heads/"), "no agent branch is copied")
	assert.NoFileExists(t, filepath.Join(rc3.LocalPath, LocationMarker), "the new name is where it lives")

	// The old name is gone for good: RepoNotFound, at once.
	srv.RemoveRedirects()
	start = time.Now()
	_, err = c.Ensure(ctx, old, goodCred(), true)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoNotFound), "got %v", err)
	assert.False(t, sandboxapi.KindOf(err).Retryable)
	assert.Less(t, time.Since(start), 10*time.Second)

	// A temporary redirect is followed but not recorded as a move.
	temp := parse(t, srv.URL("team/temp.git"))
	srv.SetRedirect("team/temp.git", "team/renamed.git", http.StatusTemporaryRedirect)
	_, err = c.Ensure(ctx, temp, goodCred(), false)
	require.NoError(t, err)
	_, err = os.Stat(c.moveFile(renamed.Key()))
	require.NoError(t, err, "the 301 recorded earlier is still there")
	b, _ := os.ReadFile(c.moveFile(renamed.Key()))
	assert.Equal(t, old.URL, strings.TrimSpace(string(b)), "the 307 did not overwrite it")

	// Another host: not followed, the credential never goes there.
	other := gittest.NewHTTPServer(t, t.TempDir(), "", "")
	gittest.InitRepo(t, other.RepoDir("team/project.git"), "trunk")
	away := parse(t, srv.URL("team/away.git"))
	srv.SetRedirect("team/away.git", other.URL("team/project.git"), http.StatusMovedPermanently)
	_, err = c.Ensure(ctx, away, goodCred(), false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoNotFound), "got %v", err)
	assert.Contains(t, err.Error(), "another host")
	assert.Zero(t, other.Requests(), "nothing reached the other host")
	assert.NotContains(t, err.Error(), httpPass)

	// A loop, and a target that is no repository.
	srv.SetRedirect("team/loop-a.git", "team/loop-b.git", http.StatusMovedPermanently)
	srv.SetRedirect("team/loop-b.git", "team/loop-a.git", http.StatusMovedPermanently)
	_, err = c.Ensure(ctx, parse(t, srv.URL("team/loop-a.git")), goodCred(), false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoNotFound), "got %v", err)
	assert.Contains(t, err.Error(), "loop")
	srv.SetRedirect("team/odd.git", "elsewhere/page.html", http.StatusFound)
	_, err = c.Ensure(ctx, parse(t, srv.URL("team/odd.git")), goodCred(), false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoNotFound), "got %v", err)
}
