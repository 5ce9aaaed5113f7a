package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/storetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Real repositories and real faults, end to end: store outages, moved
// repositories, push rejections, submodules, Git LFS and line endings
// through the real service.

// pgSchema creates a fresh schema in the PostgreSQL test database
// (SANDBOX_TEST_DATABASE_URL, a URL), drops it when t ends, and returns the
// database URL parsed, with search_path set to it. It skips without the
// variable, except under CI=true.
func pgSchema(t *testing.T) *url.URL {
	t.Helper()
	dsn := os.Getenv("SANDBOX_TEST_DATABASE_URL")
	if dsn == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("SANDBOX_TEST_DATABASE_URL is unset under CI=true")
		}
		t.Skip("SANDBOX_TEST_DATABASE_URL is unset: skipping the PostgreSQL outage test")
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err, "SANDBOX_TEST_DATABASE_URL must be a postgres:// URL")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "sce_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	_ = conn.Close(ctx)
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u
}

// TestStoreOutage: PostgreSQL goes away mid-session (the TCP proxy between
// the worker and the database is cut). Operations that need no store —
// read_file, list_dir, search, write_file, exec, status, diff, commit —
// keep working from the row the host remembers; one that needs the store (a
// new workspace) fails, within bounds, with the retryable SandboxUnavailable
// naming no host, port, role or database; once the database is back, it works.
func TestStoreOutage(t *testing.T) {
	db := pgSchema(t)
	proxy := storetest.NewTCPProxy(t, db.Host)
	proxied := *db
	proxied.Host = proxy.Addr()
	h := startHost(t, "pgout", func(c *hostworker.Config) { c.DatabaseURL = proxied.String() })
	upstream := gittest.InitRepo(t, t.TempDir()+"/team/project", "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	repoURL := gittest.FileURL(upstream)
	user := uniq(t, "u")
	ctx := ctxFor(t, 5*time.Minute)
	s, _, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", repoURL))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "before.txt", []byte("before\n"), 0))

	proxy.Cut()
	start := time.Now()
	got, err := s.ReadFile(ctx, "before.txt")
	require.NoError(t, err, "read_file needs no store")
	assert.Equal(t, "before\n", string(got))
	assert.Less(t, time.Since(start), 30*time.Second)
	entries, err := s.ListDir(ctx, "")
	require.NoError(t, err)
	assert.NotEmpty(t, entries)
	found, err := s.Search(ctx, sandboxapi.SearchRequest{Pattern: "before", Literal: true})
	require.NoError(t, err)
	assert.Len(t, found.Matches, 1)
	require.NoError(t, s.WriteFile(ctx, "during.txt", []byte("during\n"), 0))
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "during.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "during\n", string(res.Stdout))
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	d, err := s.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d.Files, "during.txt")
	c, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "written while the store was down"})
	require.NoError(t, err)
	assert.False(t, c.NothingToCommit)
	quick := time.Now()
	_, err = s.ReadFile(ctx, "during.txt")
	require.NoError(t, err)
	assert.Less(t, time.Since(quick), 10*time.Second, "once the store is known down, nothing waits for it")

	start = time.Now()
	_, _, err = h.client.Acquire(ctx, editRequest(user, "p", "c2", repoURL))
	require.Error(t, err, "a new workspace needs the store")
	assert.True(t, errors.Is(err, sandboxapi.ErrRuntimeUnavailable), "got %v", err)
	assert.Less(t, time.Since(start), 2*time.Minute, "bounded")
	for _, detail := range []string{db.Hostname(), db.Port(), proxy.Addr(), db.User.Username(), strings.TrimPrefix(db.Path, "/"), db.Query().Get("search_path"), "user=", "database="} {
		assert.NotContains(t, err.Error(), detail, "the error names no connection detail: %v", err)
	}

	require.NoError(t, proxy.Restore())
	require.Eventually(t, func() bool {
		_, _, err := h.client.Acquire(ctx, editRequest(user, "p", "c2", repoURL))
		return err == nil
	}, 90*time.Second, time.Second, "works again once the database is back")
	got, err = s.ReadFile(ctx, "during.txt")
	require.NoError(t, err)
	assert.Equal(t, "during\n", string(got))
}

