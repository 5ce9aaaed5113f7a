package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// taskOf creates task workspace id from the conversation's branch, writes
// files into it and commits them; it returns the task branch.
func (f *fixture) taskOf(conv sandboxapi.Workspace, id string, files map[string]string) string {
	f.t.Helper()
	req := f.req(sandboxapi.ModeTask, id)
	req.FromBranch = conv.BranchName
	tw := f.ensure(req)
	for p, c := range files {
		full := filepath.Join(tw.LocalPath, p)
		require.NoError(f.t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(f.t, os.WriteFile(full, []byte(c), 0o644))
	}
	_, err := f.m.Commit(context.Background(), tw, sandboxapi.CommitRequest{Message: "task " + id})
	require.NoError(f.t, err)
	return tw.BranchName
}

func (f *fixture) requireClean(ws sandboxapi.Workspace) {
	f.t.Helper()
	st, err := f.m.Status(context.Background(), ws)
	require.NoError(f.t, err)
	require.False(f.t, st.Dirty, "workspace must be clean: %+v", st.Files)
	_, err = os.Lstat(filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath), MergeMarkerFile))
	require.True(f.t, os.IsNotExist(err), "merge marker left behind")
}

func TestMergeBringsBranchesInOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	b1 := f.taskOf(conv, "t1", map[string]string{"one.txt": "1\n"})
	b2 := f.taskOf(conv, "t2", map[string]string{"two.txt": "2\n"})
	b3 := f.taskOf(conv, "t3", map[string]string{"dir/three.txt": "3\n"})

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b2, b1, b3}})
	require.NoError(t, err)
	require.Len(t, res.Branches, 3)
	for i, want := range []string{b2, b1, b3} {
		assert.Equal(t, want, res.Branches[i].Branch)
		assert.Equal(t, sandboxapi.MergeMerged, res.Branches[i].Status)
		assert.Equal(t, f.git(f.bare, "rev-parse", want), res.Branches[i].Tip)
	}
	assert.Equal(t, tb+"edits-c1", res.Branch)
	assert.Equal(t, f.git(f.bare, "rev-parse", tb+"edits-c1"), res.Head)
	assert.Empty(t, res.CheckpointCommit)
	for _, p := range []string{"one.txt", "two.txt", "dir/three.txt"} {
		assert.FileExists(t, filepath.Join(conv.LocalPath, p))
	}
	// Three merge commits, first parents in request order (--no-ff).
	log := f.git(conv.LocalPath, "log", "--first-parent", "--format=%s", "-3")
	assert.Equal(t, "Merge branch '"+b3+"'\nMerge branch '"+b1+"'\nMerge branch '"+b2+"'", log)
	f.requireClean(conv)

	// Idempotent: a repeated call reports them merged and makes no commit.
	again, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b2, b1, b3}})
	require.NoError(t, err)
	assert.Equal(t, res.Head, again.Head)
	for _, b := range again.Branches {
		assert.Equal(t, sandboxapi.MergeMerged, b.Status)
	}
}

func TestMergeConflictLeavesTheWorkspaceClean(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	b1 := f.taskOf(conv, "t1", map[string]string{"README.md": "from task one\n", "only1.txt": "1\n"})
	b2 := f.taskOf(conv, "t2", map[string]string{"README.md": "from task two\n", "only2.txt": "2\n", "new/dir/file.txt": "x\n"})
	b3 := f.taskOf(conv, "t3", map[string]string{"three.txt": "3\n"})

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1, b2, tb + "task-nope", b3}})
	require.NoError(t, err)
	require.Len(t, res.Branches, 4)
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[0].Status)
	assert.Equal(t, sandboxapi.MergeConflict, res.Branches[1].Status)
	assert.Equal(t, []string{"README.md"}, res.Branches[1].ConflictFiles)
	assert.Equal(t, sandboxapi.MergeMissing, res.Branches[2].Status)
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[3].Status)
	f.requireClean(conv)

	b, err := os.ReadFile(filepath.Join(conv.LocalPath, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "from task one\n", string(b))
	assert.NoFileExists(t, filepath.Join(conv.LocalPath, "only2.txt"))
	assert.NoDirExists(t, filepath.Join(conv.LocalPath, "new"))
	// HEAD is the merge of b3 on top of the merge of b1: nothing of b2.
	assert.Equal(t, f.git(f.bare, "rev-parse", b3), f.git(conv.LocalPath, "rev-parse", "HEAD^2"))
	assert.Equal(t, f.git(f.bare, "rev-parse", b1), f.git(conv.LocalPath, "rev-parse", "HEAD^1^2"))
	_, err = f.gitRaw(conv.LocalPath, "merge-base", "--is-ancestor", b2, "HEAD")
	assert.Error(t, err, "the conflicting branch must not be in HEAD")
}

func TestMergeRefusesOrCheckpointsADirtyWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	b1 := f.taskOf(conv, "t1", map[string]string{"one.txt": "1\n"})
	require.NoError(t, os.WriteFile(filepath.Join(conv.LocalPath, "wip.txt"), []byte("work in progress\n"), 0o644))
	before := f.git(conv.LocalPath, "rev-parse", "HEAD")

	_, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1}})
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Equal(t, before, f.git(conv.LocalPath, "rev-parse", "HEAD"))
	assert.FileExists(t, filepath.Join(conv.LocalPath, "wip.txt"))

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1}, CheckpointMessage: "checkpoint"})
	require.NoError(t, err)
	require.NotEmpty(t, res.CheckpointCommit)
	assert.Equal(t, "checkpoint", f.git(conv.LocalPath, "log", "-1", "--format=%s", res.CheckpointCommit))
	assert.Equal(t, res.CheckpointCommit, f.git(conv.LocalPath, "rev-parse", "HEAD^1"))
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[0].Status)
	f.requireClean(conv)
}

