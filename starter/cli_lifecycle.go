package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The lifecycle commands (docs/API.md "Checkpoints", "Fork", "Destroy",
// "Cleanup"): checkpoint [list], rollback, fork, destroy, cleanup.

// checkpointCommand is `sandboxctl checkpoint WS [-m LABEL]` and
// `sandboxctl checkpoint list WS`.
func (c *cli) checkpointCommand() *cobra.Command {
	var label string
	cmd := &cobra.Command{
		Use:   "checkpoint WS [-m LABEL] | checkpoint list WS",
		Short: "Record the workspace's exact state (files, modes, HEAD) as a checkpoint; nothing changes",
		Long: "Record the workspace's exact state — tracked, untracked and deleted files, their permission\n" +
			"bits and the branch head, not ignored files — as a checkpoint in the repo cache. The branch,\n" +
			"the index and the files are not touched. `sandboxctl rollback WS ID` goes back to it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.Checkpoint, error) {
				return s.Checkpoint(ctx, label)
			}, func(cp sandboxapi.Checkpoint) error {
				fmt.Fprintf(c.stdout, "checkpoint %d of %s at %s on %s (%d files changed)\n", cp.ID, args[0], short(cp.Head), orDash(cp.Branch), cp.FilesChanged)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&label, "message", "m", "", "label of the checkpoint")
	list := &cobra.Command{
		Use:   "list WS",
		Short: "List the workspace's checkpoints, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.CheckpointList, error) {
				list, err := s.Checkpoints(ctx)
				return sandboxapi.CheckpointList{Checkpoints: list}, err
			}, func(l sandboxapi.CheckpointList) error {
				w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tCREATED\tHEAD\tBRANCH\tFILES CHANGED\tLABEL")
				for _, cp := range l.Checkpoints {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\n", cp.ID, cp.CreatedAt.Local().Format(time.RFC3339), short(cp.Head), orDash(cp.Branch), cp.FilesChanged, printableText(cp.Label))
				}
				return w.Flush()
			})
		},
	}
	cmd.AddCommand(list)
	return cmd
}

// rollbackCommand is `sandboxctl rollback WS ID`.
func (c *cli) rollbackCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback WS ID",
		Short: "Bring files and HEAD back to a checkpoint (the state left is checkpointed first)",
		Long: "Bring the workspace's files, their permission bits and its branch head back to checkpoint ID\n" +
			"exactly. The state being left is checkpointed first, so `rollback WS <that id>` undoes it.\n" +
			"Changes show as unstaged or untracked afterwards (the index is reset to HEAD).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.Atoi(args[1])
			if err != nil || id < 1 {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "checkpoint id %q: want a number (sandboxctl checkpoint list %s)", args[1], args[0])
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.RollbackResult, error) {
				return s.Rollback(ctx, id)
			}, func(res sandboxapi.RollbackResult) error {
				fmt.Fprintf(c.stdout, "rolled back to checkpoint %d (%s on %s); undo with: sandboxctl rollback %s %d\n",
					res.Checkpoint.ID, short(res.Head), orDash(res.Branch), args[0], res.Undo.ID)
				return nil
			})
		},
	}
}

// forkCommand is `sandboxctl fork WS --task T | --conversation C`.
func (c *cli) forkCommand() *cobra.Command {
	var in sandboxapi.ForkInput
	cmd := &cobra.Command{
		Use:   "fork WS --task T | --conversation C",
		Short: "Create a task or edit workspace holding exactly this workspace's current files",
		Long: "Create a new task (--task) or edit (--conversation) workspace of the same user, project and\n" +
			"repository whose files are exactly this workspace's current ones (uncommitted and untracked\n" +
			"included, ignored not), as uncommitted changes on its own branch from this workspace's HEAD,\n" +
			"with its own session and runtime. This workspace is not changed (a checkpoint records what\n" +
			"was forked).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := in.Validate(); err != nil {
				return err
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ForkResult, error) {
				return s.Fork(ctx, in)
			}, func(res sandboxapi.ForkResult) error {
				h := res.Handle
				fmt.Fprintf(c.stdout, "forked %s into %s (%s, branch %s from %s, checkpoint %d of the source)\nlocal_path %s\n",
					args[0], h.WorkspaceID, h.Mode, h.Branch, short(h.BaseCommit), res.Checkpoint.ID, h.LocalPath)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&in.TaskID, "task", "", "the fork is the task workspace of this task id")
	cmd.Flags().StringVar(&in.ConversationID, "conversation", "", "the fork is the edit workspace of this conversation id")
	return cmd
}