// TestPushRejectionReasonReachesTheClient: what the remote says when it
// refuses a push reaches the agent: an upstream branch "agent" created
// after the workspace (receive-pack: "'refs/heads/agent' exists") is
// SandboxConflict naming it, a protected-branch hook's message is
// SandboxCommandRejected quoting it; and with that upstream branch fetched,
// a new conversation is refused at acquire, naming the conflicting ref.
func TestPushRejectionReasonReachesTheClient(t *testing.T) {
	e := newPushEnv(t, "pushreason")
	ctx := ctxFor(t, 4*time.Minute)
	user := uniq(t, "alice")
	e.setCredential(t, user, e.token)
	s, _, err := e.client.Acquire(ctx, editRequest(user, "p", "c1", e.url))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "agent.txt", []byte("from the agent\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: add agent.txt"})
	require.NoError(t, err)

	gittest.Git(t, e.upstream, "branch", "agent")
	_, err = s.Push(ctx, false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrConflict), "got %v", err)
	assert.Contains(t, err.Error(), "'refs/heads/agent' exists")
	assert.NotContains(t, err.Error(), e.token)

	_, _, err = e.client.Acquire(ctx, editRequest(user, "p", "c2", e.url))
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrConflict), "got %v", err)
	assert.Contains(t, err.Error(), "refs/remotes/origin/agent")

	gittest.Git(t, e.upstream, "branch", "-D", "agent")
	hook := filepath.Join(e.upstream, ".git", "hooks", "pre-receive")
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho 'GH006: Protected branch update failed for refs/heads/agent/edits-c1.' >&2\nexit 1\n"), 0o755))
	_, err = s.Push(ctx, false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrCommandRejected), "got %v", err)
	assert.Contains(t, err.Error(), "GH006: Protected branch update failed")
}

// TestMovedRepositoryOnAcquire: a repository renamed on its host (301) is
// followed on acquire, with the credential and no retries; acquiring it by
// its new name reuses the old repo cache's objects; once the old name is
// gone, an acquire by it is RepoNotFound at once.
func TestMovedRepositoryOnAcquire(t *testing.T) {
	srv, oldURL, up := httpRepo(t)
	h := startHost(t, "moved", func(c *hostworker.Config) { c.FetchFreshness = time.Nanosecond })
	ctx := ctxFor(t, 4*time.Minute)
	user := uniq(t, "u")
	_, _, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", oldURL))
	require.NoError(t, err)

	require.NoError(t, os.Rename(up, srv.RepoDir("team/renamed.git")))
	up = srv.RepoDir("team/renamed.git")
	srv.SetRedirect("team/project.git", "team/renamed.git", 301)
	want := gittest.Commit(t, up, "moved.txt", "after the move\n", "after the move")
	start := time.Now()
	s2, hd2, err := h.client.Acquire(ctx, editRequest(user, "p", "c2", oldURL))
	require.NoError(t, err, "the move is followed")
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.Equal(t, want, hd2.BaseCommit, "fetched from the new location")
	got, err := s2.ReadFile(ctx, "moved.txt")
	require.NoError(t, err)
	assert.Equal(t, "after the move\n", string(got))
	require.NotNil(t, hd2.BaseFetchedAt)

	newURL := srv.URL("team/renamed.git")
	s3, hd3, err := h.client.Acquire(ctx, editRequest(user, "p", "c3", newURL))
	require.NoError(t, err)
	assert.Equal(t, want, hd3.BaseCommit)
	_, err = s3.ReadFile(ctx, "moved.txt")
	require.NoError(t, err)
	oldBare := filepath.Join(filepath.Dir(filepath.Dir(hd2.LocalPath)), ".bare")
	newBare := filepath.Join(filepath.Dir(filepath.Dir(hd3.LocalPath)), ".bare")
	require.NotEqual(t, oldBare, newBare)
	shared := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(oldBare, "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(oldBare, p)
			a, _ := os.Stat(p)
			if b, err := os.Stat(filepath.Join(newBare, rel)); err == nil && os.SameFile(a, b) {
				shared++
			}
		}
		return nil
	}))
	assert.Positive(t, shared, "the new name's cache shares the old one's object files: no second clone")

	srv.RemoveRedirects()
	start = time.Now()
	_, _, err = h.client.Acquire(ctx, editRequest(user, "p", "c4", oldURL))
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoNotFound), "got %v", err)
	assert.Less(t, time.Since(start), 10*time.Second, "a permanent answer is not retried")
}

// TestFreshRefIsFetched: a branch pushed upstream right after the repo
// cache fetched (inside SANDBOX_FETCH_FRESHNESS) is found by an acquire
// that names it, and the handle says when its base was fetched.
func TestFreshRefIsFetched(t *testing.T) {
	h := startHost(t, "fresh")
	up := gittest.InitRepo(t, t.TempDir()+"/team/project", "trunk")
	url := gittest.FileURL(up)
	ctx := ctxFor(t, 2*time.Minute)
	user := uniq(t, "u")
	before := time.Now()
	_, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", url))
	require.NoError(t, err)
	require.NotNil(t, hd.BaseFetchedAt)
	assert.False(t, hd.BaseFetchedAt.Before(before.Add(-time.Second)), "fetched for this acquire")

	gittest.Git(t, up, "checkout", "-q", "-b", "feature")
	want := gittest.Commit(t, up, "f.txt", "feature\n", "feature work")
	req := editRequest(user, "p", "c2", url)
	req.BaseRef = "feature"
	_, hd2, err := h.client.Acquire(ctx, req)
	require.NoError(t, err, "a ref the cache lacks is fetched before RefNotFound")
	assert.Equal(t, want, hd2.BaseCommit)
	require.NotNil(t, hd2.BaseFetchedAt)
	assert.True(t, hd2.BaseFetchedAt.After(*hd.BaseFetchedAt))

	req.ConversationID, req.BaseRef = "c3", "no-such-branch"
	_, _, err = h.client.Acquire(ctx, req)
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandboxapi.ErrRefNotFound), "got %v", err)
}