func TestMergeRollsBackAnInterruptedMerge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	b1 := f.taskOf(conv, "t1", map[string]string{"README.md": "one\n"})
	b2 := f.taskOf(conv, "t2", map[string]string{"README.md": "two\n", "two.txt": "2\n"})
	b3 := f.taskOf(conv, "t3", map[string]string{"three.txt": "3\n"})
	_, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1}})
	require.NoError(t, err)
	pre := f.git(conv.LocalPath, "rev-parse", "HEAD")

	// A worker died in the middle of merging b2: marker written, merge
	// stopped with conflicts in the work tree.
	admin := filepath.Join(f.bare, "worktrees", filepath.Base(conv.LocalPath))
	require.NoError(t, writeMarker(admin, pre))
	_, err = f.gitRaw(conv.LocalPath, "-c", "core.hooksPath=/dev/null", "merge", "--no-ff", "--no-edit", b2)
	require.Error(t, err, "the simulated merge must conflict")
	require.FileExists(t, filepath.Join(admin, "MERGE_HEAD"))

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1, b2, b3}})
	require.NoError(t, err)
	statuses := []string{res.Branches[0].Status, res.Branches[1].Status, res.Branches[2].Status}
	assert.Equal(t, []string{sandboxapi.MergeMerged, sandboxapi.MergeConflict, sandboxapi.MergeMerged}, statuses)
	assert.Equal(t, pre, f.git(conv.LocalPath, "rev-parse", "HEAD^1"))
	f.requireClean(conv)

	// A merge in progress that is not ours is never thrown away.
	_, err = f.gitRaw(conv.LocalPath, "-c", "core.hooksPath=/dev/null", "merge", "--no-ff", "--no-edit", b2)
	require.Error(t, err)
	_, err = f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b2}})
	requireKind(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.FileExists(t, filepath.Join(admin, "MERGE_HEAD"))
}

func TestMergeNeutralizesMergeDrivers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	evil := t.TempDir()
	marker := filepath.Join(evil, "ran")
	f.git(conv.LocalPath, "config", "merge.evil.driver", "touch "+marker+"; cp %B %A; true")
	f.git(conv.LocalPath, "config", "merge.default", "evil")
	f.git(conv.LocalPath, "config", "branch."+tb+"edits-c1.mergeOptions", "-s ours")
	require.NoError(t, os.WriteFile(filepath.Join(conv.LocalPath, ".gitattributes"), []byte("*.md merge=evil\n"), 0o644))
	_, err := f.m.Commit(ctx, conv, sandboxapi.CommitRequest{Message: "attributes"})
	require.NoError(t, err)
	b1 := f.taskOf(conv, "t1", map[string]string{"README.md": "hello\nworld\ntask\n", "one.txt": "1\n"})
	require.NoError(t, os.WriteFile(filepath.Join(conv.LocalPath, "README.md"), []byte("conv\nhello\nworld\n"), 0o644))
	_, err = f.m.Commit(ctx, conv, sandboxapi.CommitRequest{Message: "conversation edit"})
	require.NoError(t, err)

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1}})
	require.NoError(t, err)
	_, serr := os.Stat(marker)
	assert.True(t, os.IsNotExist(serr), "a merge driver from the repository config ran")
	// The driver became `false`: the file that needed it conflicts, and
	// branch.<b>.mergeOptions (-s ours) did not silently drop the task.
	assert.Equal(t, sandboxapi.MergeConflict, res.Branches[0].Status)
	assert.Equal(t, []string{"README.md"}, res.Branches[0].ConflictFiles)
	f.requireClean(conv)

	// Control: with a plain text merge the same branches merge cleanly.
	f.git(conv.LocalPath, "config", "--unset", "merge.default")
	require.NoError(t, os.WriteFile(filepath.Join(conv.LocalPath, ".gitattributes"), []byte(""), 0o644))
	_, err = f.m.Commit(ctx, conv, sandboxapi.CommitRequest{Message: "no attributes"})
	require.NoError(t, err)
	res, err = f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{b1}})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[0].Status)
	b, err := os.ReadFile(filepath.Join(conv.LocalPath, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "conv\nhello\nworld\ntask\n", string(b))
}

func TestMergeRejects(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	for _, req := range []sandboxapi.MergeRequest{
		{},
		{Branches: []string{"-evil"}},
		{Branches: []string{"a", "a"}},
		{Branches: []string{"refs/heads/a"}},
		{Branches: []string{strings.Repeat("b", 10) + "..x"}},
	} {
		_, err := f.m.Merge(ctx, conv, req)
		requireKind(t, err, sandboxapi.ErrInvalidArgument)
	}
	ana := f.ensure(f.req(sandboxapi.ModeAnalysis, "main"))
	_, err := f.m.Merge(ctx, ana, sandboxapi.MergeRequest{Branches: []string{"main"}})
	requireKind(t, err, sandboxapi.ErrCommandRejected)
}
