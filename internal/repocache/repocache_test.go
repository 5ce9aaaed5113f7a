package repocache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestEnsureClonesFileRepo(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := newCache(t, clk)
	src, id := fileRepo(t)
	ctx := context.Background()

	rc, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)

	bare := c.Path(id)
	require.True(t, filepath.IsAbs(bare))
	assert.Equal(t, filepath.Join(c.Root(), "repos", sandboxapi.FileHost, filepath.FromSlash(id.Owner), "project", ".bare"), bare)
	assert.Equal(t, sandbox.RepoCacheIDFor(c.hostID, id), rc.ID)
	assert.Equal(t, id.FullName(), rc.RepoName)
	assert.Equal(t, gittest.FileURL(src), rc.RepoURL)
	assert.Equal(t, "local", rc.Provider)
	assert.Equal(t, sandboxapi.FileHost, rc.ProviderHost)
	assert.Equal(t, bare, rc.LocalPath)
	assert.Equal(t, "", rc.AuthScopeHash)
	assert.Equal(t, "trunk", rc.DefaultBranch, "default branch comes from the remote's HEAD, never assumed")
	assert.Equal(t, "host-test", rc.HostID)
	assert.True(t, rc.LastFetchedAt.Equal(clk.Now()))
	assert.True(t, rc.LastUsedAt.Equal(clk.Now()))
	assert.True(t, rc.CreatedAt.Equal(clk.Now()))
	assert.True(t, rc.UpdatedAt.Equal(clk.Now()))
	assert.Equal(t, sandbox.RepoCacheReady, rc.State)
	assert.Positive(t, rc.SizeBytes)

	assert.Equal(t, "true", bareGit(t, bare, "rev-parse", "--is-bare-repository"))
	upstreamHead := gittest.Git(t, src, "rev-parse", "HEAD")
	assert.Equal(t, upstreamHead, refs(t, bare, "refs/remotes/origin/")["refs/remotes/origin/trunk"])
	assert.Equal(t, "refs/remotes/origin/trunk", bareGit(t, bare, "symbolic-ref", "refs/remotes/origin/HEAD"))
	assert.Contains(t, refs(t, bare, "refs/tags/"), "refs/tags/v1")
	assert.Empty(t, refs(t, bare, "refs/heads/"), "a fetch never writes refs/heads")
	assert.Equal(t, BranchRefspec, bareGit(t, bare, "config", "--get-all", "remote.origin.fetch"))
	assert.Equal(t, gittest.FileURL(src), bareGit(t, bare, "config", "remote.origin.url"))
	_, err = gittest.TryGit(bare, "config", "remote.origin.mirror")
	assert.Error(t, err, "never a mirror remote")
	assert.FileExists(t, filepath.Join(bare, ReadyMarker))
	assert.NoDirExists(t, filepath.Join(bare, "hooks"), "no template hooks")
	assert.Empty(t, leftovers(t, c))
	assert.FileExists(t, filepath.Join(c.Root(), "repos", sandboxapi.FileHost, filepath.FromSlash(id.Owner), "project.lock"))

	// A second call within the window changes nothing on disk but LastUsedAt.
	clk.Advance(5 * time.Second)
	rc2, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	assert.True(t, rc2.LastFetchedAt.Equal(rc.LastFetchedAt))
	assert.True(t, rc2.CreatedAt.Equal(rc.CreatedAt))
	assert.True(t, rc2.LastUsedAt.Equal(clk.Now()))
}

