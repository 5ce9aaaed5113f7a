package sandbox

import (
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrRateLimited: the code host (GitHub) refused the call because a rate
// limit is exhausted. It is retryable: the activity that hit it fails with a
// retryable Temporal application error whose NextRetryDelay is the time left
// until the limit resets (see RetryAfter), so Temporal retries exactly then
// (issue 5: "rate limits → retryable, honouring the reset time").
var ErrRateLimited = newKind("SandboxRateLimited", ErrSandbox, true)

// PushedRefPrefix is the namespace, inside a repository's bare mirror, of the
// refs recording what each workspace pushed last: PushedRef(workspace id)
// points at the commit of the workspace branch that the last successful push
// delivered. A workspace whose branch tip differs from it (or that has none)
// has unpushed commits. Fetches never touch this namespace (repocache:
// only refs/remotes/origin/* is pruned).
const PushedRefPrefix = "refs/sandbox/pushed/"

// PushedRef returns PushedRefPrefix + wsID ("refs/sandbox/pushed/ws-…").
// wsID must be a valid workspace id (ValidateWorkspaceID).
func PushedRef(wsID string) string { return PushedRefPrefix + wsID }

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

// PushSpec is one push of a workspace branch (RemoteGit.Push).
type PushSpec struct {
	// GitDir is the bare repository (the repo cache) holding refs/heads/<Branch>.
	GitDir string
	// Repo is the destination; its URL is passed to git explicitly, never a
	// configured remote (an agent can rewrite a repository's config).
	Repo RepoIdentity
	// Branch is pushed as refs/heads/<Branch>:refs/heads/<Branch>.
	Branch string
	// Lease, when non-nil, adds --force-with-lease=refs/heads/<Branch>:<*Lease>;
	// "" means the remote branch must not exist.
	Lease *string
	// RecordRef, when set, is pointed at the pushed commit after a successful
	// push (normally PushedRef(workspace id)).
	RecordRef string
}

// Limits of a pull request request (GitHub's own limits where it has them).
const (
	MaxPRTitleRunes = 256   // characters of a title
	MaxPRBodyRunes  = 65536 // characters of a body
	MaxPRReviewers  = 15    // reviewers per request
	MaxPRLabels     = 100   // labels per request
	MaxPRLabelRunes = 50    // characters of a label
)

// PullRequestRequest asks the code host for a pull request from the
// workspace branch (Head) into Base.
type PullRequestRequest struct {
	// Title is required: one line, at most MaxPRTitleRunes characters.
	Title string `json:"title"`
	// Body is the description (Markdown), at most MaxPRBodyRunes characters.
	Body string `json:"body,omitempty"`
	// Base is the branch to merge into; "" means the repository's default branch.
	Base string `json:"base,omitempty"`
	// Head is the branch with the changes (the workspace branch; set by the service).
	Head string `json:"head,omitempty"`
	// Draft opens the pull request as a draft.
	Draft bool `json:"draft,omitempty"`
	// Reviewers are user logins, or "org/team-slug" for a team (at most MaxPRReviewers).
	Reviewers []string `json:"reviewers,omitempty"`
	// Labels are added to the pull request (at most MaxPRLabels, each at most MaxPRLabelRunes).
	Labels []string `json:"labels,omitempty"`
	// ReuseOpen makes a create that finds an open pull request with the same
	// head and base return it instead of ErrConflict (activity retries: the
	// earlier attempt created it). Never on the wire.
	ReuseOpen bool `json:"-"`
}

// Validate checks a pull request request (Head is not checked: the service
// sets it). Returns ErrInvalidArgument naming the bad field.
func (r PullRequestRequest) Validate() error {
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

// retryAfterError carries a delay before the next attempt.
type retryAfterError struct {
	error
	after time.Duration
}

func (e *retryAfterError) Unwrap() error { return e.error }

// WithRetryAfter annotates err (normally wrapping ErrRateLimited) with the
// delay after which a retry may succeed; negative delays count as zero.
func WithRetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{error: err, after: max(after, 0)}
}

// RetryAfter returns the delay set by WithRetryAfter anywhere in err's chain.
func RetryAfter(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}
