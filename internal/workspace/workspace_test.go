package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestEnsureEditIsIdempotent(t *testing.T) {
	f := newFixture(t)
	req := f.req(sandboxapi.ModeEdit, "c1")
	ws := f.ensure(req)

	assert.Equal(t, sandboxapi.WorkspaceIDForKey(req.Key()), ws.ID)
	assert.Equal(t, req.Key(), ws.Key)
	assert.Equal(t, "rc-test", ws.RepoCacheID)
	assert.Equal(t, sandboxapi.RepoIdentity{Host: "example.com", Owner: "owner", Name: "repo", URL: f.cache.RepoURL}, ws.Repo)
	assert.Equal(t, "u1", ws.UserID)
	assert.Equal(t, "p1", ws.ProjectID)
	assert.Equal(t, sandboxapi.ModeEdit, ws.Mode)
	assert.Equal(t, "c1", ws.ConversationID)
	assert.Equal(t, "main", ws.BaseRef)
	assert.Equal(t, f.c2, ws.BaseCommit)
	assert.Equal(t, tb+"edits-c1", ws.BranchName)
	assert.Equal(t, filepath.Join(f.worktreesDir(), req.WorktreeDirName()), ws.LocalPath)
	assert.Equal(t, "host-1", ws.HostID)
	assert.Equal(t, sandboxapi.WorkspaceReady, ws.State)
	assert.Equal(t, sandboxapi.Capabilities{Writable: true, Isolated: false, Persistent: true}, ws.Capabilities)
	assert.False(t, ws.CreatedAt.IsZero())
	assert.True(t, f.branchExists(tb+"edits-c1"))
	assert.Equal(t, tb+"edits-c1", f.git(ws.LocalPath, "symbolic-ref", "--short", "HEAD"))
	assert.FileExists(t, filepath.Join(ws.LocalPath, "README.md"))

	again := f.ensure(req)
	assert.Equal(t, ws.ID, again.ID)
	assert.Equal(t, ws.LocalPath, again.LocalPath)
	assert.Equal(t, ws.BranchName, again.BranchName)
	assert.Equal(t, ws.BaseCommit, again.BaseCommit)
	assert.WithinDuration(t, ws.CreatedAt, again.CreatedAt, time.Millisecond)
	assert.Len(t, f.registered(), 1)

	// The base commit stays put when the default branch moves on.
	f.writeSrc("later.txt", "later\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "later")
	f.fetch()
	assert.Equal(t, f.c2, f.ensure(req).BaseCommit)

	ok, err := f.m.Exists(context.Background(), ws)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestEnsureConcurrentSameKey(t *testing.T) {
	f := newFixture(t)
	req := f.req(sandboxapi.ModeEdit, "c1")
	var wg sync.WaitGroup
	results := make([]sandboxapi.Workspace, 6)
	errs := make([]error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.m.Ensure(context.Background(), f.cache, req, nil)
		}()
	}
	wg.Wait()
	for i := range results {
		require.NoError(t, errs[i])
		assert.Equal(t, results[0].LocalPath, results[i].LocalPath)
		assert.Equal(t, results[0].BaseCommit, results[i].BaseCommit)
	}
	assert.Len(t, f.registered(), 1)
}

func TestTwoConversationsAreIsolated(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.ensure(f.req(sandboxapi.ModeEdit, "convA"))
	b := f.ensure(f.req(sandboxapi.ModeEdit, "convB"))
	assert.NotEqual(t, a.LocalPath, b.LocalPath)
	assert.NotEqual(t, a.ID, b.ID)
	assert.Equal(t, tb+"edits-convA", a.BranchName)
	assert.Equal(t, tb+"edits-convB", b.BranchName)
	assert.True(t, f.branchExists(a.BranchName))
	assert.True(t, f.branchExists(b.BranchName))

	require.NoError(t, f.m.WriteFile(ctx, a, "README.md", []byte("changed in A\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, a, "only-a.txt", []byte("a\n"), 0))
	got, err := f.m.ReadFile(ctx, b, "README.md")
	require.NoError(t, err)
	assert.Equal(t, "hello\nworld\n", string(got))
	_, err = f.m.ReadFile(ctx, b, "only-a.txt")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	assert.Contains(t, err.Error(), "no such file")

	sa, err := f.m.Status(ctx, a)
	require.NoError(t, err)
	sb, err := f.m.Status(ctx, b)
	require.NoError(t, err)
	assert.True(t, sa.Dirty)
	assert.False(t, sb.Dirty)
	assert.Empty(t, sb.Files)
}

func TestAnalysisIsDetachedAndReadOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeAnalysis, "v1")) // annotated tag, peeled
	assert.Equal(t, "", ws.BranchName)
	assert.Equal(t, "v1", ws.BaseRef)
	assert.Equal(t, f.c1, ws.BaseCommit)
	assert.Equal(t, sandboxapi.Capabilities{Writable: false, Persistent: true}, ws.Capabilities)

	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, "", st.Branch)
	assert.Equal(t, f.c1, st.Head)
	assert.False(t, st.Dirty)

	requireKind(t, f.m.WriteFile(ctx, ws, "x.txt", []byte("x"), 0), sandboxapi.ErrCommandRejected)
	_, err = f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "m", AllowEmpty: true})
	requireKind(t, err, sandboxapi.ErrCommandRejected)
	assert.NoFileExists(t, filepath.Join(ws.LocalPath, "x.txt"))
	data, err := f.m.ReadFile(ctx, ws, "README.md")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(data))

	// Default branch, a remote branch and a commit id.
	def := f.ensure(f.req(sandboxapi.ModeAnalysis, ""))
	assert.Equal(t, "main", def.BaseRef)
	assert.Equal(t, f.c2, def.BaseCommit)
	dev := f.ensure(f.req(sandboxapi.ModeAnalysis, "dev"))
	assert.Equal(t, f.c3, dev.BaseCommit)
	byID := f.ensure(f.req(sandboxapi.ModeAnalysis, f.c3[:12]))
	assert.Equal(t, f.c3, byID.BaseCommit)
	assert.Len(t, f.registered(), 4)
}

func TestUnknownRefLeavesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	badBase := f.req(sandboxapi.ModeEdit, "c1")
	badBase.BaseRef = "no-such-branch"
	badFrom := f.req(sandboxapi.ModeTask, "t1")
	badFrom.FromBranch = tb + "edits-none"
	for _, req := range []sandboxapi.WorkspaceRequest{badBase, f.req(sandboxapi.ModeAnalysis, "deadbeefdeadbeef"), badFrom} {
		_, err := f.m.Ensure(ctx, f.cache, req, nil)
		requireKind(t, err, sandboxapi.ErrRefNotFound)
		assert.NoDirExists(t, filepath.Join(f.worktreesDir(), req.WorktreeDirName()))
		if b := req.Branch(); b != "" {
			assert.False(t, f.branchExists(b))
		}
	}
	assert.Empty(t, f.registered())
	assert.NoDirExists(t, filepath.Join(f.bare, "worktrees"))
}

func TestFailureAfterAddLeavesNothing(t *testing.T) {
	f := newFixture(t)
	f.m.afterAdd = func(string) error { return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "injected") }
	req := f.req(sandboxapi.ModeEdit, "c1")
	_, err := f.m.Ensure(context.Background(), f.cache, req, nil)
	requireKind(t, err, sandboxapi.ErrInsufficientDisk)
	assert.NoDirExists(t, filepath.Join(f.worktreesDir(), req.WorktreeDirName()))
	assert.Empty(t, f.registered())
	assert.False(t, f.branchExists(tb+"edits-c1"), "the branch created by the failed call must be deleted")
	entries, _ := os.ReadDir(filepath.Join(f.bare, "worktrees"))
	assert.Empty(t, entries)

	// A branch that existed before the failed call is kept.
	f.m.afterAdd = nil
	ws := f.ensure(req)
	require.NoError(t, f.m.WriteFile(context.Background(), ws, "keep.txt", []byte("keep\n"), 0))
	res, err := f.m.Commit(context.Background(), ws, sandboxapi.CommitRequest{Message: "keep"})
	require.NoError(t, err)
	require.NoError(t, f.m.Remove(context.Background(), ws))
	f.m.afterAdd = func(string) error { return errors.New("injected") }
	_, err = f.m.Ensure(context.Background(), f.cache, req, nil)
	require.Error(t, err)
	assert.Equal(t, res.Commit, f.git(f.bare, "rev-parse", "refs/heads/"+tb+"edits-c1"))
	assert.Empty(t, f.registered())
}

