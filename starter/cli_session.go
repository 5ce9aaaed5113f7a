package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The session commands: acquire, release, hibernate, describe, list.

func (c *cli) acquireCommand() *cobra.Command {
	var req sandboxapi.WorkspaceRequest
	var mode string
	var network string
	cmd := &cobra.Command{
		Use:   "acquire --repo URL --user U --project P --mode edit --conversation C",
		Short: "Get or create a workspace and print its handle",
		Long: "Get or create a workspace (idempotent: the same user, project and conversation — or task, or\n" +
			"base ref for analysis — always return the same workspace).\n" +
			"Modes: edit (--conversation), task (--task), analysis (--ref, read-only).\n" +
			"--network sets the workspace's network policy (none, limited or default, within the worker's\n" +
			"SANDBOX_NETWORK_MAX; default: the stored one, or SANDBOX_RUNTIME_NETWORK for a new workspace);\n" +
			"--network-allow adds allow-list entries of the limited network for this workspace (a host name,\n" +
			"IP or CIDR of public addresses, with an optional :port or :low-high; wildcards and private,\n" +
			"loopback or link-local addresses only through the worker's SANDBOX_NETWORK_ALLOW). Setting\n" +
			"either replaces the policy.",
		Example: "  sandboxctl acquire --repo https://github.com/o/r --user u --project p --conversation c \\\n" +
			"      --network limited --network-allow npm.corp.example:443 --network-allow 203.0.113.0/24:443",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Mode = sandboxapi.WorkspaceMode(mode)
			req.Network = sandboxapi.Network(network)
			return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.Handle, error) {
				_, h, err := sc.Acquire(ctx, req)
				return h, err
			}, c.printHandle)
		},
	}
	f := cmd.Flags()
	workspaceRequestFlags(f, &req, &mode, "repository URL (https, ssh; file:// when the worker allows it)", "edit, task or analysis")
	f.StringVar(&network, "network", "", "network policy: none, limited or default (the widest network its commands may use)")
	f.StringArrayVar(&req.NetworkAllow, "network-allow", nil, "allow-list entry of the limited network for this workspace (repeatable)")
	_ = cmd.MarkFlagRequired("repo")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("project")
	return cmd
}

// requestFlags are the flags workspaceRequestFlags declares.
var requestFlags = []string{"repo", "user", "project", "conversation", "task", "ref", "branch", "from-branch", "mode", "refresh", "setup"}

// workspaceRequestFlags declares on f the flags of a workspace request
// (acquire's, and mcp's), bound to req and mode (the request's mode as
// given, default edit): --repo (its help repoUsage), --user, --project,
// --mode (modeUsage), --conversation, --task, --ref, --branch, --from-branch,
// --refresh, --setup.
func workspaceRequestFlags(f *pflag.FlagSet, req *sandboxapi.WorkspaceRequest, mode *string, repoUsage, modeUsage string) {
	f.StringVar(&req.RepoURL, "repo", "", repoUsage)
	f.StringVar(&req.UserID, "user", "", "user id")
	f.StringVar(&req.ProjectID, "project", "", "project id")
	f.StringVar(mode, "mode", "edit", modeUsage)
	f.StringVar(&req.ConversationID, "conversation", "", "conversation id (edit mode)")
	f.StringVar(&req.TaskID, "task", "", "task id (task mode)")
	f.StringVar(&req.BaseRef, "ref", "", "base branch, tag or commit (default: the remote's default branch)")
	f.StringVar(&req.BranchName, "branch", "", "branch name override (edit and task modes)")
	f.StringVar(&req.FromBranch, "from-branch", "", "task mode: start the task branch from this local branch")
	f.BoolVar(&req.Refresh, "refresh", false, "fetch the repository now, whatever the repo cache's freshness window")
	f.StringVar(&req.Setup, "setup", "", "the repository's setup commands: auto (default: run after the acquire; commands wait for them), wait (return once they ended) or skip")
}

// printHandle prints a workspace handle (acquire) as a two-column table.
func (c *cli) printHandle(h sandboxapi.Handle) error {
	w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "workspace_id\t%s\n", h.WorkspaceID)
	fmt.Fprintf(w, "local_path\t%s\n", h.LocalPath)
	fmt.Fprintf(w, "mode\t%s\n", h.Mode)
	fmt.Fprintf(w, "branch\t%s\n", orDash(h.Branch))
	fmt.Fprintf(w, "base_commit\t%s\n", h.BaseCommit)
	fmt.Fprintf(w, "repo\t%s\n", h.Repo.Key())
	fmt.Fprintf(w, "capabilities\twritable=%t isolated=%t persistent=%t\n", h.Capabilities.Writable, h.Capabilities.Isolated, h.Capabilities.Persistent)
	fmt.Fprintf(w, "runtime\t%s on host %s\n", h.RuntimeKind, h.HostID)
	fmt.Fprintf(w, "network\t%s\n", orDash(string(h.Network)))
	if len(h.NetworkAllow) > 0 {
		fmt.Fprintf(w, "network_allow\t%s\n", strings.Join(h.NetworkAllow, " "))
	}
	fmt.Fprintf(w, "created\t%t\n", h.Created)
	if st := h.Setup; st != nil {
		fmt.Fprintf(w, "setup\t%s\n", setupLine(st))
	}
	if e := h.Environment; e != nil && len(e.Problems) > 0 {
		fmt.Fprintf(w, "environment\t%d problem(s) in %s: sandboxctl describe %s\n", len(e.Problems), strings.Join(e.Sources, ", "), h.WorkspaceID)
	}
	return w.Flush()
}

