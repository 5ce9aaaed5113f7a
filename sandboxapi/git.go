package sandboxapi

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// FileStatus is one changed path (git status --porcelain=v1 XY codes).
type FileStatus struct {
	Path   string `json:"path"`
	Status string `json:"status"` // two characters, e.g. " M", "??", "A "
}

// WorkspaceStatus is a workspace's git state. Dirty counts untracked files.
type WorkspaceStatus struct {
	Branch     string       `json:"branch"` // "" when detached
	Head       string       `json:"head"`
	BaseCommit string       `json:"base_commit"`
	Dirty      bool         `json:"dirty"`
	Files      []FileStatus `json:"files"`
	// CommitsSinceBase counts commits on HEAD not in BaseCommit.
	CommitsSinceBase int `json:"commits_since_base"`
	// UnpushedCommits counts commits on HEAD that no remote-tracking branch of
	// origin, no tag and no push of any workspace (PushedRefPrefix) contains:
	// 0 right after a successful push.
	UnpushedCommits int `json:"unpushed_commits"`
	// ConfigWarnings lists the repository configuration variables that could
	// run a program or redirect git (docs/SECURITY.md "Git hardening"), each as
	// `"<key>" (<scope>): <what it would do>; <neutralized|refused|reported>`;
	// host-side git never obeys them. Values are never included. Empty when
	// the configuration is clean.
	ConfigWarnings []string `json:"config_warnings,omitempty"`
	// LFSPointers lists the Git LFS files (attribute filter=lfs) that are
	// still pointers: their content could not be fetched, or fetching is
	// off (SANDBOX_LFS). Omitted when none.
	LFSPointers []string `json:"lfs_pointers,omitempty"`
	// UninitializedSubmodules lists the submodule paths whose recorded
	// commit is not checked out (submodules off, SANDBOX_SUBMODULES, or it
	// could not be fetched). Omitted when none.
	UninitializedSubmodules []string `json:"uninitialized_submodules,omitempty"`
}

// MaxDiffBytes caps a returned patch; the total size is still reported.
const MaxDiffBytes = 1 << 20

// Diff is everything the agent changed against the recorded base commit:
// commits, staged, unstaged and untracked (not ignored) files, as a binary-safe patch.
type Diff struct {
	BaseCommit string   `json:"base_commit"`
	Patch      string   `json:"patch"`
	Files      []string `json:"files"`
	Truncated  bool     `json:"truncated"`
	TotalBytes int64    `json:"total_bytes"`
}

// CommitRequest commits the workspace's changes. Empty Paths means every
// change including untracked files (git add -A).
type CommitRequest struct {
	Message     string   `json:"message"`
	Paths       []string `json:"paths,omitempty"`
	AuthorName  string   `json:"author_name,omitempty"`
	AuthorEmail string   `json:"author_email,omitempty"`
	AllowEmpty  bool     `json:"allow_empty,omitempty"`
}

// CommitResult is the outcome of a commit.
type CommitResult struct {
	Commit          string `json:"commit"`
	Branch          string `json:"branch"`
	NothingToCommit bool   `json:"nothing_to_commit"`
}

// PushRequest is the push update's argument (docs/API.md "push").
type PushRequest struct {
	// ForceWithLease replaces a remote branch that is not an ancestor of the
	// local tip, but only while the remote branch is still at the commit this
	// workspace pushed last (PushedRef), or absent when it never pushed:
	// git push --force-with-lease=refs/heads/<branch>:<last pushed commit>.
	// Without it a diverged remote branch is ErrConflict.
	ForceWithLease bool `json:"force_with_lease,omitempty"`
}

// Push outcomes (PushResult.Status), from git push --porcelain's flags.
const (
	PushCreated     = "created"      // the remote branch did not exist ("*")
	PushFastForward = "fast_forward" // the remote branch moved forward (" ")
	PushForced      = "forced"       // the remote branch was replaced (--force-with-lease, "+")
	PushUpToDate    = "up_to_date"   // nothing to send ("=")
)

