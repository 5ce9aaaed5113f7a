package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// runtimesCommand is `sandboxctl runtimes gc [--dry-run] [--host H]...`
// (docs/API.md "Eviction": orphan runtimes).
func (c *cli) runtimesCommand() *cobra.Command {
	rt := &cobra.Command{Use: "runtimes", Short: "Runtimes of the worker hosts: collect orphan remote sandboxes"}
	var dry bool
	var hosts []string
	gc := &cobra.Command{
		Use:   "gc [--dry-run] [--host H]...",
		Short: "Delete remote sandboxes (managed-by=sandboxcore) whose workspace no longer exists; --dry-run lists them",
		Long: "Ask every host (or --host H) for its orphan runtimes: remote sandboxes it created (Daytona, labelled\n" +
			"managed-by=sandboxcore and with the host's id) whose workspace no longer exists, and delete them\n" +
			"(with --dry-run: only list them). The scheduled eviction run deletes them too.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.EvictionRunResult, error) {
				return sc.CollectOrphanRuntimes(ctx, dry, hosts)
			}, c.printOrphans)
		},
	}
	gc.Flags().BoolVar(&dry, "dry-run", false, "only list the orphan runtimes")
	gc.Flags().StringArrayVar(&hosts, "host", nil, "only this host (repeatable)")
	rt.AddCommand(gc)
	return rt
}

// printOrphans prints the orphan runtimes of each host (a dry run) or what
// deleting each did, then a count.
func (c *cli) printOrphans(res sandboxapi.EvictionRunResult) error {
	w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
	if res.DryRun {
		fmt.Fprintf(w, "HOST\tRUNTIME\tWORKSPACE\n")
	} else {
		fmt.Fprintf(w, "HOST\tRUNTIME\tWORKSPACE\tOUTCOME\tREASON\n")
	}
	n := 0
	for _, h := range res.Hosts {
		switch {
		case h.Unreachable:
			fmt.Fprintf(w, "%s\t(unreachable)\t\n", h.HostID)
			continue
		case h.Plan == nil:
			fmt.Fprintf(w, "%s\t(error: %s)\t\n", h.HostID, printableMessage(h.Error))
			continue
		}
		if res.DryRun {
			for _, a := range h.Plan.Plan.Actions {
				fmt.Fprintf(w, "%s\t%s\t%s\n", h.HostID, printablePath(a.ID), orDash(printablePath(a.WorkspaceID)))
				n++
			}
		} else {
			for _, r := range h.Results {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", h.HostID, printablePath(r.ID), orDash(printablePath(r.WorkspaceID)), r.Outcome, printablePath(r.Reason))
				n++
			}
		}
		for _, note := range h.Plan.Notes {
			fmt.Fprintf(w, "%s\t(%s)\t\n", h.HostID, printablePath(note))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case n == 0:
		fmt.Fprintln(c.stdout, "no orphan runtimes")
	case res.DryRun:
		fmt.Fprintf(c.stdout, "%d orphan runtimes (dry run: nothing deleted)\n", n)
	default:
		fmt.Fprintf(c.stdout, "%d deleted\n", res.Summary.OrphansDeleted)
	}
	return nil
}