func TestRepairAfterDirectoryVanished(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	require.NoError(t, f.m.WriteFile(ctx, ws, "work.txt", []byte("precious\n"), 0))
	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "precious work"})
	require.NoError(t, err)

	require.NoError(t, os.RemoveAll(ws.LocalPath))
	ok, err := f.m.Exists(ctx, ws)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = f.m.Status(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceNotFound)
	_, err = f.m.ReadFile(ctx, ws, "work.txt")
	requireKind(t, err, sandboxapi.ErrWorkspaceNotFound)

	again := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	assert.Equal(t, ws.LocalPath, again.LocalPath)
	assert.Equal(t, ws.BaseCommit, again.BaseCommit)
	assert.Equal(t, ws.BranchName, again.BranchName)
	data, err := f.m.ReadFile(ctx, again, "work.txt")
	require.NoError(t, err)
	assert.Equal(t, "precious\n", string(data))
	st, err := f.m.Status(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, res.Commit, st.Head)
	assert.Equal(t, tb+"edits-c1", st.Branch)
	assert.Equal(t, 1, st.CommitsSinceBase)
	assert.False(t, st.Dirty)
	assert.Len(t, f.registered(), 1)

	// Analysis repair returns to the same commit even after the ref moved.
	an := f.ensure(f.req(sandboxapi.ModeAnalysis, ""))
	f.writeSrc("later.txt", "later\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "later")
	f.fetch()
	require.NoError(t, os.RemoveAll(an.LocalPath))
	an2 := f.ensure(f.req(sandboxapi.ModeAnalysis, ""))
	assert.Equal(t, an.BaseCommit, an2.BaseCommit)
	st, err = f.m.Status(ctx, an2)
	require.NoError(t, err)
	assert.Equal(t, an.BaseCommit, st.Head)

	// A deleted .git file is restored.
	require.NoError(t, os.Remove(filepath.Join(again.LocalPath, ".git")))
	f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	assert.Equal(t, tb+"edits-c1", f.git(again.LocalPath, "symbolic-ref", "--short", "HEAD"))
}

func TestRemoveKeepsBranch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	require.NoError(t, f.m.WriteFile(ctx, ws, "work.txt", []byte("w\n"), 0))
	res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "w"})
	require.NoError(t, err)
	// Read-only directories (e.g. a Go module cache) do not block removal.
	require.NoError(t, os.MkdirAll(filepath.Join(ws.LocalPath, "ro", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "ro", "sub", "f"), []byte("x"), 0o444))
	require.NoError(t, os.Chmod(filepath.Join(ws.LocalPath, "ro", "sub"), 0o555))

	require.NoError(t, f.m.Remove(ctx, ws))
	assert.NoDirExists(t, ws.LocalPath)
	assert.Empty(t, f.registered())
	assert.Equal(t, res.Commit, f.git(f.bare, "rev-parse", "refs/heads/"+tb+"edits-c1"))
	ok, err := f.m.Exists(ctx, ws)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, f.m.Remove(ctx, ws), "removing a missing workspace is success")

	// Re-creating finds the branch with its commits; the base commit is recovered.
	again := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	assert.Equal(t, ws.BaseCommit, again.BaseCommit)
	data, err := f.m.ReadFile(ctx, again, "work.txt")
	require.NoError(t, err)
	assert.Equal(t, "w\n", string(data))
}

func TestTaskFromEditBranchAndConflicts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	edit := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	require.NoError(t, f.m.WriteFile(ctx, edit, "feature.txt", []byte("f\n"), 0))
	res, err := f.m.Commit(ctx, edit, sandboxapi.CommitRequest{Message: "feature"})
	require.NoError(t, err)

	req := f.req(sandboxapi.ModeTask, "t1")
	req.FromBranch = edit.BranchName
	task := f.ensure(req)
	assert.Equal(t, tb+"task-t1", task.BranchName)
	assert.Equal(t, res.Commit, task.BaseCommit)
	data, err := f.m.ReadFile(ctx, task, "feature.txt")
	require.NoError(t, err)
	assert.Equal(t, "f\n", string(data))

	plain := f.ensure(f.req(sandboxapi.ModeTask, "t2"))
	assert.Equal(t, f.c2, plain.BaseCommit)

	// A branch checked out elsewhere cannot be checked out again.
	clash := f.req(sandboxapi.ModeTask, "t3")
	clash.BranchName = edit.BranchName
	_, err = f.m.Ensure(ctx, f.cache, clash, nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.NotContains(t, err.Error(), edit.LocalPath, "never the other workspace's path")
	assert.NotContains(t, err.Error(), filepath.Base(edit.LocalPath))
	assert.NoDirExists(t, filepath.Join(f.worktreesDir(), clash.WorktreeDirName()))
	assert.Equal(t, res.Commit, f.git(f.bare, "rev-parse", "refs/heads/"+edit.BranchName))
}

