package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// fanoutCommand is `sandboxctl fanout start|watch|complete|cancel`
// (docs/API.md "Task fan-out"). Every subcommand names the caller's tenant
// with --user and --project: fan-out ids are per tenant.
func (c *cli) fanoutCommand() *cobra.Command {
	var tenant sandboxapi.Tenant
	cmd := &cobra.Command{
		Use:   "fanout",
		Short: "Run tasks in parallel task workspaces and merge them back into a conversation",
		Long: "Run tasks in parallel task workspaces and merge them back into a conversation.\n" +
			"A fan-out belongs to a tenant, --user and --project (the conversation's): its id is\n" +
			"unique per tenant, and each subcommand finds only that tenant's fan-outs.",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&tenant.UserID, "user", "", "the tenant's user id (the conversation's)")
	pf.StringVar(&tenant.ProjectID, "project", "", "the tenant's project id (the conversation's)")
	_ = cmd.MarkPersistentFlagRequired("user")
	_ = cmd.MarkPersistentFlagRequired("project")
	cmd.AddCommand(c.fanoutStartCommand(&tenant), c.fanoutWatchCommand(&tenant), c.fanoutCompleteCommand(&tenant), c.fanoutCancelCommand(&tenant))
	return cmd
}

// parseTaskFlag parses "id" (a task driven by an external agent) or
// "id:script" (the script runs in the task's workspace).
func parseTaskFlag(v string) (sandboxapi.TaskSpec, error) {
	id, script, _ := strings.Cut(v, ":")
	if err := sandboxapi.ValidateID("task id", id); err != nil {
		return sandboxapi.TaskSpec{}, err
	}
	return sandboxapi.TaskSpec{TaskID: id, Script: script}, nil
}

// fanoutFlags fills in from fanout start's flags: a task per --task
// (parseTaskFlag), each --instructions TASK_ID=TEXT on its task, --accept
// (all, or task ids) and the per-task --timeout in whole seconds. Errors:
// InvalidArgument (a bad task id, instructions for no --task, a timeout
// that is negative or not whole seconds).
func fanoutFlags(in *sandboxapi.FanoutInput, tasks, instructions []string, accept string, timeout time.Duration) error {
	for _, t := range tasks {
		spec, err := parseTaskFlag(t)
		if err != nil {
			return err
		}
		in.Tasks = append(in.Tasks, spec)
	}
	for _, kv := range instructions {
		tid, text, ok := strings.Cut(kv, "=")
		found := false
		for i := range in.Tasks {
			if ok && in.Tasks[i].TaskID == tid {
				in.Tasks[i].Instructions, found = text, true
			}
		}
		if !found {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--instructions %q: want TASK_ID=TEXT for one of the --task ids", kv)
		}
	}
	switch accept {
	case "", "all":
	default:
		in.AcceptTaskIDs = strings.Split(accept, ",")
	}
	if timeout < 0 || timeout%time.Second != 0 {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--timeout must be a whole number of seconds")
	}
	in.TaskTimeoutS = int(timeout / time.Second)
	return nil
}

// newFanoutID is a fresh fan-out id: "f-", the UTC time to the second and 12
// random hex digits.
func newFanoutID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "f-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func (c *cli) fanoutStartCommand(tenant *sandboxapi.Tenant) *cobra.Command {
	var in sandboxapi.FanoutInput
	var tasks, instructions []string
	var accept, id string
	var timeout time.Duration
	var watch bool
	cmd := &cobra.Command{
		Use:   "start --user U --project P --workspace WS --task ID[:SCRIPT] ... [--parallel N] [--accept all|ID,ID] [--timeout D] [--from-fork]",
		Short: "Start a fan-out and print its id",
		Long: "Start a fan-out from a conversation's edit workspace: the workspace is checkpointed (its\n" +
			"uncommitted changes committed), each task gets workspace and branch agent/<tenant>/task-<ID> from that\n" +
			"commit, runs SCRIPT (sh -c; exit 0 = success) or, without one, waits for\n" +
			"`sandboxctl fanout complete`; the accepted tasks that succeeded are then merged into the\n" +
			"conversation in the order given. With --from-fork nothing is committed first: each task is a\n" +
			"fork of the conversation (`sandboxctl fork`), its uncommitted and untracked files included.\n" +
			"The workspace must be the conversation of --user and --project. Prints the fan-out id;\n" +
			"follow it with `fanout watch` (same --user and --project).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := fanoutFlags(&in, tasks, instructions, accept, timeout); err != nil {
				return err
			}
			if id == "" {
				id = newFanoutID()
			}
			sc, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			f, err := sc.StartFanout(cmd.Context(), *tenant, id, in)
			if err != nil {
				return err
			}
			if !watch {
				if c.asJSON {
					return c.printJSON(map[string]string{"fanout_id": f.ID(), "workflow_id": f.WorkflowID()})
				}
				fmt.Fprintln(c.stdout, f.ID())
				return nil
			}
			fmt.Fprintf(c.stderr, "fan-out %s started\n", f.ID())
			return c.watchFanout(cmd, *tenant, f.ID(), time.Second)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&in.ConversationWorkspaceID, "workspace", "", "the conversation's edit workspace id (ws-…)")
	fl.StringArrayVar(&tasks, "task", nil, "a task: ID (driven by an agent, see 'fanout complete') or ID:SCRIPT (run with sh -c); repeat")
	fl.StringArrayVar(&instructions, "instructions", nil, "TASK_ID=TEXT: instructions kept with the task (commit message body); repeat")
	fl.IntVar(&in.MaxParallel, "parallel", 0, fmt.Sprintf("tasks in progress at once (default %d, at most %d)", sandboxapi.DefaultFanoutParallel, sandboxapi.MaxFanoutParallel))
	fl.StringVar(&accept, "accept", "all", "which succeeded tasks to merge: all, or a comma-separated list of task ids")
	fl.Var(durationValue{&timeout}, "timeout", fmt.Sprintf("per-task timeout: a duration or seconds (default %s)", sandboxapi.DefaultTaskTimeout))
	fl.StringVar(&id, "id", "", "fan-out id (default: generated)")
	fl.BoolVar(&watch, "watch", false, "watch the fan-out until it finishes (as 'fanout watch')")
	fl.BoolVar(&in.FromFork, "from-fork", false, "start each task as a fork of the conversation (its uncommitted files included) instead of committing it first")
	_ = cmd.MarkFlagRequired("workspace")
	_ = cmd.MarkFlagRequired("task")
	return cmd
}

