package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/repocache"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// needGitLFS skips without git-lfs, except under CI=true (.ci/run installs it).
func needGitLFS(t *testing.T) {
	t.Helper()
	if err := exec.Command("git-lfs", "version").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git-lfs is required under CI=true: %v", err)
		}
		t.Skipf("git-lfs is not installed: %v", err)
	}
}

// lfsFixture serves an upstream using Git LFS over smart HTTP with basic
// auth and an LFS batch API (gittest.LFS), cloned into a real repo cache.
type lfsFixture struct {
	srv     *gittest.Server
	lfs     *gittest.LFS
	up      string
	cache   *repocache.Cache
	cred    *sandbox.Credential
	repo    sandboxapi.RepoIdentity
	content []byte
	m       *Manager
}

func newLFSFixture(t *testing.T, opts LFSOptions) *lfsFixture {
	t.Helper()
	needGitLFS(t)
	f := &lfsFixture{cred: &sandbox.Credential{Username: "agent", Secret: "lfs-s3cret-" + strings.ReplaceAll(t.Name(), "/", "-")}}
	f.srv = gittest.NewHTTPServer(t, t.TempDir(), f.cred.Username, f.cred.Secret)
	f.lfs = f.srv.EnableLFS()
	f.up = gittest.InitRepo(t, f.srv.RepoDir("team/assets.git"), "main")
	f.content = bytes.Repeat([]byte("large binary payload \x00\xff\n"), (8<<20)/24)
	gittest.Commit(t, f.up, ".gitattributes", "*.bin filter=lfs diff=lfs merge=lfs -text\n", "track *.bin with LFS")
	gittest.Commit(t, f.up, "data/big.bin", f.lfs.Add(f.content), "add big.bin")
	gittest.Commit(t, f.up, "missing.bin", "version https://git-lfs.github.com/spec/v1\noid sha256:"+strings.Repeat("ab", 32)+"\nsize 12\n", "a pointer whose object the server lacks")
	var err error
	f.repo, err = sandboxapi.ParseRepoURL(f.srv.URL("team/assets.git"), sandboxapi.URLPolicy{AllowHTTP: true})
	require.NoError(t, err)
	git, err := gitx.New(gitx.Options{AllowHTTP: true, HomeDir: t.TempDir()})
	require.NoError(t, err)
	f.cache, err = repocache.New(repocache.Options{Root: t.TempDir(), Git: git, HostID: "h1"})
	require.NoError(t, err)
	f.m, err = New(Options{Git: git, Locker: f.cache, HostID: "h1", LFS: opts, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	return f
}

func (f *lfsFixture) acquire(t *testing.T, conv string) sandboxapi.Workspace {
	t.Helper()
	ctx := context.Background()
	rc, err := f.cache.Ensure(ctx, f.repo, f.cred, false)
	require.NoError(t, err)
	ws, err := f.m.Ensure(ctx, rc, sandboxapi.WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: f.repo.URL, Mode: sandboxapi.ModeEdit, ConversationID: conv}, nil)
	require.NoError(t, err)
	return ws
}

// TestLFSContentIsFetched: a workspace of a repository using Git LFS gets
// the content (the real git-lfs client against the server's batch API,
// with the per-call credential, which is never written anywhere), verified,
// into the repo cache's LFS store, so a second workspace downloads nothing;
// the workspace is clean (checkout baseline) in status, diff, commit and
// eviction; a pointer whose object cannot be had stays, reported.
func TestLFSContentIsFetched(t *testing.T) {
	f := newLFSFixture(t, LFSOptions{})
	ctx := context.Background()
	ws := f.acquire(t, "c1")
	left, err := f.m.FetchLFS(ctx, ws, f.repo, f.cred)
	require.NoError(t, err)
	assert.Equal(t, []string{"missing.bin"}, left, "only the pointer whose object is missing remains")
	assert.Zero(t, f.lfs.Invalid(), "every request followed the specification: %s", f.lfs.LastInvalid())
	assert.Positive(t, f.lfs.BatchRequests())
	assert.Equal(t, int64(1), f.lfs.Downloads())
	got, err := os.ReadFile(filepath.Join(ws.LocalPath, "data", "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, sha256.Sum256(f.content), sha256.Sum256(got), "the content, byte for byte")

	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "status: %v", st.Files)
	ptrs, err := f.m.LFSPointers(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"missing.bin"}, ptrs)
	d, err := f.m.Diff(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, d.Files)
	c, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "nothing"})
	require.NoError(t, err)
	assert.True(t, c.NothingToCommit, "the fetched content is never committed over its pointer")
	bk, err := NewBackups(f.m, t.TempDir())
	require.NoError(t, err)
	un, err := bk.UnsavedWork(ctx, ws)
	require.NoError(t, err)
	assert.False(t, un.Any())

	// A dirty workspace's backup saves the change, not the LFS content.
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "notes.txt"), []byte("agent notes\n"), 0o644))
	man, err := bk.Backup(ctx, ws)
	require.NoError(t, err)
	assert.Less(t, man.PatchBytes, int64(4096), "the patch holds notes.txt only")
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "notes.txt")))

	// The store is the repo cache's: a second workspace downloads nothing.
	ws2 := f.acquire(t, "c2")
	_, err = f.m.FetchLFS(ctx, ws2, f.repo, f.cred)
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.lfs.Downloads())
	got2, err := os.ReadFile(filepath.Join(ws2.LocalPath, "data", "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, len(f.content), len(got2))

	// The credential is in no file of the data root.
	require.NoError(t, filepath.WalkDir(f.cache.Root(), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/lfs/objects/") && !strings.Contains(p, "/objects/") {
			b, _ := os.ReadFile(p)
			assert.NotContains(t, string(b), f.cred.Secret, p)
		}
		return nil
	}))
}

// TestLFSNeverPromptsOrHangs: a wrong credential, a server that does not
// answer, and the policy off all leave the pointers, reported, within the
// bound; nothing prompts.
func TestLFSNeverPromptsOrHangs(t *testing.T) {
	f := newLFSFixture(t, LFSOptions{Timeout: 3 * time.Second})
	ctx := context.Background()
	ws := f.acquire(t, "c1")
	start := time.Now()
	left, err := f.m.FetchLFS(ctx, ws, f.repo, &sandbox.Credential{Username: "agent", Secret: "wrong"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"data/big.bin", "missing.bin"}, left)
	assert.Less(t, time.Since(start), 30*time.Second)

	f.srv.SetHook(func(r *http.Request) error {
		if strings.Contains(r.URL.Path, "/info/lfs/") {
			// Never answers (until the client goes: reading the body lets
			// the server notice, or until the test is long over).
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return errors.New("no answer")
		}
		return nil
	})
	start = time.Now()
	left, err = f.m.FetchLFS(ctx, ws, f.repo, f.cred)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"data/big.bin", "missing.bin"}, left)
	assert.Less(t, time.Since(start), 30*time.Second, "bounded by LFSOptions.Timeout")
	f.srv.SetHook(nil)

	off := newLFSFixture(t, LFSOptions{Disabled: true})
	ws3 := off.acquire(t, "c1")
	left, err = off.m.FetchLFS(ctx, ws3, off.repo, off.cred)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"data/big.bin", "missing.bin"}, left)
	assert.Zero(t, off.lfs.BatchRequests())
	st, err := off.m.Status(ctx, ws3)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "pointers are what is committed: clean")
}