// destroyCommand is `sandboxctl destroy WS [--discard]`.
func (c *cli) destroyCommand() *cobra.Command {
	var discard bool
	cmd := &cobra.Command{
		Use:   "destroy WS [--discard]",
		Short: "End a workspace for good: save unsaved work (unless --discard), remove runtime, worktree, branch and record",
		Long: "Destroy a workspace through its session: its unsaved work (uncommitted, untracked, unpushed\n" +
			"commits) is saved restorably the way eviction saves it — unless --discard — then the runtime,\n" +
			"the worktree, its branch and the workspace record are removed and the session completes. A\n" +
			"later acquire of the same key starts fresh; `sandboxctl restore WS` brings the saved work back.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.DestroyResult, error) {
				return s.Destroy(ctx, discard)
			}, func(res sandboxapi.DestroyResult) error {
				fmt.Fprintf(c.stdout, "%s: %s\n", res.WorkspaceID, printableMessage(res.Message))
				if res.BackupRef != "" {
					fmt.Fprintf(c.stdout, "restore with: sandboxctl restore %s\n", res.WorkspaceID)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&discard, "discard", false, "drop unsaved work, checkpoints and backups instead of keeping them restorable")
	return cmd
}

// cleanupCommand is `sandboxctl cleanup --user U [--project P] [--discard] [--dry-run]`.
func (c *cli) cleanupCommand() *cobra.Command {
	var in sandboxapi.CleanupInput
	cmd := &cobra.Command{
		Use:   "cleanup --user U [--project P] [--discard] [--dry-run]",
		Short: "Destroy every workspace of a user (or project) across hosts, each through its session",
		Long: "Start a CleanupWorkflow (it survives worker restarts) that finds every workspace of the user\n" +
			"(and project) on every host and destroys each through its own session, as `destroy` does\n" +
			"(--discard: as `destroy --discard`, also purging what earlier destroys kept), then print each\n" +
			"outcome. --dry-run only lists them. Exits 1 when a destroy failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := in.Validate(); err != nil {
				return err
			}
			var failed int
			err := runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.CleanupReport, error) {
				run, err := sc.StartCleanup(ctx, in)
				if err != nil {
					return sandboxapi.CleanupReport{}, err
				}
				// The workflow goes on if sandboxctl is interrupted: say where it is.
				fmt.Fprintf(c.stderr, "cleanup %s started\n", run.WorkflowID())
				rep, err := run.Result(ctx)
				failed = rep.Summary.Failed
				return rep, err
			}, c.printCleanup)
			if err == nil && failed > 0 {
				return exitCodeError{code: exitError}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.UserID, "user", "", "the user whose workspaces go")
	f.StringVar(&in.ProjectID, "project", "", "only this project's")
	f.BoolVar(&in.Discard, "discard", false, "destroy with discard (nothing kept restorable)")
	f.BoolVar(&in.DryRun, "dry-run", false, "only list what would be destroyed")
	f.IntVar(&in.MaxParallel, "parallel", 0, "destroys at once (default 4)")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}

// printCleanup prints a cleanup's summary, the hosts it could not search and
// one row per workspace with its outcome.
func (c *cli) printCleanup(rep sandboxapi.CleanupReport) error {
	kind := "cleanup"
	if rep.DryRun {
		kind = "cleanup (dry run)"
	}
	s := rep.Summary
	fmt.Fprintf(c.stdout, "%s %s: %d found, %d destroyed (%d with a backup), %d gone, %d failed\n",
		kind, rep.WorkflowID, s.Found, s.Destroyed, s.Backups, s.Gone, s.Failed)
	for _, h := range rep.Hosts {
		switch {
		case h.Unreachable:
			fmt.Fprintf(c.stdout, "host %s: unreachable\n", h.HostID)
		case h.Error != "":
			fmt.Fprintf(c.stdout, "host %s: %s\n", orDash(h.HostID), printableMessage(h.Error))
		}
	}
	w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "WORKSPACE\tHOST\tPROJECT\tMODE\tOUTCOME\tMESSAGE")
	for _, o := range rep.Workspaces {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", o.WorkspaceID, orDash(o.HostID), orDash(o.ProjectID), orDash(o.Mode), o.Outcome, printableMessage(o.Message))
	}
	return w.Flush()
}
