package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The commands against the workspace's runtime: exec, output (the kept
// output of an exec), preview.

func (c *cli) execCommand() *cobra.Command {
	var req sandboxapi.ExecRequest
	var envs []string
	var stdinFile string
	var stream bool
	var network string
	cmd := &cobra.Command{
		Use:   "exec WS [flags] -- CMD [ARG...]",
		Short: "Run a command in the workspace; exits with the command's exit code",
		Long: "Run a command (an argv, no implicit shell: use `sh -c '...'` for one) in the workspace's\n" +
			"runtime, in the worktree root unless --cwd. stdout and stderr are printed as they are\n" +
			"(with --json: base64 in the result); sandboxctl exits with the command's exit code.\n" +
			"Ctrl-C (SIGINT) or SIGTERM cancels the command (its whole process tree is killed) and\n" +
			"exits 130. --stream prints every byte as it comes.",
		Example: "  sandboxctl exec $WS -- git status\n  sandboxctl exec $WS --timeout 2m -- sh -c 'make test 2>&1 | tail -20'\n" +
			"  sandboxctl exec $WS --network limited -- npm install\n  sandboxctl exec $WS --network none -- npm test",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "usage: sandboxctl exec WS -- CMD [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Cmd = args[1:]
			req.Network = sandboxapi.Network(network)
			var err error
			if req.Env, err = parseEnv(envs); err != nil {
				return err
			}
			if stdinFile != "" {
				if req.Stdin, err = c.readFileArg(stdinFile, sandboxapi.MaxStdinBytes+1); err != nil {
					return err
				}
			}
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			streamed := stream && !c.asJSON
			res, err := c.runExec(cmd.Context(), s, req, streamed)
			if err != nil {
				return err
			}
			return c.reportExec(args[0], res, streamed)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Cwd, "cwd", "", "working directory, relative to the workspace root")
	f.Var(secondsValue{&req.TimeoutS}, "timeout", "timeout: a duration (2s, 10m) or seconds (default 10m, at most 2h)")
	f.IntVar(&req.MaxOutputBytes, "max-output", 0, "cap per stream in bytes (head and tail kept)")
	f.StringArrayVar(&envs, "env", nil, "KEY=VALUE added to the command's environment (repeatable)")
	f.StringVar(&stdinFile, "stdin", "", "feed this file to the command's stdin ('-' = sandboxctl's stdin)")
	f.BoolVar(&stream, "stream", false, "print output while the command runs (every byte, as it comes)")
	f.BoolVar(&req.KeepOutput, "keep-output", false, "when the output is cut, keep all of it on the worker (sandboxctl output WS ID prints it)")
	f.BoolVar(&req.BesideSetup, "beside-setup", false, "while the workspace's setup runs, run now beside it instead of waiting for it")
	f.StringVar(&network, "network", "", "network for this command: none, limited or default (default: the workspace's policy; never above it)")
	return cmd
}

// runExec runs req in s: streamed to stdout and stderr as it comes when
// streamed, else in one update. Errors: exec's; an exec that the command's
// context (Ctrl-C, SIGTERM) cancelled is exitCodeError 130, after "command
// cancelled" on stderr (docs/API.md "Cancel").
func (c *cli) runExec(ctx context.Context, s *sandboxclient.Session, req sandboxapi.ExecRequest, streamed bool) (sandboxapi.ExecResult, error) {
	var res sandboxapi.ExecResult
	var err error
	if streamed {
		res, err = s.ExecStream(ctx, req, func(ch sandboxapi.ExecChunk) {
			if ch.Stream == "stderr" {
				_, _ = c.stderr.Write(ch.Data)
			} else {
				_, _ = c.stdout.Write(ch.Data)
			}
		})
	} else {
		res, err = s.Exec(ctx, req)
	}
	if err != nil && ctx.Err() != nil && res.Cancelled {
		fmt.Fprintf(c.stderr, "sandboxctl: command cancelled\n")
		return res, exitCodeError{code: 130}
	}
	return res, err
}

// reportExec prints an exec's result of workspace wsID — as JSON, or its
// output (unless it was streamed already) and notes on stderr (cancelled,
// timed out, cut, kept) — and turns a non-zero exit code into the exit of
// sandboxctl (its low 8 bits, as a shell sees it).
func (c *cli) reportExec(wsID string, res sandboxapi.ExecResult, streamed bool) error {
	if res.Cancelled {
		fmt.Fprintf(c.stderr, "sandboxctl: command cancelled\n")
	}
	err := printResult(c, res, func(res sandboxapi.ExecResult) error {
		if !streamed {
			_, _ = c.stdout.Write(res.Stdout)
			_, _ = c.stderr.Write(res.Stderr)
		}
		if res.TimedOut {
			fmt.Fprintf(c.stderr, "sandboxctl: command timed out\n")
		}
		if streamed {
			return nil
		}
		if res.Truncated {
			fmt.Fprintf(c.stderr, "sandboxctl: output truncated (stdout %d bytes, stderr %d bytes in all)\n", res.StdoutBytes, res.StderrBytes)
		}
		if res.OutputID != "" {
			fmt.Fprintf(c.stderr, "sandboxctl: the whole output is kept: sandboxctl output %s %s\n", wsID, res.OutputID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitCodeError{code: res.ExitCode & 0xff}
	}
	return nil
}

// previewCommand is `sandboxctl preview WS PORT` (docs/API.md "Preview URLs").
func (c *cli) previewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "preview WS PORT",
		Short: "Print a URL reaching PORT of the workspace's running runtime (Daytona, Docker)",
		Long: "Print a URL reaching PORT (1-65535) of the workspace's running runtime: Daytona's signed preview URL,\n" +
			"or with Docker a loopback port of the worker's machine. Start the server first, e.g.\n" +
			"sandboxctl exec WS -- sh -c 'python3 -m http.server 8080 >/dev/null 2>&1 &'.\n" +
			"Runtimes that cannot expose ports refuse with SandboxCommandRejected.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > sandboxapi.MaxPort {
				return sandboxapi.FieldError("port", "PORT %q: want a TCP port number from 1 to %d", args[1], sandboxapi.MaxPort)
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.PreviewURL, error) {
				return s.PreviewURL(ctx, port)
			}, func(u sandboxapi.PreviewURL) error {
				fmt.Fprintln(c.stdout, printablePath(u.URL))
				if u.Token != "" {
					fmt.Fprintf(c.stdout, "token %s (send it as the backend asks, e.g. Daytona's x-daytona-preview-token header)\n", printablePath(u.Token))
				}
				if u.ExpiresAt != nil {
					fmt.Fprintf(c.stdout, "expires %s\n", u.ExpiresAt.Local().Format(time.RFC3339))
				}
				return nil
			})
		},
	}
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
