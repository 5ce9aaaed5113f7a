package sandbox

import (
	"errors"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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

// PushSpec is one push of a workspace branch (RemoteGit.Push).
type PushSpec struct {
	// GitDir is the bare repository (the repo cache) holding refs/heads/<Branch>.
	GitDir string
	// Repo is the destination; its URL is passed to git explicitly, never a
	// configured remote (an agent can rewrite a repository's config).
	Repo sandboxapi.RepoIdentity
	// Branch is pushed as refs/heads/<Branch>:refs/heads/<Branch>.
	Branch string
	// Lease, when non-nil, adds --force-with-lease=refs/heads/<Branch>:<*Lease>;
	// "" means the remote branch must not exist.
	Lease *string
	// RecordRef, when set, is pointed at the pushed commit after a successful
	// push (normally PushedRef(workspace id)).
	RecordRef string
}

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
	return sandboxapi.PullRequestInput{Title: r.Title, Body: r.Body, Base: r.Base, Draft: r.Draft, Reviewers: r.Reviewers, Labels: r.Labels}.Validate()
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