func TestEnsureValidates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bad := f.req(sandboxapi.ModeEdit, "")
	_, err := f.m.Ensure(ctx, f.cache, bad, nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	hostile := f.req(sandboxapi.ModeEdit, "c1")
	hostile.BaseRef = "--upload-pack=touch /tmp/x"
	_, err = f.m.Ensure(ctx, f.cache, hostile, nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	other := f.req(sandboxapi.ModeEdit, "c1")
	other.RepoURL = "https://example.com/owner/other"
	_, err = f.m.Ensure(ctx, f.cache, other, nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	c := f.cache
	c.LocalPath = filepath.Dir(f.bare)
	_, err = f.m.Ensure(ctx, c, f.req(sandboxapi.ModeEdit, "c1"), nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	// A non-empty stray directory at the path is never overwritten.
	req := f.req(sandboxapi.ModeEdit, "c9")
	stray := filepath.Join(f.worktreesDir(), req.WorktreeDirName())
	require.NoError(t, os.MkdirAll(stray, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stray, "mine"), []byte("x"), 0o644))
	_, err = f.m.Ensure(ctx, f.cache, req, nil)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.FileExists(t, filepath.Join(stray, "mine"))
	assert.False(t, f.branchExists(tb+"edits-c9"))

	_, err = f.m.Status(ctx, sandboxapi.Workspace{ID: "ws-x", LocalPath: "relative/path"})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
}

func TestCacheConfigHasNoBranchSections(t *testing.T) {
	f := newFixture(t)
	edit := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	f.ensure(f.req(sandboxapi.ModeEdit, "c2"))
	f.ensure(f.req(sandboxapi.ModeTask, "t1"))
	task := f.req(sandboxapi.ModeTask, "t2")
	task.FromBranch = edit.BranchName
	f.ensure(task)
	f.ensure(f.req(sandboxapi.ModeAnalysis, "dev"))
	withBase := f.req(sandboxapi.ModeEdit, "c3")
	withBase.BaseRef = "dev"
	f.ensure(withBase)

	cfg, err := os.ReadFile(filepath.Join(f.bare, "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(cfg), "[branch")
	_, err = f.gitRaw(f.bare, "config", "--file", filepath.Join(f.bare, "config"), "--get-regexp", `^branch\.`)
	require.Error(t, err, "no branch.* keys expected")
}

func TestRepairAfterCrashedCreation(t *testing.T) {
	f := newFixture(t)
	req := f.req(sandboxapi.ModeEdit, "c1")
	ws := f.ensure(req)
	admin := filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath))
	// What a SIGKILLed `git worktree add` leaves: a half-checked-out directory,
	// a registration locked "initializing", and no recorded base.
	require.NoError(t, os.WriteFile(filepath.Join(admin, "locked"), []byte("initializing"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(admin, BaseCommitFile)))
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "README.md")))

	again := f.ensure(req)
	assert.Equal(t, ws.LocalPath, again.LocalPath)
	assert.Equal(t, ws.BaseCommit, again.BaseCommit)
	assert.FileExists(t, filepath.Join(again.LocalPath, "README.md"))
	assert.NoFileExists(t, filepath.Join(admin, "locked"))
	assert.Len(t, f.registered(), 1)

	// Locked "initializing" with a recorded base is a finished worktree: kept.
	require.NoError(t, os.WriteFile(filepath.Join(again.LocalPath, "work.txt"), []byte("w"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(admin, "locked"), []byte("initializing"), 0o644))
	f.ensure(req)
	assert.FileExists(t, filepath.Join(again.LocalPath, "work.txt"))
}

// A new workspace is created without listing the repository's worktrees;
// when its path turns out to be registered under an administrative
// directory of another name (<name>1, as git names a second worktree of one
// base name), Ensure repairs the registration as before: the branch, its
// commits and the recorded base are kept, and no branch is left behind.
func TestFastCreateFallsBackToRepair(t *testing.T) {
	for _, newBranch := range []bool{false, true} {
		t.Run(fmt.Sprintf("new-branch=%v", newBranch), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
			require.NoError(t, f.m.WriteFile(ctx, ws, "work.txt", []byte("precious\n"), 0))
			res, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "precious work"})
			require.NoError(t, err)
			admin := filepath.Join(f.bare, WorktreesDir, filepath.Base(ws.LocalPath))
			// The name git gives a second worktree of the same base name.
			require.NoError(t, os.Rename(admin, admin+"1"))
			require.NoError(t, os.RemoveAll(ws.LocalPath))
			want := tb + "edits-c1"
			if newBranch {
				// The branch is gone too: the fast attempt creates it, git
				// refuses the add, and the attempt's branch must not stay.
				f.git(f.bare, "update-ref", "-d", "refs/heads/"+tb+"edits-c1")
			}
			again := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
			assert.Equal(t, ws.LocalPath, again.LocalPath)
			assert.Equal(t, ws.BaseCommit, again.BaseCommit)
			st, err := f.m.Status(ctx, again)
			require.NoError(t, err)
			assert.Equal(t, want, st.Branch)
			if newBranch {
				assert.Equal(t, ws.BaseCommit, st.Head, "recreated from the base")
			} else {
				assert.Equal(t, res.Commit, st.Head)
				data, err := f.m.ReadFile(ctx, again, "work.txt")
				require.NoError(t, err)
				assert.Equal(t, "precious\n", string(data))
			}
			assert.Len(t, f.registered(), 1)
			assert.Equal(t, []string{tb + "edits-c1"}, strings.Fields(f.git(f.bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/")))
		})
	}
}

// A new workspace's worktree is registered without `git worktree add`
// (addWorktree): what it leaves must be what git's add leaves — the same
// files in the administrative directory with the same contents, the same
// index and work tree, a worktree git lists (unlocked, not prunable) and
// removes like any other.
func TestAddWorktreeMatchesGitWorktreeAdd(t *testing.T) {
	for _, mode := range []sandboxapi.WorkspaceMode{sandboxapi.ModeEdit, sandboxapi.ModeAnalysis} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			scope := "c1"
			if mode == sandboxapi.ModeAnalysis {
				scope = "main"
			}
			ws := f.ensure(f.req(mode, scope))
			ours := filepath.Join(f.bare, WorktreesDir, filepath.Base(ws.LocalPath))
			theirsPath := filepath.Join(f.worktreesDir(), "by-git")
			if mode == sandboxapi.ModeAnalysis {
				f.git(f.bare, "worktree", "add", "-q", "--detach", theirsPath, ws.BaseCommit)
			} else {
				f.git(f.bare, "worktree", "add", "-q", "--no-track", "-b", "by-git", theirsPath, ws.BaseCommit)
			}
			theirs := filepath.Join(f.bare, WorktreesDir, "by-git")
			files := func(dir string) map[string]string {
				out := map[string]string{}
				ents, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, e := range ents {
					if e.IsDir() || e.Name() == BaseCommitFile || e.Name() == "index" {
						continue
					}
					b, err := os.ReadFile(filepath.Join(dir, e.Name()))
					require.NoError(t, err)
					out[e.Name()] = string(b)
				}
				return out
			}
			o, th := files(ours), files(theirs)
			wantHead := "ref: refs/heads/by-git\n"
			if mode == sandboxapi.ModeAnalysis {
				wantHead = ws.BaseCommit + "\n"
			}
			assert.Equal(t, wantHead, th["HEAD"])
			if mode == sandboxapi.ModeAnalysis {
				assert.Equal(t, th["HEAD"], o["HEAD"])
			} else {
				assert.Equal(t, "ref: refs/heads/"+tb+"edits-c1\n", o["HEAD"])
			}
			assert.Equal(t, th["commondir"], o["commondir"])
			assert.Equal(t, filepath.Join(theirsPath, ".git")+"\n", th["gitdir"])
			assert.Equal(t, filepath.Join(ws.LocalPath, ".git")+"\n", o["gitdir"])
			delete(o, "HEAD")
			delete(th, "HEAD")
			delete(o, "gitdir")
			delete(th, "gitdir")
			assert.Equal(t, th, o, "the same files, besides HEAD and gitdir")
			gitfile := func(wt string) string {
				b, err := os.ReadFile(filepath.Join(wt, ".git"))
				require.NoError(t, err)
				return string(b)
			}
			assert.Equal(t, "gitdir: "+theirs+"\n", gitfile(theirsPath))
			assert.Equal(t, "gitdir: "+ours+"\n", gitfile(ws.LocalPath))
			assert.Equal(t, f.git(theirsPath, "ls-files", "-s"), f.git(ws.LocalPath, "ls-files", "-s"))
			assert.Equal(t, "", f.git(ws.LocalPath, "status", "--porcelain"))
			rel := func(dir string) []string {
				var out []string
				for _, l := range snapshot(t, dir) {
					if l = strings.TrimPrefix(l, dir); !strings.HasPrefix(l, "/.git ") { // compared above
						out = append(out, l)
					}
				}
				return out
			}
			assert.Equal(t, rel(theirsPath), rel(ws.LocalPath))
			list := f.git(f.bare, "worktree", "list", "--porcelain")
			assert.Contains(t, list, "worktree "+ws.LocalPath+"\n")
			assert.NotContains(t, list, "locked")
			assert.NotContains(t, list, "prunable")
			f.git(f.bare, "worktree", "remove", ws.LocalPath)
			assert.NoDirExists(t, ours)
			assert.NoDirExists(t, ws.LocalPath)
		})
	}
}

