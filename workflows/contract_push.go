package workflows

import "github.com/sandboxcore/sandboxcore/internal/sandbox"

// Payloads of the push and create_pull_request updates (docs/API.md). No
// payload carries a credential: the activities resolve it from the
// workspace's user and repository (DESIGN.md "Payload discipline").
//
// push takes a sandbox.PushRequest ({"force_with_lease": bool}) and returns a
// sandbox.PushResult; create_pull_request takes a PullRequestInput and returns
// a sandbox.PullRequest.

// PullRequestInput is create_pull_request's argument. The head is always the
// workspace branch.
type PullRequestInput struct {
	// Title is required: one line, at most sandbox.MaxPRTitleRunes characters.
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

// Request returns the code host request for head.
func (in PullRequestInput) Request(head string) sandbox.PullRequestRequest {
	return sandbox.PullRequestRequest{Title: in.Title, Body: in.Body, Base: in.Base, Head: head, Draft: in.Draft,
		Reviewers: in.Reviewers, Labels: in.Labels}
}

// PushActivityInput is the push activity's argument.
type PushActivityInput struct {
	// WorkspaceID names the workspace; the activity loads its row.
	WorkspaceID string `json:"workspace_id"`
	// Request is the push update's argument.
	Request sandbox.PushRequest `json:"request"`
}

// PullRequestActivityInput is the create-pull-request activity's argument.
type PullRequestActivityInput struct {
	// WorkspaceID names the workspace; the activity loads its row.
	WorkspaceID string `json:"workspace_id"`
	// Request is the create_pull_request update's argument.
	Request PullRequestInput `json:"request"`
}
