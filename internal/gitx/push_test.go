package gitx_test

import (
	"context"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

const pushBranch = "agent/edits-c1"

type pushFixture struct {
	srv      *gittest.Server
	upstream string // the served (non-bare) repository
	bare     string // the local "repo cache"
	repo     sandboxapi.RepoIdentity
	cred     *sandbox.Credential
	remote   *gitx.Remote
}

// newPushFixture serves an upstream over smart HTTP with basic auth and makes
// a local bare clone holding pushBranch one commit ahead of main.
func newPushFixture(t *testing.T) *pushFixture {
	t.Helper()
	token := "ghp_t+k/en=" + strings.ReplaceAll(t.Name(), "/", "-")
	srv := gittest.NewHTTPServer(t, t.TempDir(), "x-access-token", token)
	upstream := gittest.InitRepo(t, srv.RepoDir("team/project.git"), "main")
	bare := filepath.Join(t.TempDir(), ".bare")
	gittest.Git(t, filepath.Dir(bare), "clone", "--quiet", "--bare", upstream, bare)
	commitOn(t, bare, pushBranch, "main", "agent change 1")
	repo, err := sandboxapi.ParseRepoURL(srv.URL("team/project.git"), sandboxapi.URLPolicy{AllowHTTP: true})
	require.NoError(t, err)
	git, err := gitx.New(gitx.Options{AllowHTTP: true, AllowFile: true, HomeDir: t.TempDir()})
	require.NoError(t, err)
	return &pushFixture{srv: srv, upstream: upstream, bare: bare, repo: repo,
		cred: &sandbox.Credential{Username: "x-access-token", Secret: token}, remote: &gitx.Remote{Git: git}}
}

// commitOn makes an empty-tree-preserving commit on top of parent (a ref or
// commit) and points refs/heads/<branch> at it; it returns the commit.
func commitOn(t *testing.T, dir, branch, parent, msg string) string {
	t.Helper()
	tree := gittest.Git(t, dir, "rev-parse", parent+"^{tree}")
	sha := gittest.Git(t, dir, "commit-tree", tree, "-p", parent, "-m", msg)
	gittest.Git(t, dir, "update-ref", "refs/heads/"+branch, sha)
	return sha
}

func (f *pushFixture) spec() sandbox.PushSpec {
	return sandbox.PushSpec{GitDir: f.bare, Repo: f.repo, Branch: pushBranch, RecordRef: sandbox.PushedRef("ws-0123456789abcdef01234567")}
}

// secretForms are every spelling of the token that must never leak.
func (f *pushFixture) secretForms() []string {
	s := f.cred.Secret
	return []string{s, url.QueryEscape(s), url.PathEscape(s),
		base64.StdEncoding.EncodeToString([]byte("x-access-token:" + s)), base64.StdEncoding.EncodeToString([]byte(s))}
}

func (f *pushFixture) assertNoSecret(t *testing.T, where, text string) {
	t.Helper()
	for _, form := range f.secretForms() {
		assert.NotContains(t, text, form, "%s contains the token", where)
	}
}

func TestPushCreatesFastForwardsAndRecords(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	local := gittest.Git(t, f.bare, "rev-parse", "refs/heads/"+pushBranch)

	res, err := f.remote.Push(ctx, f.spec(), f.cred)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushResult{Branch: pushBranch, Commit: local, Status: sandboxapi.PushCreated}, res)
	assert.Equal(t, local, gittest.Git(t, f.upstream, "rev-parse", "refs/heads/"+pushBranch), "the remote has the branch")
	assert.Equal(t, local, gittest.Git(t, f.bare, "rev-parse", f.spec().RecordRef), "the pushed commit is recorded")

	next := commitOn(t, f.bare, pushBranch, local, "agent change 2")
	res, err = f.remote.Push(ctx, f.spec(), f.cred)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushFastForward, res.Status)
	assert.Equal(t, local, res.PreviousRemoteCommit, "full commit id of the previous remote tip")
	assert.Equal(t, next, res.Commit)

	res, err = f.remote.Push(ctx, f.spec(), f.cred)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushUpToDate, res.Status)

	tip, err := f.remote.BranchTip(ctx, f.repo, f.cred, pushBranch)
	require.NoError(t, err)
	assert.Equal(t, next, tip)
	none, err := f.remote.BranchTip(ctx, f.repo, f.cred, "agent/none")
	require.NoError(t, err)
	assert.Empty(t, none)
	require.NoError(t, f.remote.CheckAccess(ctx, f.repo, f.cred))

	cfg, err := os.ReadFile(filepath.Join(f.bare, "config"))
	require.NoError(t, err)
	f.assertNoSecret(t, "the repository config", string(cfg))
	assert.NotContains(t, string(cfg), f.srv.BaseURL(), "no remote was configured for the push")
	assert.Positive(t, f.srv.ReceivePackRequests())
}

