package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// The push and create_pull_request updates (issue 5). Both are mutating (run
// alone, under the session's exclusive lock) and run as regular activities on
// the workspace's host queue with heartbeats (opGit): they reach the network.

func (s *session) validatePush(sandbox.PushRequest) error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.validateNothing()
}

func (s *session) push(ctx workflow.Context, req sandbox.PushRequest) (sandbox.PushResult, error) {
	return writeOp[PushActivityInput, sandbox.PushResult](s, ctx, opGit, ActivityPush, PushActivityInput{WorkspaceID: s.wsID, Request: req})
}

func (s *session) validatePullRequest(in PullRequestInput) error {
	// The head is checked by the activity (it is the workspace branch).
	if err := in.Request("").Validate(); err != nil {
		return appError(err)
	}
	if err := s.writable(); err != nil {
		return err
	}
	return s.validateNothing()
}

func (s *session) createPullRequest(ctx workflow.Context, in PullRequestInput) (sandbox.PullRequest, error) {
	return writeOp[PullRequestActivityInput, sandbox.PullRequest](s, ctx, opGit, ActivityCreatePullRequest, PullRequestActivityInput{WorkspaceID: s.wsID, Request: in})
}
