package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The parallel-agents commands (docs/API.md "Overlaps", "Merge preview"):
// overlaps and merge.

// overlapsCommand is `sandboxctl overlaps WS [--json]`.
func (c *cli) overlapsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "overlaps WS",
		Short: "Show the other workspaces of this repository, user and project that changed the same files",
		Long: `Show which other live workspaces of the workspace's repository, user and project changed
files this workspace changed since its base (committed and uncommitted, renames followed), and
whether the changed line ranges intersect, highest risk first. Read-only. Workspaces on other
hosts or evicted are listed as not checked. Exit status 0 whatever is found.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.OverlapsResult, error) {
				return s.Overlaps(ctx)
			}, func(res sandboxapi.OverlapsResult) error {
				fmt.Fprintf(c.stdout, "%s: %d files changed since %s; %d other workspaces checked, %d overlap\n",
					res.WorkspaceID, res.Changed, short(res.BaseCommit), res.Checked, len(res.Overlaps))
				for _, o := range res.Overlaps {
					fmt.Fprintf(c.stdout, "%s %s %s (%s): %d files, %d intersecting\n", o.Risk, o.WorkspaceID, orDash(o.Branch), o.Mode, len(o.Files), o.Intersecting)
					for _, f := range o.Files {
						mark := "disjoint"
						switch {
						case f.RangesIntersect && f.Comparable:
							mark = "intersecting"
						case f.RangesIntersect:
							mark = "whole file"
						}
						fmt.Fprintf(c.stdout, "  %s %s (this: %s, other: %s)\n", mark, printablePath(f.Path), f.ThisChange, f.OtherChange)
					}
					if o.FilesTruncated {
						fmt.Fprintln(c.stdout, "  …")
					}
				}
				for _, u := range res.NotChecked {
					fmt.Fprintf(c.stdout, "not checked %s (%s on host %s)%s\n", u.WorkspaceID, u.Reason, u.HostID, suffix(u.Message))
				}
				return nil
			})
		},
	}
}

// mergeCommand is `sandboxctl merge WS --from BRANCH|WORKSPACE … [--dry-run]`.
func (c *cli) mergeCommand() *cobra.Command {
	var from []string
	var req sandboxapi.MergeRequest
	var leastConflicts bool
	cmd := &cobra.Command{
		Use:   "merge WS --from BRANCH|WORKSPACE [--from …] [--dry-run]",
		Short: "Merge branches or other workspaces into the workspace's branch, or preview the merge",
		Long: `Merge local branches, or other workspaces of the same repository, user and project (by id:
their branch), into the workspace's branch, one after the other (git merge --no-ff); a source
that conflicts is left out and the workspace restored. With --dry-run nothing changes: the merge
is computed outside the worktree and each source's outcome, with the files that would conflict,
is printed. Exit status 0 when every source merged (or would), 1 when one conflicts or fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range from {
				if sandboxapi.ValidateWorkspaceID(f) == nil {
					req.Workspaces = append(req.Workspaces, f)
				} else {
					req.Branches = append(req.Branches, f)
				}
			}
			if leastConflicts {
				req.Order = sandboxapi.MergeOrderLeastConflicts
			}
			if err := req.Validate(); err != nil {
				return err
			}
			// The exit status is the same with --json (README "Exit codes").
			failed := false
			err := runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.MergeResult, error) {
				res, err := s.MergeBranches(ctx, req)
				for _, b := range res.Branches {
					failed = failed || (b.Status != sandboxapi.MergeMerged && b.Status != sandboxapi.MergeClean)
				}
				return res, err
			}, func(res sandboxapi.MergeResult) error {
				verb := "merged into"
				if res.DryRun {
					verb = "preview of merging into"
				}
				fmt.Fprintf(c.stdout, "%s %s at %s\n", verb, res.Branch, short(res.Head))
				if res.Dirty {
					fmt.Fprintln(c.stdout, "the work tree has uncommitted changes: the preview includes them; the merge needs --checkpoint-message")
				}
				for _, b := range res.Branches {
					name := b.Branch
					if b.WorkspaceID != "" {
						name = strings.TrimSpace(b.WorkspaceID + " " + b.Branch)
					}
					status := string(b.Status)
					if res.DryRun {
						// A preview merged nothing: say what it found.
						switch b.Status {
						case sandboxapi.MergeMerged:
							status = "up to date (already merged)"
						case sandboxapi.MergeClean:
							status = "would merge"
						}
					}
					fmt.Fprintf(c.stdout, "%s %s%s\n", status, name, suffix(b.Message))
					for _, f := range b.ConflictFiles {
						fmt.Fprintf(c.stdout, "  conflict %s\n", printablePath(f))
					}
				}
				return nil
			})
			if err == nil && failed {
				return exitCodeError{code: 1}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&from, "from", nil, "a local branch, or a workspace id (ws-…) of the same repository, user and project; repeatable, merged in order")
	f.BoolVar(&req.DryRun, "dry-run", false, "preview: report what would merge and what would conflict, change nothing")
	f.StringVar(&req.CheckpointMessage, "checkpoint-message", "", "commit uncommitted changes with this message first (without it a dirty workspace is refused)")
	f.BoolVar(&leastConflicts, "least-conflicts", false, "merge in the order that conflicts least (previewed first) instead of the given order")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// suffix is ": msg", or "" for an empty msg.
func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + printableText(msg)
}