func TestPushDivergedNeedsAFreshLease(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	first, err := f.remote.Push(ctx, f.spec(), f.cred)
	require.NoError(t, err)

	// Someone else moves the remote branch; the workspace rewrites its own.
	theirs := commitOn(t, f.upstream, pushBranch, first.Commit, "someone else")
	mine := commitOn(t, f.bare, pushBranch, "main", "rewritten agent change")

	_, err = f.remote.Push(ctx, f.spec(), f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "force_with_lease")

	lease := first.Commit // what this workspace pushed last: stale now
	spec := f.spec()
	spec.Lease = &lease
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "lease")
	assert.Equal(t, theirs, gittest.Git(t, f.upstream, "rev-parse", "refs/heads/"+pushBranch), "nothing was overwritten")

	lease = theirs
	res, err := f.remote.Push(ctx, spec, f.cred)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushForced, res.Status)
	assert.Equal(t, theirs, res.PreviousRemoteCommit)
	assert.Equal(t, mine, gittest.Git(t, f.upstream, "rev-parse", "refs/heads/"+pushBranch))

	// A lease of "" means "the branch must not exist".
	empty := ""
	spec.Branch = "agent/other"
	commitOn(t, f.upstream, "agent/other", "main", "their other")
	commitOn(t, f.bare, "agent/other", "main", "other")
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "without a lease the diverged branch is refused")
	spec.Lease = &empty
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrConflict, "an empty lease refuses an existing branch")
}

func TestRemoteRefusesWrongOrMissingCredentialsQuickly(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	wrong := &sandbox.Credential{Username: "x-access-token", Secret: f.cred.Secret + "-revoked"}
	for name, cred := range map[string]*sandbox.Credential{"wrong": wrong, "none": nil} {
		start := time.Now()
		_, err := f.remote.Push(ctx, f.spec(), cred)
		require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed, name)
		err2 := f.remote.CheckAccess(ctx, f.repo, cred)
		require.ErrorIs(t, err2, sandboxapi.ErrRepoAuthFailed, name)
		_, err3 := f.remote.BranchTip(ctx, f.repo, cred, pushBranch)
		require.ErrorIs(t, err3, sandboxapi.ErrRepoAuthFailed, name)
		assert.Less(t, time.Since(start), 15*time.Second, "%s: no prompt, no hang", name)
		for _, e := range []error{err, err2, err3} {
			f.assertNoSecret(t, "the error", e.Error())
			if cred != nil {
				assert.NotContains(t, e.Error(), cred.Secret)
			}
		}
	}
	assert.Zero(t, f.srv.ReceivePackRequests(), "nothing was pushed")
	_, err := os.Stat(filepath.Join(f.bare, "refs", "sandbox"))
	assert.True(t, os.IsNotExist(err), "nothing recorded after a failed push")
}

func TestPushRefusesRedirectingRepositoryConfig(t *testing.T) {
	for _, kv := range [][2]string{
		{"url.http://127.0.0.1:1/.pushInsteadOf", "http://"},
		{"url.http://127.0.0.1:1/.insteadOf", "http://"},
		{"http.proxy", "http://127.0.0.1:1"},
		{"http.sslVerify", "false"},
		{"credential.helper", "store"},
		{"include.path", "extra"}, // an included file is read too
	} {
		t.Run(kv[0], func(t *testing.T) {
			f := newPushFixture(t)
			if kv[0] == "include.path" {
				require.NoError(t, os.WriteFile(filepath.Join(f.bare, "extra"), []byte("[http]\n\textraHeader = X-Leak: 1\n"), 0o644))
			}
			gittest.Git(t, f.bare, "config", kv[0], kv[1])
			_, err := f.remote.Push(context.Background(), f.spec(), f.cred)
			require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
			assert.Zero(t, f.srv.Requests(), "no request reached any server")
		})
	}
	t.Run("remote named like the URL", func(t *testing.T) {
		f := newPushFixture(t)
		gittest.Git(t, f.bare, "config", "remote."+f.repo.URL+".pushurl", "http://127.0.0.1:1/x.git")
		_, err := f.remote.Push(context.Background(), f.spec(), f.cred)
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	})
	t.Run("an ordinary extra remote is fine", func(t *testing.T) {
		f := newPushFixture(t)
		gittest.Git(t, f.bare, "config", "remote.upstream.url", "http://127.0.0.1:1/x.git")
		_, err := f.remote.Push(context.Background(), f.spec(), f.cred)
		require.NoError(t, err)
	})
}

