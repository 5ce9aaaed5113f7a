package sandbox

import "strings"

// TruncatePatch cuts a patch (Diff.Patch) to at most max bytes keeping whole
// file sections (each starts with a line "diff --git "), so that what is
// left still applies with `git apply` for the files it holds (docs/API.md
// "diff"). When not even the first section fits, it is cut on a line
// boundary instead: a preview that no longer applies. cut reports whether
// anything was dropped.
func TruncatePatch(patch string, max int) (out string, cut bool) {
	if len(patch) <= max {
		return patch, false
	}
	if max < 0 {
		max = 0
	}
	head := patch[:max]
	// A section boundary at or before max: the last "\ndiff --git " whose
	// section ends within head.
	if i := strings.LastIndex(patch[:max+1], "\ndiff --git "); i >= 0 {
		return patch[:i+1], true
	}
	if i := strings.LastIndexByte(head, '\n'); i >= 0 {
		return head[:i+1], true
	}
	return "", true
}
