package overlaps

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func r(start, count int) sandboxapi.LineRange {
	return sandboxapi.LineRange{Start: start, Count: count}
}

// The rule is git's: changes of adjacent lines conflict, insertions at the
// same place or at either end of a changed range conflict, a line between
// two changes keeps them apart (internal/workspace checks the same cases
// against real merges).
func TestIntersectIsGitsConflictRule(t *testing.T) {
	cases := []struct {
		name string
		a, b []sandboxapi.LineRange
		want bool
	}{
		{"same line", []sandboxapi.LineRange{r(3, 1)}, []sandboxapi.LineRange{r(3, 1)}, true},
		{"adjacent lines", []sandboxapi.LineRange{r(3, 1)}, []sandboxapi.LineRange{r(4, 1)}, true},
		{"one line between", []sandboxapi.LineRange{r(3, 1)}, []sandboxapi.LineRange{r(5, 1)}, false},
		{"insertion at the same place", []sandboxapi.LineRange{r(5, 0)}, []sandboxapi.LineRange{r(5, 0)}, true},
		{"insertion right after a change", []sandboxapi.LineRange{r(3, 2)}, []sandboxapi.LineRange{r(5, 0)}, true},
		{"insertion right before a change", []sandboxapi.LineRange{r(5, 0)}, []sandboxapi.LineRange{r(5, 2)}, true},
		{"insertion a line away", []sandboxapi.LineRange{r(3, 1)}, []sandboxapi.LineRange{r(6, 0)}, false},
		{"later ranges", []sandboxapi.LineRange{r(1, 1), r(20, 3)}, []sandboxapi.LineRange{r(10, 1), r(22, 1)}, true},
		{"interleaved, disjoint", []sandboxapi.LineRange{r(1, 1), r(10, 1), r(30, 1)}, []sandboxapi.LineRange{r(5, 1), r(20, 1)}, false},
		{"empty", nil, []sandboxapi.LineRange{r(1, 1)}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Intersect(c.a, c.b), c.name)
		assert.Equal(t, c.want, Intersect(c.b, c.a), c.name+" (swapped)")
	}
}

func summary(files ...FileChange) Summary { return Summary{BaseCommit: "base", Files: files} }

func TestCompareFollowsRenamesAndFlagsWholeChanges(t *testing.T) {
	a := summary(
		FileChange{BasePath: "a.go", Path: "a.go", Change: Modified, BaseBlob: "1", Ranges: []sandboxapi.LineRange{r(3, 1)}},
		FileChange{BasePath: "b.go", Path: "b.go", Change: Modified, BaseBlob: "2", Ranges: []sandboxapi.LineRange{r(3, 1)}},
		FileChange{BasePath: "c.go", Path: "c.go", Change: Modified, BaseBlob: "3", Ranges: []sandboxapi.LineRange{r(3, 1)}},
		FileChange{Path: "new.go", Change: Added, Ranges: []sandboxapi.LineRange{r(1, 0)}},
		FileChange{BasePath: "only-a.go", Path: "only-a.go", Change: Modified, BaseBlob: "9"},
	)
	b := summary(
		FileChange{BasePath: "a.go", Path: "moved/a.go", Change: Renamed, BaseBlob: "1", Ranges: []sandboxapi.LineRange{r(10, 1)}},
		FileChange{BasePath: "b.go", Change: Deleted, BaseBlob: "2"},
		FileChange{BasePath: "c.go", Path: "c.go", Change: Modified, BaseBlob: "other", Ranges: []sandboxapi.LineRange{r(30, 1)}},
		FileChange{Path: "new.go", Change: Added, Ranges: []sandboxapi.LineRange{r(1, 0)}},
	)
	files, hits := Compare(a, b)
	require.Len(t, files, 4)
	assert.Equal(t, 3, hits)
	// Intersecting (or incomparable) first, by path; then the disjoint rename.
	assert.Equal(t, []string{"b.go", "c.go", "new.go", "a.go"}, []string{files[0].Path, files[1].Path, files[2].Path, files[3].Path})
	assert.Equal(t, sandboxapi.OverlapFile{Path: "a.go", OtherPath: "moved/a.go", ThisChange: Modified, OtherChange: Renamed,
		Comparable: true, ThisRanges: []sandboxapi.LineRange{r(3, 1)}, OtherRanges: []sandboxapi.LineRange{r(10, 1)}}, files[3])
	assert.True(t, files[0].RangesIntersect && !files[0].Comparable, "deleted on one side")
	assert.True(t, files[1].RangesIntersect && !files[1].Comparable, "different base versions")
	assert.True(t, files[2].RangesIntersect && !files[2].Comparable, "added on both sides")
}

