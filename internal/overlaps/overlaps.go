// Package overlaps compares what workspaces of one repository changed since
// their bases (docs/API.md "Overlaps"). It is pure: change summaries of the
// workspaces go in (read by internal/workspace), the overlaps of one
// workspace with the others come out, ordered by risk. It reads no file and
// runs no git.
package overlaps

import (
	"cmp"
	"slices"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Kinds of a FileChange (FileChange.Change), as sandboxapi.OverlapFile
// reports them.
const (
	Added       = sandboxapi.ChangeAdded
	Modified    = sandboxapi.ChangeModified
	Deleted     = sandboxapi.ChangeDeleted
	Renamed     = sandboxapi.ChangeRenamed
	TypeChanged = sandboxapi.ChangeTypeChanged
)

// FileChange is one file a workspace changed since its base commit.
type FileChange struct {
	// BasePath is the file's path in the base commit; "" when added.
	BasePath string
	// Path is its path now; "" when deleted.
	Path string
	// Change is Added, Modified, Deleted, Renamed or TypeChanged.
	Change string
	// BaseBlob is the file's object id in the base ("" when added): two
	// workspaces' ranges are comparable only when they changed the same
	// version of the file.
	BaseBlob string
	// NewBlob is the file's object id now ("" when deleted): a side whose
	// file now is exactly the other side's base version changed nothing the
	// other does not already build on (a task forked from a conversation's
	// commit, compared with that conversation).
	NewBlob string
	// Ranges are the changed ranges in the base's lines, ascending; nil
	// with Whole set when they are not known line by line (binary content,
	// a submodule, a symbolic link, more than sandboxapi.MaxOverlapRanges).
	Ranges []sandboxapi.LineRange
	// Whole: the change is compared as a whole (see Ranges).
	Whole bool
}

// Key is the name the file is compared under: its base path, or its path
// when added.
func (f FileChange) Key() string {
	if f.BasePath != "" {
		return f.BasePath
	}
	return f.Path
}

// Summary is what one workspace changed since its base commit: committed
// and uncommitted changes, untracked files included, renames followed.
type Summary struct {
	BaseCommit string
	// Files are sorted by Key, one per key.
	Files []FileChange
	// ReadAt is when the worktree was read.
	ReadAt time.Time
}

// Compare returns the files both a (this workspace) and b (another) changed,
// files whose ranges intersect first, then by path, and how many intersect.
func Compare(a, b Summary) (files []sandboxapi.OverlapFile, intersecting int) {
	i, j := 0, 0
	for i < len(a.Files) && j < len(b.Files) {
		fa, fb := a.Files[i], b.Files[j]
		switch c := cmp.Compare(fa.Key(), fb.Key()); {
		case c < 0:
			i++
		case c > 0:
			j++
		case contains(fa, fb) || contains(fb, fa) || sameResult(fa, fb):
			// One side's change is the other's starting point, or both
			// made the file the same (a task merged into its conversation):
			// no overlap, git merges it cleanly.
			i++
			j++
		default:
			f := compareFile(fa, fb)
			if f.RangesIntersect {
				intersecting++
			}
			files = append(files, f)
			i++
			j++
		}
	}
	slices.SortStableFunc(files, func(x, y sandboxapi.OverlapFile) int {
		if x.RangesIntersect != y.RangesIntersect {
			if x.RangesIntersect {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.Path, y.Path)
	})
	return files, intersecting
}

// contains reports whether b's base version of the file is exactly a's
// version now: b started from a's change (and only built on it).
func contains(a, b FileChange) bool {
	return a.NewBlob != "" && a.NewBlob == b.BaseBlob
}

// sameResult reports whether both sides left the file exactly the same:
// the same content at the same path, or both deleted it.
func sameResult(a, b FileChange) bool {
	if a.Change == Deleted && b.Change == Deleted {
		return true
	}
	return a.NewBlob != "" && a.NewBlob == b.NewBlob && a.Path == b.Path
}

// compareFile compares one file both sides changed.
func compareFile(a, b FileChange) sandboxapi.OverlapFile {
	f := sandboxapi.OverlapFile{Path: a.Key(), ThisChange: a.Change, OtherChange: b.Change}
	if a.Path != "" && a.Path != f.Path {
		f.ThisPath = a.Path
	}
	if b.Path != "" && b.Path != f.Path {
		f.OtherPath = b.Path
	}
	comparable := !a.Whole && !b.Whole && a.BasePath != "" && b.BasePath != "" &&
		a.Change != Deleted && b.Change != Deleted && a.BaseBlob == b.BaseBlob
	if !comparable {
		f.RangesIntersect = true
		return f
	}
	f.Comparable = true
	f.ThisRanges, f.OtherRanges = a.Ranges, b.Ranges
	f.RangesIntersect = Intersect(a.Ranges, b.Ranges)
	return f
}

// Intersect reports whether any range of a overlaps or touches any range of
// b, as git's three-way merge decides a conflict: a change of lines
// [s, s+n) and one of [t, t+m) conflict when s <= t+m and t <= s+n, so
// changes of adjacent lines, and insertions at the same place or at either
// end of a changed range, intersect. Both are ascending by Start.
func Intersect(a, b []sandboxapi.LineRange) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		if x.Start <= y.Start+y.Count && y.Start <= x.Start+x.Count {
			return true
		}
		if x.Start+x.Count < y.Start+y.Count {
			i++
		} else {
			j++
		}
	}
	return false
}

// Other is one other workspace to compare with.
type Other struct {
	Workspace sandboxapi.Workspace
	Summary   Summary
}

// Find returns the overlaps of self with others (those sharing at least one
// file), ordered by risk: sandboxapi.RiskHigh first, then by intersecting
// files, then by shared files (most first), then by workspace id. Files per
// overlap are capped at sandboxapi.MaxOverlapFiles.
func Find(self Summary, others []Other) []sandboxapi.Overlap {
	type ranked struct {
		ov     sandboxapi.Overlap
		shared int // files shared, before the cap
	}
	var all []ranked
	for _, o := range others {
		files, hits := Compare(self, o.Summary)
		if len(files) == 0 {
			continue
		}
		ov := sandboxapi.Overlap{
			WorkspaceID: o.Workspace.ID, Mode: o.Workspace.Mode, Branch: o.Workspace.BranchName,
			ConversationID: o.Workspace.ConversationID, TaskID: o.Workspace.TaskID,
			Risk: sandboxapi.RiskMedium, Intersecting: hits, CheckedAt: o.Summary.ReadAt, Files: files,
		}
		if hits > 0 {
			ov.Risk = sandboxapi.RiskHigh
		}
		if len(files) > sandboxapi.MaxOverlapFiles {
			ov.Files, ov.FilesTruncated = files[:sandboxapi.MaxOverlapFiles], true
		}
		all = append(all, ranked{ov: ov, shared: len(files)})
	}
	slices.SortFunc(all, func(x, y ranked) int {
		return cmp.Or(
			-cmp.Compare(x.ov.Intersecting, y.ov.Intersecting), // high risk has hits > 0
			-cmp.Compare(x.shared, y.shared),
			cmp.Compare(x.ov.WorkspaceID, y.ov.WorkspaceID))
	})
	out := make([]sandboxapi.Overlap, len(all))
	for i, r := range all {
		out[i] = r.ov
	}
	return out
}
