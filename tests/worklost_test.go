package tests

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Ways work could be silently lost or stranded, each shown not to happen,
// end to end through the embedded Temporal, the Go SDK and real git: a
// restore after the upstream deleted the base branch, a nested repository
// in the worktree, worktree git metadata an agent broke.

// TestRestoreAfterTheBaseBranchWasDeletedUpstream: a workspace destroyed
// (not discarded) on a base branch that the upstream then deletes is
// restored byte for byte, on its original base commit: the restore starts
// from what the destroy backup holds, never from what the upstream has
// under the base ref now (docs/API.md "Destroy").
func TestRestoreAfterTheBaseBranchWasDeletedUpstream(t *testing.T) {
	h := startHost(t, "restorebase", alwaysFetch)
	ctx := ctxFor(t, 3*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	gittest.Git(t, upstream, "checkout", "-q", "-b", "feature")
	featureTip := gittest.Commit(t, upstream, "feature.txt", "feature\n", "feature work")
	gittest.Git(t, upstream, "checkout", "-q", "trunk")

	req := editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream))
	req.BaseRef = "feature"
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, featureTip, hd.BaseCommit)
	require.NoError(t, s.WriteFile(ctx, "committed.txt", []byte("committed\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent work"})
	require.NoError(t, err)
	makeEverythingDirty(t, ctx, s, hd, "B")
	head := headOf(t, hd.LocalPath)
	want := withoutIgnored(worktreeSnapshot(t, hd.LocalPath))
	dr, err := s.Destroy(ctx, false)
	require.NoError(t, err)
	require.NotEmpty(t, dr.BackupRef)

	gittest.Git(t, upstream, "branch", "-D", "feature")

	back, err := s.Restore(ctx)
	require.NoError(t, err, "restore must not need the upstream's base branch")
	assert.Equal(t, dr.BackupRef, back.RestoredFrom)
	assert.Equal(t, want, withoutIgnored(worktreeSnapshot(t, back.LocalPath)), "byte for byte")
	assert.Equal(t, head, headOf(t, back.LocalPath))
	assert.Equal(t, featureTip, back.BaseCommit, "the original base")
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.CommitsSinceBase)
	assert.True(t, st.Dirty)
	row, err := h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	require.NoError(t, err)
	assert.Equal(t, "feature", row.BaseRef, "the row keeps the base ref it was created with")
	assert.Equal(t, sandboxapi.WorkspaceReady, row.State)
}

// TestNestedRepositoryIsRefusedAlikeEverywhere: a nested git repository the
// agent made inside the worktree is never silently left out: commit,
// checkpoint and destroy (and eviction: TestEvictionBlockedWhenWorkCannotBeSaved)
// refuse with the same WorkspaceDirty error naming it, and nothing is lost.
func TestNestedRepositoryIsRefusedAlikeEverywhere(t *testing.T) {
	h := startHost(t, "nestedrepo")
	ctx := ctxFor(t, 3*time.Minute)
	s, hd, _ := newEditSession(t, h)
	require.NoError(t, s.WriteFile(ctx, "mine.txt", []byte("mine\n"), 0))
	require.NoError(t, s.WriteFile(ctx, "vendor/lib/code.go", []byte("package lib\n"), 0))
	nested := filepath.Join(hd.LocalPath, "vendor", "lib")
	gittest.Git(t, nested, "init", "--quiet")
	gittest.Git(t, nested, "add", "code.go")
	gittest.Git(t, nested, "commit", "--quiet", "-m", "nested work")
	head := headOf(t, hd.LocalPath)

	_, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "everything"})
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceDirty, "commit never leaves it out silently")
	assert.Contains(t, err.Error(), `"vendor/lib/"`)
	_, err = s.Checkpoint(ctx, "with the nested repository")
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), `"vendor/lib/"`)
	_, err = s.Destroy(ctx, false)
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), `"vendor/lib/"`)

	assert.Equal(t, head, headOf(t, hd.LocalPath), "nothing committed")
	data, err := s.ReadFile(ctx, "vendor/lib/code.go")
	require.NoError(t, err, "the workspace is still there")
	assert.Equal(t, "package lib\n", string(data))
	assert.Equal(t, "nested work", gittest.Git(t, nested, "log", "-1", "--format=%s"))

	res, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "mine", Paths: []string{"mine.txt"}})
	require.NoError(t, err, "other paths commit")
	assert.False(t, res.NothingToCommit)
}

// TestAgentBreakingTheWorktreeGitMetadataStrandsNothing: an agent's `rm
// .git` (or overwriting it) from a command, and a `git worktree prune` on
// the repository afterwards, are repaired by the host on the next
// operation and acquire: the agent's git works again, status and commit
// work, nothing is SandboxConflict or WorkspaceNotFound, and the
// uncommitted changes survive.
func TestAgentBreakingTheWorktreeGitMetadataStrandsNothing(t *testing.T) {
	h := startHost(t, "gitmeta")
	ctx := ctxFor(t, 3*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	req := editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream))
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	bare := filepath.Join(filepath.Dir(filepath.Dir(hd.LocalPath)), ".bare")
	require.NoError(t, s.WriteFile(ctx, "README.md", []byte("changed\n"), 0))
	require.NoError(t, s.WriteFile(ctx, "wip.txt", []byte("work in progress\n"), 0))
	want := worktreeSnapshot(t, hd.LocalPath)
	sh := func(script string) sandboxapi.ExecResult {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}})
		require.NoError(t, err)
		return res
	}
	agentGitWorks := func(why string) {
		t.Helper()
		res := sh("git status --porcelain")
		require.Equal(t, 0, res.ExitCode, "%s: %s", why, res.Stderr)
		assert.Contains(t, string(res.Stdout), " M README.md", why)
		assert.Contains(t, string(res.Stdout), "?? wip.txt", why)
	}

	require.Equal(t, 0, sh("rm .git").ExitCode)
	agentGitWorks("after rm .git")
	require.Equal(t, 0, sh("echo 'gitdir: /nowhere' > .git").ExitCode)
	agentGitWorks("after overwriting .git")

	require.Equal(t, 0, sh("rm .git").ExitCode)
	gittest.Git(t, bare, "worktree", "prune")
	require.NotContains(t, gittest.Git(t, bare, "worktree", "list"), hd.LocalPath, "prune dropped the registration")
	st, err := s.Status(ctx)
	require.NoError(t, err, "never WorkspaceNotFound")
	assert.True(t, st.Dirty)
	agentGitWorks("after a worktree prune")

	require.Equal(t, 0, sh("rm .git").ExitCode)
	gittest.Git(t, bare, "worktree", "prune")
	_, again, err := h.client.Acquire(ctx, req)
	require.NoError(t, err, "never SandboxConflict")
	assert.Equal(t, hd.LocalPath, again.LocalPath)
	assert.Equal(t, hd.BaseCommit, again.BaseCommit)
	assert.Equal(t, want, worktreeSnapshot(t, hd.LocalPath), "the uncommitted changes survive")
	agentGitWorks("after a prune and an acquire")

	res, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "kept"})
	require.NoError(t, err)
	assert.Contains(t, gittest.Git(t, bare, "show", "--name-only", "--format=", res.Commit), "wip.txt")
}
