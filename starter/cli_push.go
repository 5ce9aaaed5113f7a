package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// pushCommand is `sandboxctl push WS [--force-with-lease]`.
func (c *cli) pushCommand() *cobra.Command {
	var lease bool
	cmd := &cobra.Command{
		Use:   "push WS [--force-with-lease]",
		Short: "Push the workspace branch to the repository (credentials stay on the worker)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.PushResult, error) {
				return s.Push(ctx, lease)
			}, func(res sandboxapi.PushResult) error {
				switch res.Status {
				case sandboxapi.PushUpToDate:
					fmt.Fprintf(c.stdout, "%s is up to date at %s\n", res.Branch, short(res.Commit))
				case sandboxapi.PushCreated:
					fmt.Fprintf(c.stdout, "pushed %s to a new remote branch %s\n", short(res.Commit), res.Branch)
				default:
					fmt.Fprintf(c.stdout, "pushed %s: %s..%s (%s)\n", res.Branch, short(res.PreviousRemoteCommit), short(res.Commit), res.Status)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&lease, "force-with-lease", false, "replace a diverged remote branch, only while it is where this workspace last pushed it")
	return cmd
}

// prCommand is `sandboxctl pr create WS --title T [--body B] [--draft] [--base B] [--reviewer R]... [--label L]...`.
func (c *cli) prCommand() *cobra.Command {
	pr := &cobra.Command{Use: "pr", Short: "Pull requests from a workspace branch"}
	var in sandboxapi.PullRequestInput
	var bodyFile string
	create := &cobra.Command{
		Use:   "create WS --title TITLE [--body BODY | --body-file F] [--draft] [--base BRANCH] [--reviewer R]... [--label L]...",
		Short: "Open a pull request from the workspace branch (push it first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bodyFile != "" {
				if in.Body != "" {
					return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--body and --body-file are exclusive")
				}
				data, err := c.readFileArg(bodyFile, 4*sandboxapi.MaxPRBodyRunes+1)
				if err != nil {
					return err
				}
				in.Body = string(data)
			}
			if err := in.Validate(); err != nil {
				return err
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.PullRequest, error) {
				return s.CreatePullRequest(ctx, in)
			}, func(res sandboxapi.PullRequest) error {
				verb := "opened"
				if !res.Created {
					verb = "found open"
				}
				draft := ""
				if res.Draft {
					draft = " (draft)"
				}
				fmt.Fprintf(c.stdout, "%s pull request #%d%s: %s → %s\n%s\n", verb, res.Number, draft, res.Head, res.Base, res.URL)
				for _, w := range res.Warnings {
					fmt.Fprintf(c.stderr, "sandboxctl: warning: %s\n", w)
				}
				return nil
			})
		},
	}
	f := create.Flags()
	f.StringVar(&in.Title, "title", "", "pull request title")
	f.StringVar(&in.Body, "body", "", "pull request description")
	f.StringVar(&bodyFile, "body-file", "", "read the description from a file ('-' = stdin)")
	f.BoolVar(&in.Draft, "draft", false, "open it as a draft")
	f.StringVar(&in.Base, "base", "", "branch to merge into (default: the repository's default branch)")
	f.StringArrayVar(&in.Reviewers, "reviewer", nil, "request a review from a login or org/team (repeatable)")
	f.StringArrayVar(&in.Labels, "label", nil, "add a label (repeatable)")
	_ = create.MarkFlagRequired("title")
	pr.AddCommand(create)
	return pr
}
