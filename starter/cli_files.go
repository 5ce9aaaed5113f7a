package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The file commands: read, write, ls, search, edit.

func (c *cli) readCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "read WS PATH",
		Short: "Print a workspace file's bytes",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ReadFileResult, error) {
				return s.ReadFileResult(ctx, args[1])
			}, func(res sandboxapi.ReadFileResult) error {
				if res.LFSPointer {
					fmt.Fprintf(c.stderr, "sandboxctl: %s is a Git LFS pointer: its content was not fetched\n", printablePath(args[1]))
				}
				_, err := c.stdout.Write(res.Content)
				return err
			})
		},
	}
}

func (c *cli) writeCommand() *cobra.Command {
	var mode, ifMatch string
	cmd := &cobra.Command{
		Use:   "write WS PATH [--if-match HASH] < CONTENT",
		Short: "Create or replace a workspace file with stdin",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := strconv.ParseUint(mode, 8, 32)
			if err != nil {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--mode %q: want octal permission bits such as 0644", mode)
			}
			data, err := io.ReadAll(io.LimitReader(c.stdin, sandboxapi.MaxFileBytes+1))
			if err != nil {
				return err
			}
			if len(data) > sandboxapi.MaxFileBytes {
				return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "content is larger than %d bytes", sandboxapi.MaxFileBytes)
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.WriteFileResult, error) {
				return s.WriteFileIfMatch(ctx, args[1], data, uint32(m), ifMatch)
			}, func(res sandboxapi.WriteFileResult) error {
				fmt.Fprintf(c.stdout, "wrote %d bytes to %s\n", res.Bytes, printablePath(res.Path))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "0644", "file permission bits (octal)")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "write only if the file still has this content_hash (read --json prints it); else SandboxConflict, nothing written")
	return cmd
}

func (c *cli) lsCommand() *cobra.Command {
	var in sandboxapi.ListDirInput
	cmd := &cobra.Command{
		Use:   "ls WS [PATH] [--depth N] [--skip-hidden] [--skip-ignored]",
		Short: "List a workspace directory",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ""
			if len(args) == 2 {
				p = args[1]
			}
			in.Path = p
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ListDirResult, error) {
				return s.ListTree(ctx, in)
			}, func(res sandboxapi.ListDirResult) error {
				w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
				for _, e := range res.Entries {
					name := printablePath(e.Name)
					if e.Type == "dir" {
						name += "/"
					}
					fmt.Fprintf(w, "%s\t%o\t%d\t%s\n", e.Type, e.Mode, e.Size, name)
				}
				if res.Truncated {
					fmt.Fprintf(c.stderr, "sandboxctl: more entries exist than were listed\n")
				}
				return w.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&in.Depth, "depth", 0, "also list subdirectories this many levels down (2 or 3)")
	f.BoolVar(&in.SkipHidden, "skip-hidden", false, "leave out names starting with '.'")
	f.BoolVar(&in.SkipIgnored, "skip-ignored", false, "leave out what git ignores")
	return cmd
}

func (c *cli) searchCommand() *cobra.Command {
	var req sandboxapi.SearchRequest
	cmd := &cobra.Command{
		Use:   "search WS PATTERN",
		Short: "Search workspace files (RE2 regexp, or --literal)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Pattern = args[1]
			// Exit 1 when nothing matched, with --json too (README "Exit codes").
			matched := false
			err := runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.SearchResult, error) {
				res, err := s.Search(ctx, req)
				matched = len(res.Matches) > 0
				return res, err
			}, func(res sandboxapi.SearchResult) error {
				for _, m := range res.Matches {
					fmt.Fprintf(c.stdout, "%s:%d:%s\n", printablePath(m.Path), m.Line, printableText(m.Text))
				}
				if res.Truncated {
					fmt.Fprintf(c.stderr, "sandboxctl: %s\n", tools.SearchStopReason(res))
				}
				if res.SkippedTooLargeCount > 0 {
					fmt.Fprintf(c.stderr, "sandboxctl: %d files over the per-file size limit were not searched: %s\n", res.SkippedTooLargeCount, printableText(strings.Join(res.SkippedTooLarge, ", ")))
				}
				return nil
			})
			if err == nil && !matched {
				return exitCodeError{code: 1}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&req.Literal, "literal", false, "match PATTERN as a literal string")
	f.BoolVarP(&req.IgnoreCase, "ignore-case", "i", false, "ignore case")
	f.StringVar(&req.Path, "path", "", "search under this workspace-relative path")
	f.IntVar(&req.MaxResults, "max", 0, "maximum matches (default 200)")
	f.StringVar(&req.Glob, "glob", "", "only files matching this glob (*.go: by name; src/**/*.ts: by path)")
	return cmd
}

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
					return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--create takes the content from stdin, without --old, --new or --insert-line")
				}
				data, err := io.ReadAll(io.LimitReader(c.stdin, sandboxapi.MaxFileBytes+1))
				if err != nil {
					return err
				}
				in.Command, in.FileText = sandboxapi.EditCreate, string(data)
			case cmd.Flags().Changed("insert-line"):
				in.Command = sandboxapi.EditInsert
			case cmd.Flags().Changed("old"):
				in.Command = sandboxapi.EditStrReplace
			default:
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "edit needs --old (with --new), --insert-line (with --new) or --create")
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.EditFileResult, error) {
				return s.EditFile(ctx, in)
			}, func(res sandboxapi.EditFileResult) error {
				fmt.Fprintf(c.stdout, "edited %s (%d bytes)\n", printablePath(res.Path), res.Bytes)
				for _, line := range strings.SplitAfter(res.Snippet, "\n") {
					if line != "" {
						fmt.Fprintln(c.stdout, printableText(strings.TrimSuffix(line, "\n")))
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.OldStr, "old", "", "the text to replace (must occur exactly once)")
	f.StringVar(&in.NewStr, "new", "", "the replacement, or the lines to insert")
	f.IntVar(&in.InsertLine, "insert-line", 0, "insert after this line (0 = before the first line)")
	f.BoolVar(&create, "create", false, "create or replace the file with stdin")
	f.StringVar(&in.IfMatch, "if-match", "", "edit only if the file still has this content_hash (read --json prints it); else SandboxConflict, nothing changed")
	return cmd
}
