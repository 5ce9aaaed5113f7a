package workspace

import (
	"context"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/overlaps"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// numbered is n lines "line 1\n" … "line n\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// withLines returns numbered(n) with the given 1-based lines replaced.
func withLines(n int, repl map[int]string) string {
	lines := strings.SplitAfter(numbered(n), "\n")
	for i, s := range repl {
		lines[i-1] = s + "\n"
	}
	return strings.Join(lines, "")
}

// overlapFixture is a fixture whose main also holds big.txt (20 lines),
// mv.txt (10 lines) and gone.txt.
func overlapFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.writeSrc("big.txt", numbered(20))
	f.writeSrc("mv.txt", numbered(10))
	f.writeSrc("gone.txt", "bye\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "files for overlaps")
	f.fetch()
	return f
}

func (f *fixture) write(ws sandboxapi.Workspace, rel, content string) {
	f.t.Helper()
	p := filepath.Join(ws.LocalPath, rel)
	require.NoError(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(f.t, os.WriteFile(p, []byte(content), 0o644))
}

func byKey(s overlaps.Summary) map[string]overlaps.FileChange {
	out := map[string]overlaps.FileChange{}
	for _, f := range s.Files {
		out[f.Key()] = f
	}
	return out
}

func TestChangesAreCommittedAndUncommittedWithRenamesAndRanges(t *testing.T) {
	f := overlapFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	f.write(ws, "big.txt", withLines(20, map[int]string{3: "three"}))
	_, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "line 3"})
	require.NoError(t, err)
	// Uncommitted: a line inserted after line 10, a rename with an edit, a
	// deletion, an untracked file and a binary change.
	lines := strings.SplitAfter(withLines(20, map[int]string{3: "three"}), "\n")
	f.write(ws, "big.txt", strings.Join(lines[:10], "")+"inserted\n"+strings.Join(lines[10:], ""))
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "mv.txt")))
	f.write(ws, "moved/mv.txt", withLines(10, map[int]string{2: "two"}))
	require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, "gone.txt")))
	f.write(ws, "new.txt", "new\n")
	f.write(ws, "bin.dat", "\x00\x01changed\n")
	indexBefore, err := os.ReadFile(filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath), "index"))
	require.NoError(t, err)

	s, err := f.m.Changes(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, ws.BaseCommit, s.BaseCommit)
	files := byKey(s)
	require.Len(t, files, 5, "%+v", s.Files)
	assert.Equal(t, overlaps.Modified, files["big.txt"].Change)
	assert.Equal(t, []sandboxapi.LineRange{{Start: 3, Count: 1}, {Start: 11, Count: 0}}, files["big.txt"].Ranges)
	assert.Equal(t, f.git(f.bare, "rev-parse", ws.BaseCommit+":big.txt"), files["big.txt"].BaseBlob)
	assert.Equal(t, overlaps.FileChange{BasePath: "mv.txt", Path: "moved/mv.txt", Change: overlaps.Renamed,
		BaseBlob: f.git(f.bare, "rev-parse", ws.BaseCommit+":mv.txt"), NewBlob: blobID(withLines(10, map[int]string{2: "two"})), Ranges: []sandboxapi.LineRange{{Start: 2, Count: 1}}}, files["mv.txt"])
	assert.Equal(t, overlaps.Deleted, files["gone.txt"].Change)
	assert.Equal(t, overlaps.FileChange{Path: "new.txt", Change: overlaps.Added, NewBlob: blobID("new\n"), Ranges: []sandboxapi.LineRange{{Start: 1, Count: 0}}}, files["new.txt"])
	assert.True(t, files["bin.dat"].Whole, "binary content is compared whole")
	// The worktree's own index is not written.
	indexAfter, err := os.ReadFile(filepath.Join(f.bare, "worktrees", filepath.Base(ws.LocalPath), "index"))
	require.NoError(t, err)
	assert.Equal(t, indexBefore, indexAfter)
}

// Three workspaces editing the same file: disjoint ranges are medium risk,
// adjacent ones high, as a real merge of their branches confirms.
func TestOverlapsAgreeWithRealMerges(t *testing.T) {
	f := overlapFixture(t)
	ctx := context.Background()
	a := f.ensure(f.req(sandboxapi.ModeTask, "a"))
	b := f.ensure(f.req(sandboxapi.ModeTask, "b"))
	c := f.ensure(f.req(sandboxapi.ModeTask, "c"))
	f.write(a, "big.txt", withLines(20, map[int]string{2: "a2", 3: "a3"}))
	f.write(b, "big.txt", withLines(20, map[int]string{15: "b15"}))
	f.write(c, "big.txt", withLines(20, map[int]string{4: "c4"}))
	summaries := map[string]overlaps.Summary{}
	for _, ws := range []sandboxapi.Workspace{a, b, c} {
		s, err := f.m.Changes(ctx, ws)
		require.NoError(t, err)
		summaries[ws.ID] = s
	}
	got := overlaps.Find(summaries[a.ID], []overlaps.Other{{Workspace: b, Summary: summaries[b.ID]}, {Workspace: c, Summary: summaries[c.ID]}})
	require.Len(t, got, 2)
	assert.Equal(t, c.ID, got[0].WorkspaceID)
	assert.Equal(t, sandboxapi.RiskHigh, got[0].Risk)
	assert.Equal(t, b.ID, got[1].WorkspaceID)
	assert.Equal(t, sandboxapi.RiskMedium, got[1].Risk)

	// Commit all three and merge b and c into a: b merges, c conflicts.
	for _, ws := range []sandboxapi.Workspace{a, b, c} {
		_, err := f.m.Commit(ctx, ws, sandboxapi.CommitRequest{Message: "edit"})
		require.NoError(t, err)
	}
	res, err := f.m.Merge(ctx, a, sandboxapi.MergeRequest{Branches: []string{b.BranchName, c.BranchName}})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[0].Status)
	assert.Equal(t, sandboxapi.MergeConflict, res.Branches[1].Status)
}

