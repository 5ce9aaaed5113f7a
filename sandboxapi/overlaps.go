package sandboxapi

import "time"

// Risks of an Overlap (Overlap.Risk), highest first.
const (
	// RiskHigh: at least one file both workspaces changed has changed line
	// ranges that intersect (overlap or touch, as git's three-way merge
	// decides a textual conflict), or whose ranges cannot be compared (a
	// binary file, a file added on both sides, deleted on one and changed on
	// the other, or one the two workspaces' bases hold in different versions).
	RiskHigh = "high"
	// RiskMedium: both workspaces changed the same files, every one in
	// disjoint line ranges: a merge is likely clean, a review is not.
	RiskMedium = "medium"
)

// What a workspace did to a file (OverlapFile.ThisChange, OtherChange).
const (
	ChangeAdded       = "added"
	ChangeModified    = "modified"
	ChangeDeleted     = "deleted"
	ChangeRenamed     = "renamed"
	ChangeTypeChanged = "type_changed"
)

// ChangeKinds lists the Change* values.
var ChangeKinds = []string{ChangeAdded, ChangeModified, ChangeDeleted, ChangeRenamed, ChangeTypeChanged}

// Reasons a workspace of the same repository was not checked
// (UncheckedWorkspace.Reason).
const (
	// UncheckedOtherHost: it lives on another worker host, whose disk this
	// host cannot read; its host is named, nothing is guessed.
	UncheckedOtherHost = "other_host"
	// UncheckedEvicted: it was evicted (saved and removed from disk); the
	// next operation on it restores it.
	UncheckedEvicted = "evicted"
	// UncheckedUnreadable: its worktree could not be read (Message says why).
	UncheckedUnreadable = "unreadable"
)

// Limits of an overlaps result.
const (
	// MaxOverlapFiles caps Overlap.Files (FilesTruncated tells).
	MaxOverlapFiles = 200
	// MaxOverlapRanges caps OverlapFile.ThisRanges and OtherRanges; a file
	// with more changed ranges than this is compared as a whole (its
	// ranges are left out and RangesIntersect is true).
	MaxOverlapRanges = 64
	// MaxOverlapWorkspaces caps OverlapsResult.Overlaps and NotChecked.
	MaxOverlapWorkspaces = 500
)

// LineRange is one changed range of a file, in the lines of the file as the
// workspace's base commit holds it (1-based): Count lines from Start were
// replaced or deleted; Count 0 is an insertion before line Start (Start is
// one past the last line for an insertion at the end).
type LineRange struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// OverlapFile is one file both workspaces changed since their bases.
type OverlapFile struct {
	// Path is the file's path in the base (the path both changes started
	// from), or its new path when both workspaces added it.
	Path string `json:"path"`
	// ThisPath and OtherPath are the file's path in this and in the other
	// workspace when it differs from Path (a rename, followed).
	ThisPath  string `json:"this_path,omitempty"`
	OtherPath string `json:"other_path,omitempty"`
	// ThisChange and OtherChange are what each side did: "added",
	// "modified", "deleted", "renamed" or "type_changed".
	ThisChange  string `json:"this_change"`
	OtherChange string `json:"other_change"`
	// RangesIntersect: the changed line ranges overlap or touch (git would
	// see a conflict in this file), or they cannot be compared (see
	// RiskHigh); false when every range is disjoint.
	RangesIntersect bool `json:"ranges_intersect"`
	// Comparable is false when the ranges could not be compared line by
	// line (binary, added on both sides, deleted on one side, different
	// base versions, too many ranges): RangesIntersect is then true.
	Comparable bool `json:"comparable"`
	// ThisRanges and OtherRanges are the changed ranges of each side (only
	// when Comparable), at most MaxOverlapRanges each.
	ThisRanges  []LineRange `json:"this_ranges,omitempty"`
	OtherRanges []LineRange `json:"other_ranges,omitempty"`
}

// Overlap is another live workspace of the same repository, user and
// project that changed at least one file this workspace changed.
type Overlap struct {
	WorkspaceID    string        `json:"workspace_id"`
	Mode           WorkspaceMode `json:"mode"`
	Branch         string        `json:"branch,omitempty"`
	ConversationID string        `json:"conversation_id,omitempty"`
	TaskID         string        `json:"task_id,omitempty"`
	// Risk is RiskHigh or RiskMedium.
	Risk string `json:"risk"`
	// Intersecting counts the files whose ranges intersect.
	Intersecting int `json:"intersecting"`
	// Files are the files both changed, intersecting ones first, then by
	// path; at most MaxOverlapFiles.
	Files          []OverlapFile `json:"files"`
	FilesTruncated bool          `json:"files_truncated,omitempty"`
	// CheckedAt is when the other workspace's changes were read: a change
	// made by an operation on it shows at once; one made by a background
	// process of it alone shows within OverlapsStaleAfter.
	CheckedAt time.Time `json:"checked_at"`
}

// OverlapsStaleAfter bounds how old the changes read of another workspace
// with a background process may be (Overlap.CheckedAt).
const OverlapsStaleAfter = 5 * time.Second

// UncheckedWorkspace is a workspace of the same repository, user and
// project that overlaps could not compare.
type UncheckedWorkspace struct {
	WorkspaceID string        `json:"workspace_id"`
	Mode        WorkspaceMode `json:"mode"`
	Branch      string        `json:"branch,omitempty"`
	// HostID is the worker host the workspace lives on.
	HostID string `json:"host_id"`
	// Reason is UncheckedOtherHost, UncheckedEvicted or UncheckedUnreadable.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// OverlapsResult is the result of the overlaps update (docs/API.md
// "Overlaps"): which other live workspaces of this workspace's repository,
// user and project changed the same files since their bases (committed and
// uncommitted changes, untracked files included, renames followed), ordered
// by risk (RiskHigh first, then by intersecting and shared files, then by
// id). Another user's or project's workspace is never considered.
type OverlapsResult struct {
	WorkspaceID string `json:"workspace_id"`
	BaseCommit  string `json:"base_commit"`
	// Changed counts the files this workspace changed since its base.
	Changed int `json:"changed"`
	// Checked counts the other workspaces compared (with or without overlap).
	Checked    int                  `json:"checked"`
	Overlaps   []Overlap            `json:"overlaps"`
	NotChecked []UncheckedWorkspace `json:"not_checked,omitempty"`
	// Truncated: more than MaxOverlapWorkspaces overlaps or unchecked
	// workspaces; the lowest-risk ones were left out.
	Truncated bool `json:"truncated,omitempty"`
}

// HighRisk counts the overlaps of RiskHigh.
func (r OverlapsResult) HighRisk() int {
	n := 0
	for _, o := range r.Overlaps {
		if o.Risk == RiskHigh {
			n++
		}
	}
	return n
}