// TestWorktreeAddError: only a fast add takes "already registered" (or
// "missing but locked") for a path registered elsewhere, which is not its
// to clean up; a branch checked out elsewhere is a conflict naming it;
// anything else is classified.
func TestWorktreeAddError(t *testing.T) {
	gitErr := func(stderr string) error {
		return &gitx.Error{Args: []string{"worktree", "add"}, ExitCode: 128, Stderr: stderr}
	}
	for _, msg := range []string{"fatal: '/w/x' is a missing but already registered worktree", "fatal: '/w/x' is a missing but locked worktree"} {
		registered, err := worktreeAddError(gitErr(msg), "b", true)
		assert.True(t, registered)
		assert.ErrorIs(t, err, errRegisteredElsewhere)
		registered, err = worktreeAddError(gitErr(msg), "b", false)
		assert.False(t, registered)
		assert.NotErrorIs(t, err, errRegisteredElsewhere)
	}
	registered, err := worktreeAddError(gitErr("fatal: 'b' is already checked out at '/w/y'\n"), "b", true)
	assert.False(t, registered)
	requireKind(t, err, sandboxapi.ErrConflict)
	assert.Contains(t, sandboxapi.Message(err), "branch b is already checked out by another workspace")
	assert.NotContains(t, sandboxapi.Message(err), "/w/y", "never the other worktree's path")
	_, err = worktreeAddError(gitErr("fatal: something else"), "b", false)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errRegisteredElsewhere)
}

