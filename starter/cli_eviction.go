package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// evictionCommand is `sandboxctl eviction run [--dry-run] [--host H]...` and
// `sandboxctl eviction last [--include-dry-run]`.
func (c *cli) evictionCommand() *cobra.Command {
	ev := &cobra.Command{Use: "eviction", Short: "Tiered eviction runs (EvictionCronWorkflow): run one now, show the last"}
	var in sandboxapi.EvictionInput
	run := &cobra.Command{
		Use:   "run [--dry-run] [--host H]...",
		Short: "Start an eviction run now and print its result (with --dry-run: only the plan)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.EvictionRunResult, error) {
				return sc.RunEviction(ctx, in)
			}, c.printEviction)
		},
	}
	run.Flags().BoolVar(&in.DryRun, "dry-run", false, "plan only: nothing is stopped, destroyed or evicted")
	run.Flags().StringArrayVar(&in.Hosts, "host", nil, "only this host (repeatable)")
	run.Flags().Var(durationValue{&in.ReplyTimeout}, "reply-timeout", "how long to wait for the sessions: a duration or seconds (default 15m)")
	var dry bool
	last := &cobra.Command{
		Use:   "last [--include-dry-run]",
		Short: "Print the result of the most recent completed eviction run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.EvictionRunResult, error) {
				return sc.LastEviction(ctx, dry)
			}, c.printEviction)
		},
	}
	last.Flags().BoolVar(&dry, "include-dry-run", false, "consider dry runs too")
	ev.AddCommand(run, last)
	return ev
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// printEviction prints an eviction run's result: its summary, then per host
// the plan (a dry run, or a host that acted on nothing) or each action's outcome.
func (c *cli) printEviction(res sandboxapi.EvictionRunResult) error {
	s := res.Summary
	kind := "run"
	if res.DryRun {
		kind = "dry run"
	}
	fmt.Fprintf(c.stdout, "eviction %s %s (%s, %s)\n", kind, res.WorkflowID, res.FinishedAt.Local().Format(time.RFC3339), res.FinishedAt.Sub(res.StartedAt).Round(time.Millisecond))
	if !res.DryRun {
		fmt.Fprintf(c.stdout, "stopped %d, destroyed %d, evicted %d, repo caches removed %d, orphan runtimes deleted %d, blocked %d, skipped %d, failed %d, pending %d; freed %s\n",
			s.Stopped, s.Destroyed, s.Evicted, s.CachesFreed, s.OrphansDeleted, s.Blocked, s.Skipped, s.Failed, s.Pending, mib(s.FreedBytes))
	}
	for _, h := range res.Hosts {
		switch {
		case h.Unreachable:
			fmt.Fprintf(c.stdout, "\nhost %s: unreachable\n", h.HostID)
			continue
		case h.Plan == nil:
			fmt.Fprintf(c.stdout, "\nhost %s: %s\n", h.HostID, printableMessage(h.Error))
			continue
		}
		p := h.Plan.Plan
		fmt.Fprintf(c.stdout, "\nhost %s: %s of %s used (%.0f%%, budget by %s), pressure %s; high %s, low %s, severe %s\n",
			h.HostID, mib(p.Usage.UsedBytes), mib(p.Usage.BudgetBytes), 100*fraction(p.Usage), h.Plan.Budget, p.Pressure,
			mib(p.HighBytes), mib(p.LowBytes), mib(p.SevereBytes))
		w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
		if res.DryRun || len(h.Results) == 0 {
			fmt.Fprintf(w, "  #\tACTION\tTIER\tTARGET\tSAVE WORK\tFREES\tPROJECTED\n")
			for i, a := range p.Actions {
				fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%t\t%s\t%s\n", i+1, a.Kind, a.Tier, a.ID, a.SaveWork, mib(a.Bytes), mib(a.ProjectedUsedBytes))
			}
		} else {
			fmt.Fprintf(w, "  ACTION\tTIER\tTARGET\tOUTCOME\tFREED\tREASON\n")
			for _, r := range h.Results {
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Action, r.Tier, r.ID, r.Outcome, mib(r.FreedBytes), printablePath(r.Reason))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if len(p.Actions) == 0 {
			fmt.Fprintf(c.stdout, "  nothing to do\n")
		}
		for _, held := range p.Held {
			fmt.Fprintf(c.stdout, "  kept %s %s: %s\n", held.Kind, held.ID, printablePath(held.Reason))
		}
		if h.Plan.Truncated > 0 {
			fmt.Fprintf(c.stdout, "  %d more actions left to the next run\n", h.Plan.Truncated)
		}
	}
	return nil
}

// pinCommand is `sandboxctl pin WS --until RFC3339 | --for DURATION`.
func (c *cli) pinCommand() *cobra.Command {
	var until string
	var dur time.Duration
	cmd := &cobra.Command{
		Use:   "pin WS --until RFC3339 | --for DURATION",
		Short: "Keep a workspace from eviction until a time (signal pin through its session)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t time.Time
			switch {
			case until != "" && dur != 0:
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--until and --for are exclusive")
			case until != "":
				var err error
				if t, err = time.Parse(time.RFC3339, until); err != nil {
					return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--until %q: want RFC 3339, e.g. 2030-01-02T15:04:05Z", until)
				}
			case dur > 0:
				t = time.Now().Add(dur)
			default:
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "pin needs --until RFC3339 or a positive --for DURATION")
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.EvictionState, error) {
				return s.Pin(ctx, t)
			}, func(st sandboxapi.EvictionState) error {
				fmt.Fprintf(c.stdout, "%s pinned until %s\n", args[0], st.PinnedUntil.Local().Format(time.RFC3339))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "end of the pin, RFC 3339")
	cmd.Flags().Var(durationValue{&dur}, "for", "length of the pin from now: a duration (e.g. 72h) or seconds")
	return cmd
}

// unpinCommand is `sandboxctl unpin WS`.
func (c *cli) unpinCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unpin WS",
		Short: "Drop a workspace's pin (signal unpin through its session)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.EvictionState, error) {
				return s.Unpin(ctx)
			}, func(st sandboxapi.EvictionState) error {
				fmt.Fprintf(c.stdout, "%s unpinned\n", args[0])
				return nil
			})
		},
	}
}

// restoreCommand is `sandboxctl restore WS`.
func (c *cli) restoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore WS",
		Short: "Bring back the work an eviction or a destroy saved, byte for byte",
		Long: "Bring back saved work (update restore): an evicted workspace is re-created at its branch tip\n" +
			"with its saved files (any acquire of it does the same); a destroyed one is re-created from\n" +
			"what its destroy kept, or, when its key was acquired fresh since, its destroy backup is\n" +
			"written into that fresh workspace. Files come back byte for byte with their permission bits;\n" +
			"the index is left at HEAD, so every saved change shows as unstaged or untracked.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.Handle, error) {
				return s.Restore(ctx)
			}, func(h sandboxapi.Handle) error {
				if h.RestoredFrom != "" {
					fmt.Fprintf(c.stdout, "%s restored at %s from %s\n", h.WorkspaceID, h.LocalPath, h.RestoredFrom)
				} else {
					fmt.Fprintf(c.stdout, "%s is at %s (nothing saved to restore)\n", h.WorkspaceID, h.LocalPath)
				}
				return nil
			})
		},
	}
}

// fraction is usage over budget (0 without a budget).
func fraction(u sandboxapi.EvictionUsage) float64 {
	if u.BudgetBytes <= 0 {
		return 0
	}
	return float64(u.UsedBytes) / float64(u.BudgetBytes)
}