// TestRepositoryContent: Git LFS content (a 50 MiB file behind an
// authenticated batch API), a submodule (relative URL, same host and
// credential) and a CRLF file under `*.txt text` come out of acquire as a
// user expects: the real bytes, a populated submodule that git inside the
// runtime can read, and a clean workspace (status, diff, commit); the
// credential is in no file of the data root. With SANDBOX_SUBMODULES=off
// and SANDBOX_LFS=off, the submodule is reported uninitialised (handle and
// status) and the pointer is flagged (status, read_file, list_dir).
func TestRepositoryContent(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git-lfs is required under CI=true")
		}
		t.Skip("git-lfs is not installed")
	}
	srv, url, up := httpRepo(t)
	lfs := srv.EnableLFS()
	big := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), (50<<20)/18)
	dep := gittest.InitRepo(t, srv.RepoDir("team/dep.git"), "trunk")
	depCommit := gittest.Commit(t, dep, "dep.go", "package dep\n", "dep")
	gittest.Commit(t, up, "win.txt", "one\r\ntwo\r\n", "a CRLF file")
	gittest.Commit(t, up, ".gitattributes", "*.txt text\n*.bin filter=lfs diff=lfs merge=lfs -text\n", "attributes")
	gittest.Commit(t, up, "assets/big.bin", lfs.Add(big), "a large file in LFS")
	gittest.Commit(t, up, ".gitmodules", "[submodule \"dep\"]\n\tpath = lib/dep\n\turl = ../dep.git\n", "submodule")
	gittest.Git(t, up, "update-index", "--add", "--cacheinfo", "160000,"+depCommit+",lib/dep")
	gittest.Git(t, up, "commit", "-q", "-m", "add lib/dep")

	h := startHost(t, "content")
	ctx := ctxFor(t, 5*time.Minute)
	user := uniq(t, "u")
	s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", url))
	require.NoError(t, err)
	assert.Empty(t, hd.UninitializedSubmodules)
	entries, err := s.ListDir(ctx, "assets")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, int64(len(big)), entries[0].Size, "the content, not the pointer")
	assert.False(t, entries[0].LFSPointer)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "sha256sum assets/big.bin | cut -c1-64; cat lib/dep/dep.go; git -C lib/dep rev-parse HEAD"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	sum := sha256.Sum256(big)
	assert.Equal(t, hex.EncodeToString(sum[:])+"\npackage dep\n"+depCommit+"\n", string(res.Stdout))
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "an untouched workspace is clean: %v", st.Files)
	assert.Empty(t, st.LFSPointers)
	assert.Empty(t, st.UninitializedSubmodules)
	d, err := s.Diff(ctx)
	require.NoError(t, err)
	assert.Empty(t, d.Files)
	c, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "nothing"})
	require.NoError(t, err)
	assert.True(t, c.NothingToCommit)
	assert.Zero(t, lfs.Invalid(), lfs.LastInvalid())
	secret := ""
	id, _ := sandboxapi.ParseRepoURL(url, sandboxapi.URLPolicy{AllowHTTP: true})
	if cred, _ := creds.Credential(ctx, sandbox.AuthScope{Repo: id}); cred != nil {
		secret = cred.Secret
	}
	require.NotEmpty(t, secret)
	require.NoError(t, filepath.WalkDir(h.Config.DataDir, func(p string, de os.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() && !strings.Contains(p, "/objects/") && !strings.HasSuffix(p, ".db") && !strings.HasSuffix(p, "-wal") {
			b, _ := os.ReadFile(p)
			assert.NotContains(t, string(b), secret, "the credential is written nowhere: %s", p)
		}
		return nil
	}))

	off := startHost(t, "content-off", func(c *hostworker.Config) {
		c.Content.Submodules = "off"
		c.Content.LFS.Disabled = true
	})
	s2, hd2, err := off.client.Acquire(ctx, editRequest(user, "p", "c2", url))
	require.NoError(t, err)
	assert.Equal(t, []string{"lib/dep"}, hd2.UninitializedSubmodules)
	st, err = s2.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"lib/dep"}, st.UninitializedSubmodules)
	assert.Equal(t, []string{"assets/big.bin"}, st.LFSPointers)
	assert.False(t, st.Dirty)
	entries, err = s2.ListDir(ctx, "assets")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.True(t, entries[0].LFSPointer)
	r, err := s2.ReadFileResult(ctx, "assets/big.bin")
	require.NoError(t, err)
	assert.True(t, r.LFSPointer)
	assert.Contains(t, string(r.Content), "oid sha256:"+hex.EncodeToString(sum[:]))
}

