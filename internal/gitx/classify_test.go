package gitx_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// kindOf runs one git call and classifies its failure with a fallback no
// row of the table uses, so that a failure that falls through shows.
func classified(t *testing.T, err error) error {
	t.Helper()
	require.Error(t, err)
	return gitx.Classify(err, "op", sandboxapi.ErrWorkspaceUnavailable)
}

// Every answer a remote can give over HTTP maps to the kind naming its
// cause, retryable only where sending the call again can help: a 400 is
// the remote refusing the request (not a missing repository), a 429 its
// rate limit, a 5xx a passing server failure; 401/403/404/410 keep their
// kinds. Checked for a push and for a fetch, with real git against a
// served repository.
func TestClassifyHTTPStatuses(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	cases := []struct {
		code      int
		kind      *sandboxapi.Kind
		retryable bool
	}{
		{http.StatusBadRequest, sandboxapi.ErrCommandRejected, false},
		{http.StatusUnauthorized, sandboxapi.ErrRepoAuthFailed, false},
		{http.StatusForbidden, sandboxapi.ErrRepoAuthFailed, false},
		{http.StatusNotFound, sandboxapi.ErrRepoNotFound, false},
		{http.StatusGone, sandboxapi.ErrRepoNotFound, false},
		{http.StatusTooManyRequests, sandboxapi.ErrRateLimited, true},
		{http.StatusInternalServerError, sandboxapi.ErrRepoCacheUnavailable, true},
		{http.StatusBadGateway, sandboxapi.ErrRepoCacheUnavailable, true},
		{http.StatusServiceUnavailable, sandboxapi.ErrRepoCacheUnavailable, true},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.code), func(t *testing.T) {
			f.srv.SetHook(func(r *http.Request) error { return gittest.StatusError{Code: c.code, Text: "refused"} })
			defer f.srv.SetHook(nil)
			_, err := f.remote.Push(ctx, f.spec(), f.cred)
			require.Error(t, err)
			require.Equal(t, c.kind, sandboxapi.KindOf(err), "push: %v", err)
			require.Equal(t, c.retryable, sandboxapi.KindOf(err).Retryable)

			_, err = f.remote.Git.Run(ctx, gitx.Call{Dir: f.bare, Cred: f.cred, RemoteURL: f.repo.URL,
				Args: []string{"fetch", "--quiet", "--end-of-options", f.repo.URL, "+refs/heads/*:refs/remotes/x/*"}})
			err = classified(t, err)
			require.Equal(t, c.kind, sandboxapi.KindOf(err), "fetch: %v", err)
		})
	}
}

// A repository holding a path the host's filesystem cannot create (a name
// over 255 bytes) fails its checkout as InvalidWorkspacePath naming the
// path, never as the fallback ("host down") with git's raw "exit 128".
// Neighbours: a path git refuses to check out on this host (an NTFS alias
// under core.protectNTFS) is InvalidWorkspacePath too, and a path that is
// not in the commit named is FileNotFound.
func TestClassifyPathsTheHostCannotHold(t *testing.T) {
	git, err := gitx.New(gitx.Options{AllowFile: true, HomeDir: t.TempDir()})
	require.NoError(t, err)
	ctx := context.Background()
	src := gittest.NewRepo(t, "main")
	blob := strings.TrimSpace(gittest.Git(t, src, "rev-parse", "HEAD:README.md"))
	mkCommit := func(name string) string {
		out, err := git.Run(ctx, gitx.Call{Dir: src, Stdin: strings.NewReader("100644 blob " + blob + "\t" + name + "\n"), Args: []string{"mktree"}})
		require.NoError(t, err)
		return gittest.Git(t, src, "commit-tree", strings.TrimSpace(string(out)), "-m", "odd path")
	}
	long := strings.Repeat("x", 300)
	for name, tc := range map[string]struct {
		path string
		kind *sandboxapi.Kind
	}{
		"name too long": {long, sandboxapi.ErrInvalidWorkspacePath},
		"ntfs alias":    {"git~1", sandboxapi.ErrInvalidWorkspacePath},
	} {
		t.Run(name, func(t *testing.T) {
			commit := mkCommit(tc.path)
			dir := filepath.Join(t.TempDir(), "wt")
			_, err := git.Run(ctx, gitx.Call{Dir: src, Args: []string{"worktree", "add", "--quiet", "--detach", "--end-of-options", dir, commit}})
			err = classified(t, err)
			require.Equal(t, tc.kind, sandboxapi.KindOf(err), "%v", err)
			require.NotContains(t, err.Error(), "exit 128")
			require.Less(t, len(err.Error()), 1200)
		})
	}
	_, err = git.Run(ctx, gitx.Call{Dir: src, Args: []string{"show", "HEAD:no/such/file"}})
	err = classified(t, err)
	require.True(t, errors.Is(err, sandboxapi.ErrFileNotFound), "%v", err)
}

// A full disk is ErrInsufficientDisk whichever way git words it: a large
// blob streamed into a pack says "Out of diskspace". Real git, a bare
// repository on a 2 MiB tmpfs.
func TestClassifyAFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("no tmpfs mount here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	ctx := context.Background()
	bare := filepath.Join(dir, "r.git")
	_, err = git.Run(ctx, gitx.Call{Dir: dir, Args: []string{"init", "-q", "--bare", bare}})
	require.NoError(t, err)
	big := filepath.Join(t.TempDir(), "big.bin")
	noise := make([]byte, 5<<20) // does not compress
	_, _ = rand.Read(noise)
	require.NoError(t, os.WriteFile(big, noise, 0o644))
	for name, args := range map[string][]string{
		"streamed into a pack": {"-c", "core.bigFileThreshold=1m", "hash-object", "-w", big},
		"a loose object":       {"hash-object", "-w", big},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := git.Run(ctx, gitx.Call{Dir: bare, Args: args})
			require.ErrorIs(t, classified(t, err), sandboxapi.ErrInsufficientDisk, "%v", err)
		})
	}
}