func TestPushValidatesItsInput(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	spec := f.spec()
	spec.Branch = "-delete"
	_, err := f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	spec = f.spec()
	spec.Branch = "agent/missing"
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrRefNotFound)
	spec = f.spec()
	bad := "HEAD~1"
	spec.Lease = &bad
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	spec = f.spec()
	spec.GitDir = "relative/.bare"
	_, err = f.remote.Push(ctx, spec, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.remote.LocalRef(ctx, f.bare, "HEAD^")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

// TestPushRejectionsCarryTheRemotesReason: whatever the remote refuses, its
// own explanation reaches the caller: receive-pack's "cannot lock ref …
// 'refs/heads/agent' exists" (an upstream branch named like the agent/
// namespace) is SandboxConflict naming the ref, and a pre-receive hook's
// message (a code host's protected branch) is SandboxCommandRejected quoting it.
func TestPushRejectionsCarryTheRemotesReason(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	gittest.Git(t, f.upstream, "branch", "agent")
	_, err := f.remote.Push(ctx, f.spec(), f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, err.Error(), "'refs/heads/agent' exists")
	assert.Contains(t, err.Error(), "cannot create 'refs/heads/"+pushBranch+"'")
	assert.NotContains(t, err.Error(), "failed to push some refs")
	f.assertNoSecret(t, "error", err.Error())

	gittest.Git(t, f.upstream, "branch", "-D", "agent")
	hook := filepath.Join(f.upstream, ".git", "hooks", "pre-receive")
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho 'GH006: Protected branch update failed for refs/heads/agent/edits-c1.' >&2\nprintf '\\033[31mred\\033[0m\\n' >&2\nexit 1\n"), 0o755))
	_, err = f.remote.Push(ctx, f.spec(), f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	assert.Contains(t, err.Error(), "pre-receive hook declined")
	assert.Contains(t, err.Error(), "GH006: Protected branch update failed for refs/heads/agent/edits-c1.")
	assert.NotContains(t, err.Error(), "\x1b", "the remote's control characters are dropped")
	f.assertNoSecret(t, "error", err.Error())
}

// TestRemoteFollowsAMoveOnItsHost: after a rename upstream (301 from the
// old path), the access check, the branch tip and the push all reach the
// repository at its new path with the credential; a move to another host
// is RepoNotFound and reaches nothing there.
func TestRemoteFollowsAMoveOnItsHost(t *testing.T) {
	f := newPushFixture(t)
	ctx := context.Background()
	require.NoError(t, os.Rename(f.upstream, f.srv.RepoDir("team/renamed.git")))
	f.upstream = f.srv.RepoDir("team/renamed.git")
	f.srv.SetRedirect("team/project.git", "team/renamed.git", 301)

	require.NoError(t, f.remote.CheckAccess(ctx, f.repo, f.cred))
	res, err := f.remote.Push(ctx, f.spec(), f.cred)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.PushCreated, res.Status)
	assert.Equal(t, res.Commit, gittest.Git(t, f.upstream, "rev-parse", "refs/heads/"+pushBranch), "pushed to the new path")
	tip, err := f.remote.BranchTip(ctx, f.repo, f.cred, pushBranch)
	require.NoError(t, err)
	assert.Equal(t, res.Commit, tip)

	other := gittest.NewHTTPServer(t, t.TempDir(), "", "")
	f.srv.RemoveRedirects()
	f.srv.SetRedirect("team/project.git", other.URL("team/project.git"), 301)
	err = f.remote.CheckAccess(ctx, f.repo, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrRepoNotFound)
	assert.Contains(t, err.Error(), "another host")
	assert.Zero(t, other.Requests())
	f.assertNoSecret(t, "error", err.Error())

	f.srv.RemoveRedirects()
	err = f.remote.CheckAccess(ctx, f.repo, f.cred)
	require.ErrorIs(t, err, sandboxapi.ErrRepoNotFound, "the old name is gone: 404")
}