func TestEnsureHTTPFetchesOncePerWindow(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := newCache(t, clk)
	srv, src, id := httpRepo(t)
	ctx := context.Background()

	rc, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	afterClone := srv.UploadPackRequests()
	require.Positive(t, afterClone)
	assert.Equal(t, "trunk", rc.DefaultBranch)
	sum := sha256.Sum256([]byte(httpUser))
	assert.Equal(t, hex.EncodeToString(sum[:]), rc.AuthScopeHash)
	assert.Equal(t, id.Host, rc.ProviderHost)
	assert.NotContains(t, strings.TrimPrefix(rc.LocalPath, c.Root()), ":", "the port separator is not in the path")
	assert.Contains(t, rc.LocalPath, strings.ReplaceAll(id.Host, ":", "_"))

	// Within the window: no request reaches the server.
	newSHA := gittest.Commit(t, src, "new.txt", "new\n", "upstream moves")
	clk.Advance(DefaultFreshFor - time.Second)
	rc2, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	assert.Equal(t, afterClone, srv.UploadPackRequests(), "no fetch within the freshness window")
	assert.True(t, rc2.LastFetchedAt.Equal(rc.LastFetchedAt))
	assert.NotEqual(t, newSHA, refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"])

	// After the window: one fetch that sees the new upstream commit.
	clk.Advance(2 * time.Second)
	rc3, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	assert.Greater(t, srv.UploadPackRequests(), afterClone)
	assert.True(t, rc3.LastFetchedAt.Equal(clk.Now()))
	assert.Equal(t, newSHA, refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"])
	assert.True(t, rc3.CreatedAt.Equal(rc.CreatedAt), "not recloned")

	// forceFetch fetches inside the window too.
	before := srv.UploadPackRequests()
	newer := gittest.Commit(t, src, "newer.txt", "newer\n", "upstream moves again")
	clk.Advance(time.Second)
	_, err = c.Ensure(ctx, id, goodCred(), true)
	require.NoError(t, err)
	assert.Greater(t, srv.UploadPackRequests(), before)
	assert.Equal(t, newer, refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"])

	// The window holds across processes: a second Cache on the same root reads the marker.
	other := newCacheAt(t, c.Root(), clk)
	before = srv.UploadPackRequests()
	_, err = other.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	assert.Equal(t, before, srv.UploadPackRequests())

	// A refused fetch is an error; the mirror stays intact and ready.
	clk.Advance(time.Hour)
	_, err = c.Ensure(ctx, id, &sandbox.Credential{Username: httpUser, Secret: "revoked-token"}, false)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoAuthFailed), "got %v", err)
	assert.FileExists(t, filepath.Join(rc.LocalPath, ReadyMarker))
	assert.Equal(t, newer, refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"])
	rc4, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	assert.True(t, rc4.CreatedAt.Equal(rc.CreatedAt))
}

func TestFetchNeverTouchesAgentBranchesOrLocalTags(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := newCache(t, clk)
	src, id := fileRepo(t)
	ctx := context.Background()

	gittest.Git(t, src, "branch", "feature")
	gittest.Git(t, src, "branch", "doomed")
	rc, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	bare := rc.LocalPath
	remote := refs(t, bare, "refs/remotes/")
	require.Contains(t, remote, "refs/remotes/origin/feature")
	require.Contains(t, remote, "refs/remotes/origin/doomed")
	oldTrunk := remote["refs/remotes/origin/trunk"]

	// Agent state in the shared mirror: a branch named like an upstream one, an
	// agent branch, and a tag made in a worktree.
	bareGit(t, bare, "update-ref", "refs/heads/agent/x", oldTrunk)
	bareGit(t, bare, "update-ref", "refs/heads/feature", oldTrunk)
	bareGit(t, bare, "tag", "agent-local", oldTrunk)
	oldV1 := refs(t, bare, "refs/tags/")["refs/tags/v1"]

	// Upstream: delete a branch, force-push trunk, move feature, move tag v1,
	// add a tag, and switch the default branch.
	gittest.Git(t, src, "branch", "-D", "doomed")
	gittest.Git(t, src, "reset", "--quiet", "--hard", "HEAD~1")
	forced := gittest.Commit(t, src, "forced.txt", "rewritten\n", "rewritten history")
	gittest.Git(t, src, "branch", "-f", "feature", forced)
	gittest.Git(t, src, "tag", "-f", "--annotate", "--message=moved", "v1", forced)
	gittest.Git(t, src, "tag", "v2", forced)
	gittest.Git(t, src, "checkout", "--quiet", "-b", "develop")

	clk.Advance(time.Second)
	rc, err = c.Ensure(ctx, id, nil, true)
	require.NoError(t, err)

	heads := refs(t, bare, "refs/heads/")
	assert.Equal(t, map[string]string{"refs/heads/agent/x": oldTrunk, "refs/heads/feature": oldTrunk}, heads,
		"agent branches are never moved, pruned or created by a fetch")
	remote = refs(t, bare, "refs/remotes/")
	assert.Equal(t, forced, remote["refs/remotes/origin/trunk"], "force-pushed branch follows upstream")
	assert.Equal(t, forced, remote["refs/remotes/origin/feature"])
	assert.Equal(t, forced, remote["refs/remotes/origin/develop"])
	assert.NotContains(t, remote, "refs/remotes/origin/doomed", "deleted upstream branch pruned from refs/remotes/origin")
	tags := refs(t, bare, "refs/tags/")
	assert.Equal(t, oldTrunk, tags["refs/tags/agent-local"], "tags are not pruned")
	assert.Contains(t, tags, "refs/tags/v2")
	assert.NotEqual(t, oldV1, tags["refs/tags/v1"], "moved upstream tag is updated")
	assert.Equal(t, "develop", rc.DefaultBranch, "origin/HEAD follows the remote's HEAD")
	assert.Equal(t, "refs/remotes/origin/develop", bareGit(t, bare, "symbolic-ref", "refs/remotes/origin/HEAD"))
	// The unreachable old trunk commit is still there for the agent branch.
	bareGit(t, bare, "cat-file", "-e", oldTrunk+"^{commit}")
	bareGit(t, bare, "fsck", "--connectivity-only", "--no-progress")
}

func TestDefaultBranchOfDetachedAndEmptyRemotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("detached HEAD picks the branch at that commit", func(t *testing.T) {
		t.Parallel()
		src, id := fileRepo(t)
		gittest.Git(t, src, "checkout", "--quiet", "--detach", "trunk")
		rc, err := newCache(t, nil).Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.Equal(t, "trunk", rc.DefaultBranch)
	})
	t.Run("empty repository has no default branch", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "up", "team", "empty")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		gittest.Git(t, dir, "init", "--quiet", "--initial-branch=trunk")
		id := parse(t, gittest.FileURL(dir))
		rc, err := newCache(t, nil).Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.Equal(t, "", rc.DefaultBranch)
		assert.Equal(t, sandbox.RepoCacheReady, rc.State)
	})
}