// TestClearEmptyPath: nothing there, or an empty directory (removed), is
// fine; a file or a directory holding anything is a conflict, untouched.
func TestClearEmptyPath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, clearEmptyPath(filepath.Join(dir, "none")))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	require.NoError(t, clearEmptyPath(empty))
	assert.NoDirExists(t, empty)
	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(filepath.Join(full, "x"), 0o755))
	requireKind(t, clearEmptyPath(full), sandboxapi.ErrConflict)
	assert.DirExists(t, filepath.Join(full, "x"))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	requireKind(t, clearEmptyPath(file), sandboxapi.ErrConflict)
}

// TestCrashedAdd: a registration locked "initializing" whose base was never
// recorded is a creation that died half-way; a recorded base, or another
// lock, is not.
func TestCrashedAdd(t *testing.T) {
	admin := t.TempDir()
	initializing := &wtEntry{Locked: true, LockReason: "initializing"}
	assert.True(t, crashedAdd(initializing, ""))
	assert.True(t, crashedAdd(initializing, admin))
	assert.False(t, crashedAdd(&wtEntry{Locked: true, LockReason: "kept by the operator"}, admin))
	assert.False(t, crashedAdd(&wtEntry{}, ""))
	require.NoError(t, writeBase(admin, strings.Repeat("a", 40), time.Now()))
	assert.False(t, crashedAdd(initializing, admin))
}

