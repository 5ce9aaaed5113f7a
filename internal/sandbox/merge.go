package sandbox

import (
	"context"
	"strings"
)

// Limits of one merge (MergeRequest.Validate).
const (
	// MaxMergeBranches bounds MergeRequest.Branches.
	MaxMergeBranches = 64
	// MaxConflictFiles caps BranchMerge.ConflictFiles (ConflictTruncated tells).
	MaxConflictFiles = 1000
	// MaxMergeMessageBytes bounds MergeRequest.CheckpointMessage, in bytes.
	MaxMergeMessageBytes = 4 << 10
)

// MergeRequest brings local branches into a workspace's branch, one after the
// other in the given order (seed "Task Flow": "Merge/cherry-pick/diff back into
// the conversation edit workspace if accepted"). Each branch is merged with
// `git merge --no-ff` (a merge commit even when a fast-forward is possible);
// a branch that conflicts is left out and the workspace is restored to the
// commit it had before that branch, so it is never left half-merged.
type MergeRequest struct {
	// Branches are local branch names (refs/heads/<name>), merged in this order;
	// 1 to MaxMergeBranches, no duplicates, each valid per ValidateRef.
	Branches []string `json:"branches"`
	// CheckpointMessage, when set, commits a dirty workspace (every change,
	// untracked files included) with this message before merging; when empty,
	// a dirty workspace is refused with ErrWorkspaceDirty. At most
	// MaxMergeMessageBytes, no NUL.
	CheckpointMessage string `json:"checkpoint_message,omitempty"`
}

// Validate checks the request's shape (the branches' existence is checked by
// the merge itself). Returns ErrInvalidArgument naming the first bad field.
func (r MergeRequest) Validate() error {
	if len(r.Branches) == 0 {
		return Errorf(ErrInvalidArgument, "merge needs at least one branch")
	}
	if len(r.Branches) > MaxMergeBranches {
		return Errorf(ErrInvalidArgument, "merge takes at most %d branches, got %d", MaxMergeBranches, len(r.Branches))
	}
	seen := make(map[string]bool, len(r.Branches))
	for _, b := range r.Branches {
		if err := ValidateRef(b); err != nil {
			return err
		}
		if strings.HasPrefix(b, "refs/") {
			return Errorf(ErrInvalidArgument, "branch %q: give the short branch name, not a full ref", clip(b))
		}
		if seen[b] {
			return Errorf(ErrInvalidArgument, "branch %q is listed twice", clip(b))
		}
		seen[b] = true
	}
	if len(r.CheckpointMessage) > MaxMergeMessageBytes || strings.IndexByte(r.CheckpointMessage, 0) >= 0 {
		return Errorf(ErrInvalidArgument, "checkpoint_message: at most %d bytes, no NUL", MaxMergeMessageBytes)
	}
	return nil
}

// Outcomes of one branch of a merge (BranchMerge.Status).
const (
	// MergeMerged: the branch's tip is now contained in the workspace's HEAD
	// (merged by this call, by an earlier attempt of it, or already before).
	MergeMerged = "merged"
	// MergeConflict: the branch conflicts with HEAD; it was left out and the
	// workspace restored (ConflictFiles lists the conflicting paths).
	MergeConflict = "conflict"
	// MergeMissing: no local branch of that name exists.
	MergeMissing = "missing"
	// MergeFailed: git refused the merge for another reason (Message says
	// why); the workspace was restored.
	MergeFailed = "failed"
)

// BranchMerge is the outcome of one branch of a MergeRequest.
type BranchMerge struct {
	Branch string `json:"branch"`
	// Tip is the branch's commit that was merged or tried ("" when missing).
	Tip string `json:"tip,omitempty"`
	// Status is MergeMerged, MergeConflict, MergeMissing or MergeFailed.
	Status string `json:"status"`
	// ConflictFiles are the workspace-relative paths git could not merge
	// (MergeConflict only), sorted, at most MaxConflictFiles.
	ConflictFiles     []string `json:"conflict_files,omitempty"`
	ConflictTruncated bool     `json:"conflict_truncated,omitempty"`
	// Message is git's first error line (MergeFailed only).
	Message string `json:"message,omitempty"`
}

// MergeResult is the outcome of a MergeRequest: one BranchMerge per requested
// branch, in request order.
type MergeResult struct {
	// Branch is the workspace's branch that received the merges.
	Branch string `json:"branch"`
	// Head is the workspace's HEAD afterwards (the workspace is clean).
	Head     string        `json:"head"`
	Branches []BranchMerge `json:"branches"`
	// CheckpointCommit is the commit made by this call from a dirty workspace
	// (MergeRequest.CheckpointMessage), "" when none was needed.
	CheckpointCommit string `json:"checkpoint_commit,omitempty"`
}

// BranchMerger is the optional merge capability of a WorkspaceProvider
// (implemented by the local worktree manager). Merge brings req.Branches into
// ws's branch in order; it needs a writable workspace on a branch and a clean
// work tree (or req.CheckpointMessage). It is idempotent: a branch already
// contained in HEAD is reported merged without a new commit, and a merge
// interrupted by a crash is rolled back on the next call. Errors:
// ErrInvalidArgument (request), ErrCommandRejected (read-only or detached),
// ErrWorkspaceDirty (dirty without a checkpoint message, or a merge, rebase or
// cherry-pick started by someone else is in progress), ErrWorkspaceNotFound,
// ErrRepoLocked, ErrInsufficientDisk, ErrWorkspaceUnavailable.
type BranchMerger interface {
	Merge(ctx context.Context, ws Workspace, req MergeRequest) (MergeResult, error)
}