func TestAuthFailuresFailFastAndLeaveNothing(t *testing.T) {
	t.Parallel()
	srv, _, id := httpRepo(t)
	ctx := context.Background()
	for name, cred := range map[string]*sandbox.Credential{
		"wrong password": {Username: httpUser, Secret: "wrong-password-123"},
		"no credential":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCache(t, nil)
			start := time.Now()
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := c.Ensure(ctx, id, cred, false)
			require.Error(t, err)
			assert.True(t, errors.Is(err, sandboxapi.ErrRepoAuthFailed), "got %v", err)
			assert.Less(t, time.Since(start), 5*time.Second, "fails fast, no prompt")
			assert.NotContains(t, err.Error(), "wrong-password-123")
			assert.NoDirExists(t, c.Path(id))
			assert.Empty(t, leftovers(t, c))
		})
	}
	t.Cleanup(func() { assert.Positive(t, srv.Unauthorized()) })
}

func TestNoCredentialIsStoredAnywhere(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := newCache(t, clk)
	srv, src, id := httpRepo(t)
	ctx := context.Background()
	_, err := c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	gittest.Commit(t, src, "x.txt", "x\n", "more")
	clk.Advance(time.Hour)
	_, err = c.Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	require.Positive(t, srv.UploadPackRequests())

	forms := [][]byte{
		[]byte(httpPass),
		[]byte(base64.StdEncoding.EncodeToString([]byte(httpUser + ":" + httpPass))),
	}
	files := 0
	require.NoError(t, filepath.WalkDir(c.Root(), func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if !d.Type().IsRegular() {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, f := range forms {
			assert.False(t, bytes.Contains(b, f), "credential found in %s", p)
		}
		return nil
	}))
	assert.Greater(t, files, 5)
	cfg := bareGit(t, c.Path(id), "config", "--list", "--local")
	assert.NotContains(t, strings.ToLower(cfg), "extraheader")
	assert.NotContains(t, cfg, httpUser)
	assert.NotContains(t, cfg, "credential")
}

func TestConcurrentEnsureClonesOnce(t *testing.T) {
	t.Parallel()
	srv, _, id := httpRepo(t)
	c := newCache(t, nil)
	ctx := context.Background()

	const n = 8
	var wg sync.WaitGroup
	results := make([]sandbox.RepoCache, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = c.Ensure(ctx, id, goodCred(), false)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, results[0].LocalPath, results[i].LocalPath)
		assert.True(t, results[0].CreatedAt.Equal(results[i].CreatedAt), "one clone")
		assert.True(t, results[0].LastFetchedAt.Equal(results[i].LastFetchedAt), "one fetch")
	}
	concurrent := srv.UploadPackRequests()

	// What a single clone costs, measured on a fresh root against the same server.
	_, err := newCache(t, nil).Ensure(ctx, id, goodCred(), false)
	require.NoError(t, err)
	single := srv.UploadPackRequests() - concurrent
	require.Positive(t, single)
	assert.Equal(t, single, concurrent, "8 concurrent Ensure calls cost exactly one clone")
	assert.Empty(t, leftovers(t, c))
}