// TestNewEnsureStateRefusesAnotherRepository: a request naming another
// repository than the cache's is refused before anything is locked.
func TestNewEnsureStateRefusesAnotherRepository(t *testing.T) {
	f := newFixture(t)
	req := f.req(sandboxapi.ModeEdit, "c1")
	st, err := f.m.newEnsureState(f.cache, req, nil)
	require.NoError(t, err)
	assert.Equal(t, "main", st.baseRef)
	assert.Equal(t, filepath.Join(filepath.Dir(f.bare), WorktreesDir, req.WorktreeDirName()), st.wt)
	req.RepoURL = "https://example.com/owner/other"
	_, err = f.m.newEnsureState(f.cache, req, nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
}

// collisionPrefixes: the local and remote ref of every directory prefix of a
// branch, shortest first; none for a branch without a slash.
func TestCollisionPrefixes(t *testing.T) {
	assert.Empty(t, collisionPrefixes("main"))
	assert.Equal(t, []string{"refs/heads/agent", "refs/remotes/origin/agent"}, collisionPrefixes("agent/edits-c1"))
	assert.Equal(t, []string{"refs/heads/a", "refs/remotes/origin/a", "refs/heads/a/b", "refs/remotes/origin/a/b"}, collisionPrefixes("a/b/c"))
}

// TestEnsureKeepsTheStoredNames: a workspace created before tenant
// segments (branch agent/edits-<conversation>, directory …-<hash8>) keeps
// both when it is ensured again with its stored row (a repair, a restore
// after eviction): the derivation of today never moves it, and its commits
// are on the branch it comes back on. Without a row (a new workspace) the
// derivation applies (docs/API.md "Identity").
func TestEnsureKeepsTheStoredNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	legacy := f.req(sandboxapi.ModeEdit, "c1")
	legacy.BranchName = "agent/edits-c1"
	old := f.ensure(legacy)
	require.NoError(t, f.m.WriteFile(ctx, old, "kept.txt", []byte("work\n"), 0))
	_, err := f.m.Commit(ctx, old, sandboxapi.CommitRequest{Message: "agent work"})
	require.NoError(t, err)
	require.NoError(t, f.m.Remove(ctx, old))

	stored := old
	stored.LocalPath = filepath.Join(f.worktreesDir(), "u1_c1_agent-edits-c1-1234abcd")
	req := f.req(sandboxapi.ModeEdit, "c1") // as an agent sends it today: no branch_name
	ws, err := f.m.Ensure(ctx, f.cache, req, &stored)
	require.NoError(t, err)
	assert.Equal(t, "agent/edits-c1", ws.BranchName)
	assert.Equal(t, stored.LocalPath, ws.LocalPath)
	assert.Equal(t, "agent/edits-c1", f.git(ws.LocalPath, "symbolic-ref", "--short", "HEAD"))
	b, err := os.ReadFile(filepath.Join(ws.LocalPath, "kept.txt"))
	require.NoError(t, err)
	assert.Equal(t, "work\n", string(b))
	assert.False(t, f.branchExists(req.Branch()), "the derived branch is not made for an existing workspace")

	other := stored
	other.ID = "ws-000000000000000000000000"
	_, err = f.m.Ensure(ctx, f.cache, req, &other)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	fresh, err := f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, "c2"), nil)
	require.NoError(t, err)
	assert.Equal(t, tb+"edits-c2", fresh.BranchName)
	assert.Equal(t, f.req(sandboxapi.ModeEdit, "c2").WorktreeDirName(), filepath.Base(fresh.LocalPath))
}

// TestEnsureRefusesTheDefaultBranch: a new workspace never checks out the
// repository's default branch (the remote's HEAD), even one under agent/:
// InvalidArgument, and nothing is made.
func TestEnsureRefusesTheDefaultBranch(t *testing.T) {
	f := newFixture(t)
	c := f.cache
	c.DefaultBranch = "agent/trunk"
	req := f.req(sandboxapi.ModeEdit, "c1")
	req.BaseRef = "main"
	req.BranchName = "agent/trunk"
	_, err := f.m.Ensure(context.Background(), c, req, nil)
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "default branch")
	assert.Empty(t, f.registered())
	assert.False(t, f.branchExists("agent/trunk"))
}
