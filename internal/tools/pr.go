package tools

import (
	"context"
	"fmt"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// PRInput is sandbox_pr's input.
type PRInput struct {
	Title      string   `json:"title" jsonschema:"the pull request's title (one line)"`
	Body       string   `json:"body,omitempty" jsonschema:"its description (Markdown)"`
	BaseBranch string   `json:"base_branch,omitempty" jsonschema:"the branch to merge into (default: the repository's default branch)"`
	Draft      bool     `json:"draft,omitempty" jsonschema:"open it as a draft"`
	Reviewers  []string `json:"reviewers,omitempty" jsonschema:"logins (or org/team) to request reviews from"`
	Labels     []string `json:"labels,omitempty" jsonschema:"labels to add"`
}

func (c call) pr(ctx context.Context, in PRInput) (sandboxapi.PullRequest, string, error) {
	res, err := c.s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: in.Title, Body: in.Body, Base: in.BaseBranch,
		Draft: in.Draft, Reviewers: in.Reviewers, Labels: in.Labels})
	if err != nil {
		return res, "", err
	}
	verb := "Opened"
	if !res.Created {
		verb = "Found the existing"
	}
	t := fmt.Sprintf("%s pull request #%d: %s (%s into %s, %s).\n", verb, res.Number, res.URL, res.Head, res.Base, res.State)
	for _, w := range res.Warnings {
		t += "warning: " + w + "\n"
	}
	return res, t, nil
}