func (c *cli) fanoutWatchCommand(tenant *sandboxapi.Tenant) *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch --user U --project P FANOUT_ID",
		Short: "Show a fan-out's progress until it finishes (exit 1 when it failed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.watchFanout(cmd, *tenant, args[0], interval)
		},
	}
	interval = time.Second
	cmd.Flags().Var(durationValue{&interval}, "interval", "how often to poll the progress query: a duration or seconds")
	return cmd
}

// watchFanout prints the progress table of tenant's fan-out id whenever it
// changes (text) or the final report (--json), and fails when the fan-out
// failed.
func (c *cli) watchFanout(cmd *cobra.Command, tenant sandboxapi.Tenant, id string, interval time.Duration) error {
	var state string
	err := runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (sandboxapi.FanoutReport, error) {
		f, err := sc.Fanout(ctx, tenant, id)
		if err != nil {
			return sandboxapi.FanoutReport{}, err
		}
		res, err := f.Watch(ctx, interval, func(r sandboxapi.FanoutReport) {
			if !c.asJSON {
				c.printFanout(r)
			}
		})
		state = res.State
		return res, err
	}, nil) // the text was printed as the report changed
	if err == nil && state != sandboxapi.FanoutCompleted {
		return exitCodeError{exitError}
	}
	return err
}

func (c *cli) printFanout(r sandboxapi.FanoutReport) {
	fmt.Fprintf(c.stdout, "fan-out %s: %s (running %d, max %d) conversation %s branch %s start %s head %s\n",
		r.FanoutID, r.State, r.Running, r.MaxParallel, r.ConversationWorkspaceID, orDash(r.Branch), orDash(short(r.StartCommit)), orDash(short(r.Head)))
	w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "  TASK\tKIND\tSTATUS\tEXIT\tCOMMIT\tFILES\tMERGE\tNOTE")
	for _, t := range r.Tasks {
		exit, files := "-", "-"
		if t.ExitCode != nil {
			exit = fmt.Sprint(*t.ExitCode)
		}
		if t.Diff != nil {
			files = fmt.Sprint(len(t.Diff.Files))
		}
		note := t.Message
		if len(t.ConflictFiles) > 0 {
			note = "conflicts: " + strings.Join(t.ConflictFiles, ", ")
		}
		if r := []rune(note); len(r) > 80 {
			note = string(r[:80]) + "…"
		}
		note = printablePath(note)
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.TaskID, t.Kind, t.Status, exit, orDash(short(t.Commit)), files, orDash(t.Merge), note)
	}
	_ = w.Flush()
	if r.Error != "" {
		fmt.Fprintf(c.stdout, "error: %s\n", printableMessage(r.Error))
	}
}

func (c *cli) fanoutCompleteCommand(tenant *sandboxapi.Tenant) *cobra.Command {
	var failed bool
	var message string
	cmd := &cobra.Command{
		Use:   "complete --user U --project P FANOUT_ID TASK_ID [--failed] [-m MESSAGE]",
		Short: "Tell a fan-out that an agent-driven task is done (complete_task)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := c.fanout(cmd, *tenant, args[0])
			if err != nil {
				return err
			}
			if err := f.CompleteTask(cmd.Context(), args[1], !failed, message); err != nil {
				return err
			}
			if !c.asJSON {
				fmt.Fprintf(c.stdout, "sent complete_task for %s to fan-out %s\n", args[1], f.ID())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&failed, "failed", false, "the task failed: do not merge it")
	cmd.Flags().StringVarP(&message, "message", "m", "", "a note kept in the task's result")
	return cmd
}

// fanout dials the namespace and finds tenant's fan-out id (its errors:
// sandboxclient.Client.Fanout's).
func (c *cli) fanout(cmd *cobra.Command, tenant sandboxapi.Tenant, id string) (*sandboxclient.Fanout, error) {
	sc, err := c.client(cmd.Context())
	if err != nil {
		return nil, err
	}
	return sc.Fanout(cmd.Context(), tenant, id)
}

func (c *cli) fanoutCancelCommand(tenant *sandboxapi.Tenant) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel --user U --project P FANOUT_ID",
		Short: "Cancel a fan-out (its task sessions go on)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := c.fanout(cmd, *tenant, args[0])
			if err != nil {
				return err
			}
			if err := f.Cancel(cmd.Context()); err != nil {
				return err
			}
			if !c.asJSON {
				fmt.Fprintf(c.stdout, "asked fan-out %s to cancel\n", f.ID())
			}
			return nil
		},
	}
}