// setupLine renders a setup state: "done (exit 0, 2.1s)", "running", …,
// and what the run did with a prepared tree ("; prepared tree restored by
// link, 24237 files"); the output tails are in describe --json.
func setupLine(st *sandboxapi.SetupState) string {
	line := st.State
	if st.Ended() && st.State != sandboxapi.SetupSkipped && st.StartedAt != nil {
		line += fmt.Sprintf(" (exit %d, %s)", st.ExitCode, (time.Duration(st.DurationMS) * time.Millisecond).String())
	}
	if p := st.Prepared; p != nil {
		switch p.Action {
		case sandboxapi.PreparedRestored:
			line += fmt.Sprintf("; prepared tree restored by %s, %d files", p.Mode, p.Files)
		case sandboxapi.PreparedSaved:
			line += fmt.Sprintf("; prepared tree saved, %d files", p.Files)
		default:
			line += "; no prepared tree: " + printablePath(p.Note)
		}
	}
	return line
}

// printEnvironment prints a repository environment's rows (its strings
// come from the repository: printed escaped).
func printEnvironment(w io.Writer, e *sandboxapi.RepoEnvironment) {
	fmt.Fprintf(w, "environment\t%s\n", printablePath(strings.Join(e.Sources, ", ")))
	if len(e.Env) > 0 {
		fmt.Fprintf(w, "environment_env\t%s\n", printablePath(strings.Join(slices.Sorted(maps.Keys(e.Env)), " ")))
	}
	if len(e.Setup) > 0 {
		fmt.Fprintf(w, "environment_setup\t%d command(s)\n", len(e.Setup))
	}
	for _, p := range e.Problems {
		fmt.Fprintf(w, "environment_problem\t%s\n", printablePath(p))
	}
}

