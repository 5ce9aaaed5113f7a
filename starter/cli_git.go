package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The git commands on the workspace: status, diff, log, commit (push and
// pr: cli_push.go).

func (c *cli) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status WS",
		Short: "Show the workspace's git status (untracked files count as dirty)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.WorkspaceStatus, error) {
				return s.Status(ctx)
			}, func(st sandboxapi.WorkspaceStatus) error {
				plural := "s"
				if st.CommitsSinceBase == 1 {
					plural = ""
				}
				fmt.Fprintf(c.stdout, "branch %s at %s (base %s, %d commit%s since base, %d unpushed)\n", orDash(st.Branch), short(st.Head), short(st.BaseCommit), st.CommitsSinceBase, plural, st.UnpushedCommits)
				if !st.Dirty {
					fmt.Fprintln(c.stdout, "clean")
				}
				for _, f := range st.Files {
					fmt.Fprintf(c.stdout, "%s %s\n", f.Status, printablePath(f.Path))
				}
				for _, w := range st.ConfigWarnings {
					fmt.Fprintf(c.stderr, "warning: git config %s\n", printablePath(w))
				}
				for _, p := range st.UninitializedSubmodules {
					fmt.Fprintf(c.stderr, "warning: submodule %s is not checked out\n", printablePath(p))
				}
				for _, p := range st.LFSPointers {
					fmt.Fprintf(c.stderr, "warning: %s is a Git LFS pointer (content not fetched)\n", printablePath(p))
				}
				return nil
			})
		},
	}
}

func (c *cli) diffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff WS",
		Short: "Print the agent's change against the workspace's base commit",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.Diff, error) {
				return s.Diff(ctx)
			}, func(d sandboxapi.Diff) error {
				fmt.Fprint(c.stdout, d.Patch)
				if d.Truncated {
					fmt.Fprintf(c.stderr, "sandboxctl: diff truncated (%d bytes in all)\n", d.TotalBytes)
				}
				return nil
			})
		},
	}
}

func (c *cli) commitCommand() *cobra.Command {
	var req sandboxapi.CommitRequest
	cmd := &cobra.Command{
		Use:   "commit WS -m MESSAGE",
		Short: "Commit every change (including untracked files) onto the workspace branch",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.CommitResult, error) {
				return s.Commit(ctx, req)
			}, func(res sandboxapi.CommitResult) error {
				if res.NothingToCommit {
					fmt.Fprintln(c.stdout, "nothing to commit")
					return nil
				}
				fmt.Fprintf(c.stdout, "committed %s on %s\n", res.Commit, res.Branch)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&req.Message, "message", "m", "", "commit message")
	f.StringVar(&req.AuthorName, "author-name", "", "author name (default: sandboxcore agent)")
	f.StringVar(&req.AuthorEmail, "author-email", "", "author email")
	_ = cmd.MarkFlagRequired("message")
	return cmd
}

// logCommand is `sandboxctl log WS [-n N]`.
func (c *cli) logCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "log WS [-n N]",
		Short: "Show the newest commits of the workspace's HEAD",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.LogResult, error) {
				return s.Log(ctx, limit)
			}, func(res sandboxapi.LogResult) error {
				for _, cm := range res.Commits {
					fmt.Fprintf(c.stdout, "%s %s %s %s\n", short(cm.Commit), cm.Date, printableText(cm.AuthorName), printableText(cm.Subject))
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVarP(&limit, "max-count", "n", 0, "at most this many commits (default 20)")
	return cmd
}