func TestRecoversStaleStagingAndIncompleteFinalDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("stale staging dir and final dir without marker", func(t *testing.T) {
		t.Parallel()
		c := newCache(t, nil)
		_, id := fileRepo(t)
		// A clone SIGKILLed mid-way: a staging dir with partial contents...
		stale := filepath.Join(c.stagingDir(), sandbox.RepoCacheIDFor(c.hostID, id)+"-dead1234")
		require.NoError(t, os.MkdirAll(filepath.Join(stale, "objects", "pack"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(stale, "objects", "pack", "tmp_pack_x"), []byte("partial"), 0o644))
		// ...another repository's staging dir, which must be left alone...
		otherRepo := filepath.Join(c.stagingDir(), "rc-000000000000000000000000-live")
		require.NoError(t, os.MkdirAll(otherRepo, 0o755))
		// ...and a half-written final dir (no ready marker).
		bare := c.Path(id)
		require.NoError(t, os.MkdirAll(filepath.Join(bare, "objects"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bare, "junk"), []byte("half"), 0o644))

		rc, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.Equal(t, "trunk", rc.DefaultBranch)
		assert.NoDirExists(t, stale)
		assert.DirExists(t, otherRepo)
		assert.NoFileExists(t, filepath.Join(bare, "junk"))
		assert.FileExists(t, filepath.Join(bare, ReadyMarker))
		assert.Equal(t, []string{otherRepo}, leftovers(t, c))
	})

	t.Run("marker present but not a repository", func(t *testing.T) {
		t.Parallel()
		c := newCache(t, nil)
		_, id := fileRepo(t)
		bare := c.Path(id)
		require.NoError(t, os.MkdirAll(bare, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bare, ReadyMarker), []byte("1\n"), 0o644))
		rc, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.Equal(t, "trunk", rc.DefaultBranch)
		assert.Equal(t, "true", bareGit(t, bare, "rev-parse", "--is-bare-repository"))
	})

	t.Run("complete clone whose marker is gone is recloned", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := newCache(t, clk)
		_, id := fileRepo(t)
		rc, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(rc.LocalPath, ReadyMarker)))
		clk.Advance(time.Second)
		rc2, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.True(t, rc2.CreatedAt.Equal(clk.Now()), "recloned")
		assert.Empty(t, leftovers(t, c))
	})

	t.Run("incomplete mirror holding agent branches is kept aside, not deleted", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := newCache(t, clk)
		_, id := fileRepo(t)
		rc, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		tip := refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"]
		bareGit(t, rc.LocalPath, "update-ref", "refs/heads/agent/x", tip)
		bareGit(t, rc.LocalPath, "pack-refs", "--all")
		require.NoError(t, os.Remove(filepath.Join(rc.LocalPath, ReadyMarker)))
		clk.Advance(time.Second)
		rc2, err := c.Ensure(ctx, id, nil, false)
		require.NoError(t, err)
		assert.True(t, rc2.CreatedAt.Equal(clk.Now()), "recloned")
		assert.Empty(t, refs(t, rc2.LocalPath, "refs/heads/"))
		kept, err := filepath.Glob(filepath.Join(c.Root(), "repos", ".broken", sandbox.RepoCacheIDFor(c.hostID, id)+"-*"))
		require.NoError(t, err)
		require.Len(t, kept, 1)
		assert.Equal(t, tip, refs(t, kept[0], "refs/heads/")["refs/heads/agent/x"], "agent work preserved")
		_, err = c.ResolveRef(ctx, sandbox.RepoCache{LocalPath: kept[0]}, "agent/x")
		assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "a kept-aside copy is not a mirror")
	})

	// Checkpoints and backups of workspaces are agent work too, loose or packed.
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("incomplete mirror holding saved workspace states is kept aside (packed=%t)", packed), func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			c := newCache(t, clk)
			_, id := fileRepo(t)
			rc, err := c.Ensure(ctx, id, nil, false)
			require.NoError(t, err)
			tip := refs(t, rc.LocalPath, "refs/remotes/")["refs/remotes/origin/trunk"]
			ref := sandboxapi.CheckpointRef("ws-0123456789abcdef01234567", 1)
			bareGit(t, rc.LocalPath, "update-ref", ref, tip)
			if packed {
				bareGit(t, rc.LocalPath, "pack-refs", "--all")
			}
			require.NoError(t, os.Remove(filepath.Join(rc.LocalPath, ReadyMarker)))
			clk.Advance(time.Second)
			_, err = c.Ensure(ctx, id, nil, false)
			require.NoError(t, err)
			kept, err := filepath.Glob(filepath.Join(c.Root(), "repos", ".broken", sandbox.RepoCacheIDFor(c.hostID, id)+"-*"))
			require.NoError(t, err)
			require.Len(t, kept, 1)
			assert.Equal(t, tip, refs(t, kept[0], "refs/sandbox/")[ref], "checkpoint preserved")
		})
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := newCache(t, clk)
	_, id := fileRepo(t)
	ctx := context.Background()

	require.NoError(t, c.Remove(ctx, id), "missing cache is success")
	rc, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	require.NoError(t, c.Remove(ctx, id))
	assert.NoDirExists(t, rc.LocalPath)
	assert.NoDirExists(t, filepath.Dir(rc.LocalPath), "empty repository dir removed")
	assert.Empty(t, leftovers(t, c))
	require.NoError(t, c.Remove(ctx, id), "idempotent")

	clk.Advance(time.Second)
	rc2, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	assert.True(t, rc2.CreatedAt.Equal(clk.Now()), "recloned after removal")
}