// TestDiffThroughTheServiceIsByteExact: the patch of a workspace holding
// Latin-1 text, CRLF lines, no trailing newline and a binary file, as a
// client receives it through Temporal, applies with git apply to the exact
// bytes.
func TestDiffThroughTheServiceIsByteExact(t *testing.T) {
	h := startHost(t, "bytes")
	s, hd, up := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	files := map[string][]byte{
		"latin1.txt": []byte("caf\xe9\n"), "crlf.txt": []byte("a\r\nb\r\n"), "nonl.txt": []byte("end"),
		"bin.dat": {0, 1, 2, 0xff, '\n', 0}, "README.md": []byte("hello\n\xe9t\xe9\n"),
	}
	for p, b := range files {
		require.NoError(t, s.WriteFile(ctx, p, b, 0))
	}
	d, err := s.Diff(ctx)
	require.NoError(t, err)
	check := filepath.Join(t.TempDir(), "check")
	gittest.Git(t, filepath.Dir(check), "clone", "-q", up, check)
	gittest.Git(t, check, "checkout", "-q", "--detach", hd.BaseCommit)
	pf := filepath.Join(t.TempDir(), "p.diff")
	require.NoError(t, os.WriteFile(pf, []byte(d.Patch), 0o644))
	gittest.Git(t, check, "apply", "--binary", pf)
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(check, p))
		require.NoError(t, err)
		assert.Equal(t, want, got, p)
	}
}

// TestRefreshSeesAMoveInsideTheFreshnessWindow: inside the repo cache's
// freshness window an acquire is served from the cache as last fetched
// (the documented bound, base_fetched_at says how old), even right after
// the default branch was renamed away; `refresh` fetches whatever the
// window, for the default branch (renamed: its new name is followed) and
// for a named branch alike.
func TestRefreshSeesAMoveInsideTheFreshnessWindow(t *testing.T) {
	h := startHost(t, "window", func(c *hostworker.Config) { c.FetchFreshness = time.Hour })
	up := gittest.InitRepo(t, t.TempDir()+"/team/project", "trunk")
	gittest.Git(t, up, "branch", "side")
	url := gittest.FileURL(up)
	ctx := ctxFor(t, 2*time.Minute)
	user := uniq(t, "u")
	_, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "c1", url))
	require.NoError(t, err)

	// The default branch is renamed, with a new commit, a moment after the fetch.
	gittest.Git(t, up, "branch", "-m", "trunk", "main")
	tip := gittest.Commit(t, up, "n.txt", "new\n", "after the rename")
	_, stale, err := h.client.Acquire(ctx, editRequest(user, "p", "c2", url))
	require.NoError(t, err)
	assert.Equal(t, hd.BaseCommit, stale.BaseCommit, "inside the window: the tip as last fetched")
	require.NotNil(t, stale.BaseFetchedAt)
	assert.Equal(t, *hd.BaseFetchedAt, *stale.BaseFetchedAt, "and base_fetched_at says so")
	fresh := editRequest(user, "p", "c2b", url)
	fresh.Refresh = true
	_, hd2, err := h.client.Acquire(ctx, fresh)
	require.NoError(t, err)
	assert.Equal(t, tip, hd2.BaseCommit, "refresh: the renamed default branch's tip")
	require.NotNil(t, hd2.BaseFetchedAt)
	assert.True(t, hd2.BaseFetchedAt.After(*hd.BaseFetchedAt), "fetched for this acquire")

	// A named branch moves; inside the window it is served as last fetched
	// unless the acquire asks for refresh.
	gittest.Git(t, up, "checkout", "-q", "side")
	sideTip := gittest.Commit(t, up, "s.txt", "side\n", "side work")
	gittest.Git(t, up, "checkout", "-q", "main")
	req := editRequest(user, "p", "c3", url)
	req.BaseRef = "side"
	_, hd3, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	assert.NotEqual(t, sideTip, hd3.BaseCommit, "inside the window without refresh: the tip as last fetched")
	req.ConversationID, req.Refresh = "c4", true
	_, hd4, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, sideTip, hd4.BaseCommit, "refresh fetches now")
}