func TestFindRanksByRisk(t *testing.T) {
	self := summary(FileChange{BasePath: "x", Path: "x", Change: Modified, BaseBlob: "1", Ranges: []sandboxapi.LineRange{r(5, 1)}},
		FileChange{BasePath: "y", Path: "y", Change: Modified, BaseBlob: "2", Ranges: []sandboxapi.LineRange{r(5, 1)}})
	disjoint2 := summary(FileChange{BasePath: "x", Path: "x", Change: Modified, BaseBlob: "1", Ranges: []sandboxapi.LineRange{r(50, 1)}},
		FileChange{BasePath: "y", Path: "y", Change: Modified, BaseBlob: "2", Ranges: []sandboxapi.LineRange{r(50, 1)}})
	disjoint1 := summary(FileChange{BasePath: "x", Path: "x", Change: Modified, BaseBlob: "1", Ranges: []sandboxapi.LineRange{r(50, 1)}})
	hit := summary(FileChange{BasePath: "y", Path: "y", Change: Modified, BaseBlob: "2", Ranges: []sandboxapi.LineRange{r(6, 1)}})
	none := summary(FileChange{BasePath: "z", Path: "z", Change: Modified, BaseBlob: "3"})
	ws := func(id string) sandboxapi.Workspace { return sandboxapi.Workspace{ID: id, Mode: sandboxapi.ModeTask} }
	got := Find(self, []Other{{ws("ws-d1"), disjoint1}, {ws("ws-none"), none}, {ws("ws-d2"), disjoint2}, {ws("ws-hit"), hit}})
	require.Len(t, got, 3)
	assert.Equal(t, []string{"ws-hit", "ws-d2", "ws-d1"}, []string{got[0].WorkspaceID, got[1].WorkspaceID, got[2].WorkspaceID})
	assert.Equal(t, sandboxapi.RiskHigh, got[0].Risk)
	assert.Equal(t, 1, got[0].Intersecting)
	assert.Equal(t, sandboxapi.RiskMedium, got[1].Risk)
	assert.Len(t, got[1].Files, 2)
}

// A task forked from a conversation's commit starts from the conversation's
// change: the conversation's file now is the task's base version, so the
// two do not overlap there (they do where both changed further).
func TestCompareSkipsAChangeTheOtherBuildsOn(t *testing.T) {
	conv := summary(FileChange{Path: "new.go", Change: Added, NewBlob: "c1", Ranges: []sandboxapi.LineRange{r(1, 0)}},
		FileChange{BasePath: "x.go", Path: "x.go", Change: Modified, BaseBlob: "x0", NewBlob: "x1", Ranges: []sandboxapi.LineRange{r(5, 1)}})
	task := summary(FileChange{BasePath: "new.go", Path: "new.go", Change: Modified, BaseBlob: "c1", NewBlob: "c2", Ranges: []sandboxapi.LineRange{r(3, 1)}},
		FileChange{BasePath: "x.go", Path: "x.go", Change: Modified, BaseBlob: "x0", NewBlob: "x2", Ranges: []sandboxapi.LineRange{r(6, 1)}})
	files, hits := Compare(conv, task)
	require.Len(t, files, 1)
	assert.Equal(t, "x.go", files[0].Path)
	assert.Equal(t, 1, hits)
	files, _ = Compare(task, conv)
	require.Len(t, files, 1, "symmetric")
}

// A task merged into its conversation: both now hold the task's version of
// its files (from different bases), and both deleted the same file; none of
// it overlaps, while a file they left different still does.
func TestCompareSkipsTheSameResult(t *testing.T) {
	conv := summary(FileChange{BasePath: "a.go", Path: "a.go", Change: Modified, BaseBlob: "a0", NewBlob: "a2", Ranges: []sandboxapi.LineRange{r(1, 3)}},
		FileChange{BasePath: "gone.go", Change: Deleted, BaseBlob: "g0", Whole: true},
		FileChange{BasePath: "b.go", Path: "b.go", Change: Modified, BaseBlob: "b0", NewBlob: "b2", Whole: true})
	task := summary(FileChange{BasePath: "a.go", Path: "a.go", Change: Modified, BaseBlob: "a1", NewBlob: "a2", Ranges: []sandboxapi.LineRange{r(2, 1)}},
		FileChange{BasePath: "gone.go", Change: Deleted, BaseBlob: "g1", Whole: true},
		FileChange{BasePath: "b.go", Path: "b.go", Change: Modified, BaseBlob: "b1", NewBlob: "b3", Whole: true})
	for _, pair := range [][2]Summary{{conv, task}, {task, conv}} {
		files, hits := Compare(pair[0], pair[1])
		require.Len(t, files, 1)
		assert.Equal(t, "b.go", files[0].Path)
		assert.Equal(t, 1, hits)
	}
}
