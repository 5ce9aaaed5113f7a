package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// What runs in a workspace, and stopping it (docs/API.md "Cancelling a
// command"): ps and cancel. Both use only calls that never wait for the
// session's lock (the describe query, process_list, cancel and
// process_signal), so they work while a command a killed client left
// behind holds the workspace.

// psResult is `sandboxctl ps --json`: the execs running or queued (their
// update ids) and the live background processes.
type psResult struct {
	RunningExecs []string                 `json:"running_execs"`
	Processes    []sandboxapi.ProcessInfo `json:"processes"`
}

// running collects what runs in the session's workspace.
func running(ctx context.Context, s *sandboxclient.Session) (psResult, error) {
	d, err := s.Describe(ctx)
	if err != nil {
		return psResult{}, err
	}
	out := psResult{RunningExecs: append([]string{}, d.RunningExecs...), Processes: []sandboxapi.ProcessInfo{}}
	list, err := s.ProcessList(ctx)
	if err != nil && !sandboxapi.IsCommandRejected(err) { // a runtime without processes
		return psResult{}, err
	}
	for _, p := range list.Processes {
		if !p.Exited || p.Lingering {
			out.Processes = append(out.Processes, p)
		}
	}
	return out, nil
}

// psCommand is `sandboxctl ps WS [--json]`.
func (c *cli) psCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ps WS",
		Short: "List the commands running in a workspace: execs (by update id) and background processes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], running, func(r psResult) error {
				if len(r.RunningExecs) == 0 && len(r.Processes) == 0 {
					fmt.Fprintln(c.stdout, "nothing running")
				}
				for _, id := range r.RunningExecs {
					fmt.Fprintf(c.stdout, "exec     %s\n", printableText(id))
				}
				for _, p := range r.Processes {
					state := "running since " + p.StartedAt.UTC().Format(time.RFC3339)
					if p.Exited {
						state = "exited, its children still run"
					}
					fmt.Fprintf(c.stdout, "process  %s %s (%s): %s\n", p.ID, orDash(p.Tag), state, printableText(strings.Join(p.Cmd, " ")))
				}
				return nil
			})
		},
	}
}

// cancelOutcome is one line of `sandboxctl cancel`.
type cancelOutcome struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // "exec" or "process"
	// State is the exec's state when cancelled (CancelResult.State), or
	// "killed" for a process.
	State string `json:"state"`
}

// cancelCommand is `sandboxctl cancel WS [ID...|--all]`.
func (c *cli) cancelCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "cancel WS [ID...|--all]",
		Short: "Stop running commands: an exec by its update id, a background process by its id, or --all",
		Long: `Stop commands running in a workspace, such as one a killed client left behind that still holds
the workspace: an exec (its update id, as ps lists it) is cancelled and its whole process tree
killed; a background process (its id) gets KILL. --all stops everything ps lists.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args[1:]
			if all == (len(ids) > 0) {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "give the ids to stop or --all (one of them)")
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) ([]cancelOutcome, error) {
				r, err := running(ctx, s)
				if err != nil {
					return nil, err
				}
				if all {
					ids = slices.Clone(r.RunningExecs)
					for _, p := range r.Processes {
						ids = append(ids, p.ID)
					}
				}
				out := []cancelOutcome{}
				for _, id := range ids {
					if slices.Contains(r.RunningExecs, id) {
						res, err := s.Cancel(ctx, id)
						if err != nil {
							return out, err
						}
						out = append(out, cancelOutcome{ID: id, Kind: "exec", State: res.State})
						continue
					}
					if err := s.ProcessSignal(ctx, id, "KILL"); err != nil {
						if sandboxapi.IsNotFound(err) || sandboxapi.IsInvalidArgument(err) {
							return out, sandboxapi.Errorf(sandboxapi.ErrNotFound, "%s is neither a running exec nor a process of workspace %s (see sandboxctl ps): %s",
								printableText(id), s.WorkspaceID(), sandboxapi.Message(err))
						}
						return out, err
					}
					out = append(out, cancelOutcome{ID: id, Kind: "process", State: "killed"})
				}
				return out, nil
			}, func(out []cancelOutcome) error {
				if len(out) == 0 {
					fmt.Fprintln(c.stdout, "nothing running")
				}
				for _, o := range out {
					fmt.Fprintf(c.stdout, "%s %s: %s\n", o.Kind, printableText(o.ID), o.State)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "stop every running exec and background process of the workspace")
	return cmd
}