// outcome is a branch's merge outcome with MergeClean read as MergeMerged.
func outcome(bm sandboxapi.BranchMerge) sandboxapi.BranchMerge {
	if bm.Status == sandboxapi.MergeClean {
		bm.Status = sandboxapi.MergeMerged
	}
	return bm
}

func TestMergePreviewEqualsTheMerge(t *testing.T) {
	f := overlapFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	x := f.taskOf(conv, "x", map[string]string{"big.txt": withLines(20, map[int]string{2: "x2", 3: "x3", 17: "x17"})})
	y := f.taskOf(conv, "y", map[string]string{"big.txt": withLines(20, map[int]string{3: "y3"})})
	z := f.taskOf(conv, "z", map[string]string{"big.txt": withLines(20, map[int]string{17: "z17"}), "z.txt": "z\n"})
	admin := filepath.Join(f.bare, "worktrees", filepath.Base(conv.LocalPath))
	head := f.git(conv.LocalPath, "rev-parse", "HEAD")
	index, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)

	given, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{x, y, z}, DryRun: true})
	require.NoError(t, err)
	assert.True(t, given.DryRun)
	assert.Equal(t, head, given.Head)
	assert.Equal(t, []string{sandboxapi.MergeClean, sandboxapi.MergeConflict, sandboxapi.MergeConflict},
		[]string{given.Branches[0].Status, given.Branches[1].Status, given.Branches[2].Status})
	assert.Equal(t, []string{"big.txt"}, given.Branches[1].ConflictFiles)

	least, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{x, y, z}, DryRun: true, Order: sandboxapi.MergeOrderLeastConflicts})
	require.NoError(t, err)
	require.Len(t, least.Branches, 3)
	assert.Equal(t, []string{y, z, x}, []string{least.Branches[0].Branch, least.Branches[1].Branch, least.Branches[2].Branch})
	assert.Equal(t, []string{sandboxapi.MergeClean, sandboxapi.MergeClean, sandboxapi.MergeConflict},
		[]string{least.Branches[0].Status, least.Branches[1].Status, least.Branches[2].Status})

	// Nothing changed: HEAD, the index's bytes, the work tree.
	assert.Equal(t, head, f.git(conv.LocalPath, "rev-parse", "HEAD"))
	after, err := os.ReadFile(filepath.Join(admin, "index"))
	require.NoError(t, err)
	assert.Equal(t, index, after)
	f.requireClean(conv)

	// The merge then does exactly what the preview said.
	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{x, y, z}, Order: sandboxapi.MergeOrderLeastConflicts})
	require.NoError(t, err)
	require.Len(t, res.Branches, 3)
	for i := range res.Branches {
		want := outcome(least.Branches[i])
		assert.Equal(t, want, res.Branches[i], "branch %d", i)
	}
	assert.Equal(t, withLines(20, map[int]string{3: "y3", 17: "z17"}), f.read(conv, "big.txt"))
}

func TestMergePreviewOfADirtyWorkspace(t *testing.T) {
	f := overlapFixture(t)
	ctx := context.Background()
	conv := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	clean := f.taskOf(conv, "clean", map[string]string{"big.txt": withLines(20, map[int]string{18: "t18"})})
	clash := f.taskOf(conv, "clash", map[string]string{"big.txt": withLines(20, map[int]string{10: "t10"})})
	f.write(conv, "big.txt", withLines(20, map[int]string{10: "mine"}))
	f.write(conv, "wip.txt", "wip\n")

	p, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{clean, clash}, DryRun: true})
	require.NoError(t, err)
	assert.True(t, p.Dirty)
	assert.Equal(t, sandboxapi.MergeClean, p.Branches[0].Status)
	assert.Equal(t, sandboxapi.MergeConflict, p.Branches[1].Status, "the uncommitted line 10 is part of the preview")
	// Untouched: still dirty with the same bytes.
	assert.Equal(t, withLines(20, map[int]string{10: "mine"}), f.read(conv, "big.txt"))
	assert.Equal(t, "wip\n", f.read(conv, "wip.txt"))

	res, err := f.m.Merge(ctx, conv, sandboxapi.MergeRequest{Branches: []string{clean, clash}, CheckpointMessage: "wip"})
	require.NoError(t, err)
	for i := range res.Branches {
		assert.Equal(t, outcome(p.Branches[i]), res.Branches[i])
	}
}

// blobID is git's object id of a blob holding content (SHA-1 repositories).
func blobID(content string) string {
	return fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(content), content))))
}

func (f *fixture) read(ws sandboxapi.Workspace, rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(ws.LocalPath, rel))
	require.NoError(f.t, err)
	return string(b)
}