// PushResult is the outcome of a push.
type PushResult struct {
	// Branch is the workspace branch pushed to the branch of the same name.
	Branch string `json:"branch"`
	// Commit is the pushed commit (the local branch tip), now also recorded in PushedRef.
	Commit string `json:"commit"`
	// PreviousRemoteCommit is the remote branch's commit before the push ("" when it was created).
	PreviousRemoteCommit string `json:"previous_remote_commit,omitempty"`
	// Status is PushCreated, PushFastForward, PushForced or PushUpToDate.
	Status string `json:"status"`
}

// Limits of a pull request request (GitHub's own limits where it has them).
const (
	MaxPRTitleRunes = 256   // characters of a title
	MaxPRBodyRunes  = 65536 // characters of a body
	MaxPRReviewers  = 15    // reviewers per request
	MaxPRLabels     = 100   // labels per request
	MaxPRLabelRunes = 50    // characters of a label
)

// validReviewer accepts a GitHub login (1–39 of [A-Za-z0-9-], not starting
// with '-') or "org/team-slug" (slug of [A-Za-z0-9_.-]).
func validReviewer(s string) bool {
	login := func(s string) bool {
		if s == "" || len(s) > 39 || s[0] == '-' {
			return false
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
		return true
	}
	org, team, isTeam := strings.Cut(s, "/")
	if !isTeam {
		return login(s)
	}
	if !login(org) || team == "" || len(team) > 100 {
		return false
	}
	for _, c := range team {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// PullRequest is a pull request as the code host reports it.
type PullRequest struct {
	// Number is the pull request's number in its repository.
	Number int `json:"number"`
	// URL is its web page (GitHub's html_url).
	URL string `json:"url"`
	// State is "open" or "closed".
	State string `json:"state"`
	// Draft reports a draft pull request.
	Draft bool `json:"draft"`
	// Base is the branch it merges into.
	Base string `json:"base"`
	// Head is the branch with the changes (the workspace branch).
	Head string `json:"head"`
	// HeadCommit is the head commit the code host recorded.
	HeadCommit string `json:"head_commit,omitempty"`
	// Created is false when an open pull request was reused (PullRequestRequest.ReuseOpen).
	Created bool `json:"created"`
	// Warnings report follow-up steps that failed without failing the call
	// (requesting reviewers, adding labels); the pull request exists.
	Warnings []string `json:"warnings,omitempty"`
}

// Limits of one merge (MergeRequest.Validate).
const (
	// MaxMergeBranches bounds MergeRequest.Branches.
	MaxMergeBranches = 64
	// MaxConflictFiles caps BranchMerge.ConflictFiles (ConflictTruncated tells).
	MaxConflictFiles = 1000
	// MaxMergeMessageBytes bounds MergeRequest.CheckpointMessage, in bytes.
	MaxMergeMessageBytes = 4 << 10
)

// Orders of a merge (MergeRequest.Order).
const (
	// MergeOrderGiven merges in request order (the default).
	MergeOrderGiven = "given"
	// MergeOrderLeastConflicts previews the merges first and merges in the
	// order that conflicts least: greedily, at each step the first
	// remaining source (in request order) that merges cleanly into what is
	// merged so far; the sources that conflict with everything left come
	// last, in request order.
	MergeOrderLeastConflicts = "least_conflicts"
)

// MergeRequest brings local branches into a workspace's branch, one after the
// other in the given order (docs/API.md "Task fan-out": merge the accepted tasks back into
// the conversation edit workspace if accepted). Each branch is merged with
// `git merge --no-ff` (a merge commit even when a fast-forward is possible);
// a branch that conflicts is left out and the workspace is restored to the
// commit it had before that branch, so it is never left half-merged.
//
// With DryRun nothing is merged: the same merges are computed as three-way
// merges outside the worktree (`git merge-tree`), the worktree, its index
// and its branch are never touched, and each source's outcome is what the
// merge would then do (docs/API.md "Merge preview").
type MergeRequest struct {
	// Branches are local branch names (refs/heads/<name>), merged in this order;
	// no duplicates, each valid per ValidateRef. Branches and Workspaces
	// together: 1 to MaxMergeBranches sources.
	Branches []string `json:"branches"`
	// Workspaces are ids of other workspaces of the same repository, user
	// and project, merged after Branches by their branch (its committed
	// state); a workspace of anyone else, or of another repository, is
	// reported MergeMissing.
	Workspaces []string `json:"workspaces,omitempty"`
	// CheckpointMessage, when set, commits a dirty workspace (every change,
	// untracked files included) with this message before merging; when empty,
	// a dirty workspace is refused with ErrWorkspaceDirty. At most
	// MaxMergeMessageBytes, no NUL. A dry run previews against the work
	// tree as it is (MergeResult.Dirty) and commits nothing.
	CheckpointMessage string `json:"checkpoint_message,omitempty"`
	// DryRun previews the merge and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Order is MergeOrderGiven ("" too) or MergeOrderLeastConflicts.
	Order string `json:"order,omitempty"`
}

// Validate checks the request's shape (the branches' existence is checked by
// the merge itself). Returns ErrInvalidArgument naming the first bad field.
func (r MergeRequest) Validate() error {
	n := len(r.Branches) + len(r.Workspaces)
	if n == 0 {
		return Errorf(ErrInvalidArgument, "merge needs at least one branch or workspace")
	}
	if n > MaxMergeBranches {
		return Errorf(ErrInvalidArgument, "merge takes at most %d branches and workspaces, got %d", MaxMergeBranches, n)
	}
	seen := make(map[string]bool, n)
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
	for _, id := range r.Workspaces {
		if err := ValidateWorkspaceID(id); err != nil {
			return err
		}
		if seen["\x00"+id] {
			return Errorf(ErrInvalidArgument, "workspace %q is listed twice", id)
		}
		seen["\x00"+id] = true
	}
	if len(r.CheckpointMessage) > MaxMergeMessageBytes || strings.IndexByte(r.CheckpointMessage, 0) >= 0 {
		return Errorf(ErrInvalidArgument, "checkpoint_message: at most %d bytes, no NUL", MaxMergeMessageBytes)
	}
	if r.Order != "" && r.Order != MergeOrderGiven && r.Order != MergeOrderLeastConflicts {
		return Errorf(ErrInvalidArgument, "order %q: want %q or %q", clip(r.Order), MergeOrderGiven, MergeOrderLeastConflicts)
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
	// MergeClean (dry run only): the branch would merge without conflict.
	MergeClean = "clean"
)

// BranchMerge is the outcome of one branch of a MergeRequest.
type BranchMerge struct {
	Branch string `json:"branch"`
	// WorkspaceID is the workspace whose branch this is, when the source
	// was given as a workspace (MergeRequest.Workspaces).
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Tip is the branch's commit that was merged or tried ("" when missing).
	Tip string `json:"tip,omitempty"`
	// Status is MergeMerged, MergeConflict, MergeMissing or MergeFailed;
	// in a dry run MergeClean instead of MergeMerged for a branch that
	// would add a merge commit (MergeMerged: already contained in HEAD).
	Status string `json:"status"`
	// ConflictFiles are the workspace-relative paths git could not merge
	// (MergeConflict only), sorted, at most MaxConflictFiles.
	ConflictFiles     []string `json:"conflict_files,omitempty"`
	ConflictTruncated bool     `json:"conflict_truncated,omitempty"`
	// Message is git's first error line (MergeFailed only).
	Message string `json:"message,omitempty"`
}

// MergeResult is the outcome of a MergeRequest: one BranchMerge per requested
// source, in the order they were merged (request order, or the one
// MergeOrderLeastConflicts chose).
type MergeResult struct {
	// DryRun: a preview; nothing was merged and Head is HEAD as it was.
	DryRun bool `json:"dry_run,omitempty"`
	// Dirty (dry run only): the work tree has uncommitted changes; the
	// preview merged them as they are, as the merge does after committing
	// them with a checkpoint message (without one the merge refuses).
	Dirty bool `json:"dirty,omitempty"`
	// Branch is the workspace's branch that received the merges.
	Branch string `json:"branch"`
	// Head is the workspace's HEAD afterwards (the workspace is clean).
	Head     string        `json:"head"`
	Branches []BranchMerge `json:"branches"`
	// CheckpointCommit is the commit made by this call from a dirty workspace
	// (MergeRequest.CheckpointMessage), "" when none was needed.
	CheckpointCommit string `json:"checkpoint_commit,omitempty"`
}

// PullRequestInput is create_pull_request's argument. The head is always the
// workspace branch.
type PullRequestInput struct {
	// Title is required: one line, at most MaxPRTitleRunes characters.
	Title string `json:"title"`
	// Body is the description (Markdown).
	Body string `json:"body,omitempty"`
	// Base is the branch to merge into; "" means the repository's default branch.
	Base string `json:"base,omitempty"`
	// Draft opens it as a draft.
	Draft bool `json:"draft,omitempty"`
	// Reviewers are user logins, or "org/team-slug" for a team.
	Reviewers []string `json:"reviewers,omitempty"`
	// Labels are added to it.
	Labels []string `json:"labels,omitempty"`
}

// Validate checks every field (docs/API.md "Push and pull requests"): a
// one-line title of at most MaxPRTitleRunes characters, a UTF-8 body of at
// most MaxPRBodyRunes, a valid base ref, at most MaxPRReviewers logins or
// org/team-slugs and at most MaxPRLabels printable labels. Errors wrap
// ErrInvalidArgument naming the field.
func (r PullRequestInput) Validate() error {
	if strings.TrimSpace(r.Title) == "" {
		return Errorf(ErrInvalidArgument, "title is required")
	}
	if n := utf8.RuneCountInString(r.Title); n > MaxPRTitleRunes || !utf8.ValidString(r.Title) || strings.ContainsAny(r.Title, "\r\n\x00") {
		return Errorf(ErrInvalidArgument, "title: at most %d characters on one line", MaxPRTitleRunes)
	}
	if utf8.RuneCountInString(r.Body) > MaxPRBodyRunes || !utf8.ValidString(r.Body) || strings.ContainsRune(r.Body, 0) {
		return Errorf(ErrInvalidArgument, "body: at most %d characters of UTF-8 text", MaxPRBodyRunes)
	}
	if r.Base != "" {
		if err := ValidateRef(r.Base); err != nil {
			return err
		}
	}
	if len(r.Reviewers) > MaxPRReviewers {
		return Errorf(ErrInvalidArgument, "at most %d reviewers", MaxPRReviewers)
	}
	for _, rv := range r.Reviewers {
		if !validReviewer(rv) {
			return Errorf(ErrInvalidArgument, "reviewer %q: want a login or org/team-slug", clip(rv))
		}
	}
	if len(r.Labels) > MaxPRLabels {
		return Errorf(ErrInvalidArgument, "at most %d labels", MaxPRLabels)
	}
	for _, l := range r.Labels {
		if strings.TrimSpace(l) == "" || utf8.RuneCountInString(l) > MaxPRLabelRunes || !utf8.ValidString(l) ||
			strings.IndexFunc(l, unicode.IsControl) >= 0 {
			return Errorf(ErrInvalidArgument, "label %q: 1 to %d printable characters", clip(l), MaxPRLabelRunes)
		}
	}
	return nil
}

// FileStatusCodes lists every FileStatus.Status: the two-letter XY codes of
// `git status --porcelain=v1` (X the index, Y the worktree), for
// documentation and schemas.
var FileStatusCodes = func() []string {
	var out []string
	for _, x := range " MTARC" {
		for _, y := range " MTD" {
			if x == ' ' && y == ' ' {
				continue
			}
			out = append(out, string(x)+string(y))
		}
	}
	// Deleted in the index; unmerged; untracked; ignored.
	return append(out, "D ", "DD", "AU", "UD", "UA", "DU", "AA", "UU", "??", "!!", " A", " R", " C")
}()

// LogRequest is log's argument: at most Limit commits (0 = DefaultLogCommits,
// at most MaxLogCommits) reachable from HEAD, newest first.
type LogRequest struct {
	Limit int `json:"limit,omitempty"`
}

// Log limits.
const (
	DefaultLogCommits = 20
	MaxLogCommits     = 500
)

// LogCommit is one commit of log. Date is the author date (RFC 3339).
type LogCommit struct {
	Commit      string `json:"commit"`
	AuthorName  string `json:"author_name"`
	AuthorEmail string `json:"author_email"`
	Date        string `json:"date"`
	Subject     string `json:"subject"`
}

// LogResult lists commits reachable from HEAD, newest first; Truncated is
// set when more commits exist than were returned.
type LogResult struct {
	Commits   []LogCommit `json:"commits"`
	Truncated bool        `json:"truncated"`
}
