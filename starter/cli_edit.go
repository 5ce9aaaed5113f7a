package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// editCommand is `sandboxctl edit WS PATH (--old OLD --new NEW | --insert-line N --new TEXT | --create < CONTENT)`.
func (c *cli) editCommand() *cobra.Command {
	var in sandboxapi.EditFileInput
	var create bool
	cmd := &cobra.Command{
		Use:   "edit WS PATH (--old OLD --new NEW | --insert-line N --new TEXT | --create < CONTENT)",
		Short: "Edit a text file in one step on the worker: replace a unique string, insert lines, or create it",
		Long: "Edit a workspace text file in one step on the worker (edit_file, docs/API.md):\n" +
			"  --old OLD --new NEW      replace the one occurrence of OLD (an error says how many there are otherwise)\n" +
			"  --insert-line N --new T  insert T as lines after line N (0 = before the first line)\n" +
			"  --create                 write stdin as the whole file (parents made)\n" +
			"Prints the changed lines, numbered.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Path = args[1]
			switch {
			case create:
				if cmd.Flags().Changed("old") || cmd.Flags().Changed("new") || cmd.Flags().Changed("insert-line") {
					return sandbox.Errorf(sandbox.ErrInvalidArgument, "--create takes the content from stdin, without --old, --new or --insert-line")
				}
				data, err := io.ReadAll(io.LimitReader(c.stdin, sandbox.MaxFileBytes+1))
				if err != nil {
					return err
				}
				in.Command, in.FileText = sandboxapi.EditCreate, string(data)
			case cmd.Flags().Changed("insert-line"):
				in.Command = sandboxapi.EditInsert
			case cmd.Flags().Changed("old"):
				in.Command = sandboxapi.EditStrReplace
			default:
				return sandbox.Errorf(sandbox.ErrInvalidArgument, "edit needs --old (with --new), --insert-line (with --new) or --create")
			}
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.EditFile(cmd.Context(), in)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "edited %s (%d bytes)\n", printablePath(res.Path), res.Bytes)
			for _, line := range strings.SplitAfter(res.Snippet, "\n") {
				if line != "" {
					fmt.Fprintln(c.stdout, printableText(strings.TrimSuffix(line, "\n")))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.OldStr, "old", "", "the text to replace (must occur exactly once)")
	f.StringVar(&in.NewStr, "new", "", "the replacement, or the lines to insert")
	f.IntVar(&in.InsertLine, "insert-line", 0, "insert after this line (0 = before the first line)")
	f.BoolVar(&create, "create", false, "create or replace the file with stdin")
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
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.Log(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			for _, cm := range res.Commits {
				fmt.Fprintf(c.stdout, "%s %s %s %s\n", short(cm.Commit), cm.Date, printableText(cm.AuthorName), printableText(cm.Subject))
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&limit, "max-count", "n", 0, "at most this many commits (default 20)")
	return cmd
}

// outputCommand is `sandboxctl output WS OUTPUT_ID [--stream stderr] [--offset N] [--limit N]`.
func (c *cli) outputCommand() *cobra.Command {
	var in sandboxapi.ReadOutputInput
	cmd := &cobra.Command{
		Use:   "output WS OUTPUT_ID [--stream stdout|stderr] [--offset N] [--limit N]",
		Short: "Print the whole output an exec kept (exec --keep-output), or a page of it",
		Long: "Print the kept output of an exec whose result was cut (exec --keep-output printed its id):\n" +
			"everything from --offset on, or --limit bytes of it.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.OutputID = args[1]
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			all := in.Limit == 0
			page := in
			if all {
				page.Limit = sandboxapi.MaxReadOutputBytes
			}
			for {
				res, err := s.ReadOutput(cmd.Context(), page)
				if err != nil {
					return err
				}
				if c.asJSON {
					return c.printJSON(res)
				}
				if _, err := c.stdout.Write(res.Data); err != nil {
					return err
				}
				if !all || res.EOF || len(res.Data) == 0 {
					if res.EOF && res.Kept < res.Total {
						fmt.Fprintf(c.stderr, "sandboxctl: only the first %d of %d bytes were kept\n", res.Kept, res.Total)
					}
					return nil
				}
				page.Offset += int64(len(res.Data))
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Stream, "stream", "", "stdout (default) or stderr")
	f.Int64Var(&in.Offset, "offset", 0, "start at this byte offset")
	f.IntVar(&in.Limit, "limit", 0, "at most this many bytes (default: everything)")
	return cmd
}