// setupCommand is `sandboxctl setup WS`: run the setup commands again.
func (c *cli) setupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "setup WS",
		Short: "Run the repository's setup commands again and print their outcome",
		Long: `Run the setup commands the repository names (.devcontainer/devcontainer.json,
.sandboxcore.yaml; docs/RUNTIMES.md "Setup") again now, in the workspace's runtime, and print
their outcome and the tails of their output. A setup already running is waited for. Exit status:
0 when it succeeded, 1 when it failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.SetupState, error) {
				return s.Setup(ctx)
			}, func(st sandboxapi.SetupState) error {
				fmt.Fprintf(c.stdout, "setup %s\n", setupLine(&st))
				if st.Error != "" {
					fmt.Fprintf(c.stdout, "error: %s\n", printablePath(st.Error))
				}
				c.stdout.Write([]byte(st.StdoutTail))
				c.stderr.Write([]byte(st.StderrTail))
				if st.OutputID != "" {
					fmt.Fprintf(c.stdout, "whole output: sandboxctl output %s %s\n", args[0], st.OutputID)
				}
				if st.State != sandboxapi.SetupDone {
					return exitCodeError{code: exitError}
				}
				return nil
			})
		},
	}
}

func (c *cli) releaseCommand() *cobra.Command {
	var destroy bool
	cmd := &cobra.Command{
		Use:   "release WS",
		Short: "End the session: stop (or destroy) the runtime; the workspace stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var live []string
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ReleaseResult, error) {
				live = liveProcesses(ctx, s)
				return s.Release(ctx, destroy)
			}, func(res sandboxapi.ReleaseResult) error {
				fmt.Fprintf(c.stdout, "released %s (runtime %s)\n", res.WorkspaceID, res.Runtime)
				c.printStopped(live)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&destroy, "destroy-runtime", false, "destroy the runtime instead of stopping it")
	return cmd
}

func (c *cli) hibernateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hibernate WS",
		Short: "Stop the workspace's runtime; the workspace stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var live []string
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.HibernateResult, error) {
				live = liveProcesses(ctx, s)
				return s.Hibernate(ctx)
			}, func(res sandboxapi.HibernateResult) error {
				fmt.Fprintf(c.stdout, "runtime %s stopped\n", res.RuntimeID)
				c.printStopped(live)
				return nil
			})
		},
	}
}

// liveProcesses returns the ids of the workspace's background processes
// running now (none when they cannot be listed): what a hibernate or a
// release is about to end.
func liveProcesses(ctx context.Context, s *sandboxclient.Session) []string {
	list, err := s.ProcessList(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, p := range list.Processes {
		if !p.Exited || p.Lingering {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// printStopped says which background processes a hibernate or release
// ended (they list as exited 137, runtime_stopped).
func (c *cli) printStopped(ids []string) {
	if len(ids) == 0 {
		return
	}
	fmt.Fprintf(c.stdout, "stopped %d background process(es), now exited 137 (runtime_stopped); start them again with proc start WS -- CMD:\n", len(ids))
	for _, id := range ids {
		fmt.Fprintf(c.stdout, "  %s\n", printableText(id))
	}
}

func (c *cli) describeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe WS",
		Short: "Describe the workspace's session (state, runtime, idle timers)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.SessionDescription, error) {
				return s.Describe(ctx)
			}, func(d sandboxapi.SessionDescription) error {
				w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
				fmt.Fprintf(w, "workspace_id\t%s\n", d.WorkspaceID)
				fmt.Fprintf(w, "state\t%s\n", d.State)
				if d.Workspace != nil {
					fmt.Fprintf(w, "local_path\t%s\n", d.Workspace.LocalPath)
					fmt.Fprintf(w, "branch\t%s\n", orDash(d.Workspace.BranchName))
					fmt.Fprintf(w, "base_commit\t%s\n", d.Workspace.BaseCommit)
					fmt.Fprintf(w, "repo\t%s\n", d.Workspace.Repo.Key())
					if d.Workspace.PinnedUntil != nil {
						fmt.Fprintf(w, "pinned_until\t%s\n", d.Workspace.PinnedUntil.Format(time.RFC3339))
					}
					fmt.Fprintf(w, "network\t%s\n", orDash(string(d.Workspace.Network)))
					if len(d.Workspace.NetworkAllow) > 0 {
						fmt.Fprintf(w, "network_allow\t%s\n", printablePath(strings.Join(d.Workspace.NetworkAllow, " ")))
					}
				}
				if d.Workspace != nil && d.Workspace.Environment != nil {
					printEnvironment(w, d.Workspace.Environment)
				}
				if st := d.Setup; st != nil {
					fmt.Fprintf(w, "setup\t%s\n", setupLine(st))
					if st.Error != "" {
						fmt.Fprintf(w, "setup_error\t%s\n", printablePath(st.Error))
					}
					if st.OutputID != "" {
						fmt.Fprintf(w, "setup_output\t%s (sandboxctl output %s %s)\n", st.OutputID, d.WorkspaceID, st.OutputID)
					}
				}
				fmt.Fprintf(w, "runtime\t%s (running=%t)\n", d.RuntimeKind, d.RuntimeRunning)
				if r := d.RuntimeReplica; r != nil {
					line := fmt.Sprintf("files %d, synced=%t, recreated %d", r.Files, r.Synced, r.Recreated)
					if r.LastRecreatedAt != nil {
						line += " (last " + r.LastRecreatedAt.Local().Format(time.RFC3339) + ")"
					}
					fmt.Fprintf(w, "replica\t%s\n", line)
					for _, p := range r.NotSynced {
						fmt.Fprintf(w, "not_synced\t%s (a nested git repository: only in the sandbox)\n", printablePath(p))
					}
				}
				fmt.Fprintf(w, "operations\t%d (in flight %d)\n", d.Ops, d.InFlight)
				fmt.Fprintf(w, "last_activity\t%s\n", d.LastActivity.Format(time.RFC3339))
				if d.State == sandboxapi.StateActive || d.State == sandboxapi.StateIdle { // no timer runs otherwise
					if d.IdleStopAt != nil {
						fmt.Fprintf(w, "idle_stop_at\t%s\n", d.IdleStopAt.Format(time.RFC3339))
					}
					fmt.Fprintf(w, "idle_close_at\t%s\n", d.IdleCloseAt.Format(time.RFC3339))
				}
				if d.LastError != "" {
					fmt.Fprintf(w, "last_error\t%s\n", printablePath(d.LastError))
				}
				return w.Flush()
			})
		},
	}
}

func (c *cli) listCommand() *cobra.Command {
	var user string
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workspaces, one row each with its session state (Temporal's visibility store)",
		Long: "List workspaces, one row each (Temporal's visibility store): STATE is the workspace's own state\n" +
			"(docs/API.md \"Session states\"), SESSION the status of its session workflow's run (Running\n" +
			"also while the workspace is released: the session waits, dormant, for the next call;\n" +
			"Completed once it was closed).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) ([]sandboxclient.SessionSummary, error) {
				q := ""
				if user != "" {
					if err := sandboxapi.ValidateID("user", user); err != nil {
						return nil, err
					}
					q = fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrUser, user)
				}
				if all {
					return sc.ListSessionRuns(ctx, q, limit)
				}
				return sc.ListSessions(ctx, q, limit)
			}, func(list []sandboxclient.SessionSummary) error {
				w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "WORKSPACE\tSTATE\tSESSION\tUSER\tPROJECT\tMODE\tBRANCH\tREPO")
				for _, s := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.WorkspaceID, s.State, s.Status, s.User, s.Project, s.Mode, orDash(s.Handle.Branch), s.Repo)
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "only this user's sessions")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many sessions")
	cmd.Flags().BoolVar(&all, "all", false, "list the latest run of every session instead, ended ones included (failed acquires, removed workspaces)")
	return cmd
}