func TestUnreachableRemote(t *testing.T) {
	t.Parallel()
	c := newCache(t, nil)
	id := parse(t, "http://127.0.0.1:1/team/project.git")
	start := time.Now()
	_, err := c.Ensure(context.Background(), id, goodCred(), false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoCacheUnavailable), "got %v", err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.NoDirExists(t, c.Path(id))
	assert.Empty(t, leftovers(t, c))
	assert.Contains(t, c.Path(id), "127.0.0.1_1")
}

func TestInvalidIdentity(t *testing.T) {
	t.Parallel()
	c := newCache(t, nil)
	ctx := context.Background()
	_, id := fileRepo(t)
	bad := id
	bad.Owner = "../../etc"
	assert.Equal(t, "", c.Path(bad))
	_, err := c.Ensure(ctx, bad, nil, false)
	assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "got %v", err)
	assert.True(t, errors.Is(c.Remove(ctx, bad), sandboxapi.ErrInvalidArgument))
	_, err = c.LockRepo(ctx, bad)
	assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument))
	_, err = c.Ensure(ctx, sandboxapi.RepoIdentity{}, nil, false)
	assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument))
}

func TestFileProtocolRefusedByRunner(t *testing.T) {
	t.Parallel()
	_, id := fileRepo(t)
	// A runner without AllowFile refuses file:// even though ParseRepoURL parsed it.
	strict, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	c, err := New(Options{Root: t.TempDir(), Git: strict})
	require.NoError(t, err)
	_, err = c.Ensure(context.Background(), id, nil, false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoCacheUnavailable), "got %v", err)
	assert.NoDirExists(t, c.Path(id))
	assert.Empty(t, leftovers(t, c))
}

// The default branch is read from the symbolic ref's loose file; whatever
// the file holds, the answer is `git symbolic-ref`'s (a target outside
// refs/remotes/origin/, a detached value, no file: git is asked).
func TestDefaultBranchReadsTheSymbolicRefAsGitDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, id := fileRepo(t)
	c := newCache(t, nil)
	_, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	bare := c.Path(id)
	head := gittest.Git(t, src, "rev-parse", "HEAD")
	for _, c2 := range []struct {
		name string
		set  func()
	}{
		{"remote branch", func() { bareGit(t, bare, "symbolic-ref", OriginHEAD, "refs/remotes/origin/trunk") }},
		{"local branch", func() { bareGit(t, bare, "symbolic-ref", OriginHEAD, "refs/heads/agent-x") }},
		{"not symbolic", func() { bareGit(t, bare, "update-ref", "--no-deref", OriginHEAD, head) }},
		{"missing", func() { bareGit(t, bare, "update-ref", "--no-deref", "-d", OriginHEAD) }},
	} {
		name, set := c2.name, c2.set
		set()
		want := ""
		if out, err := exec.Command("git", "--git-dir", bare, "symbolic-ref", "--quiet", OriginHEAD).Output(); err == nil {
			want = strings.TrimPrefix(strings.TrimSpace(string(out)), RemoteRefPrefix)
		}
		assert.Equal(t, want, c.defaultBranch(ctx, bare), name)
	}
}
