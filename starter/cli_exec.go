package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The commands against the workspace's runtime: exec, output (the kept
// output of an exec), preview.

func (c *cli) execCommand() *cobra.Command {
	var req sandbox.ExecRequest
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
				return sandbox.Errorf(sandbox.ErrInvalidArgument, "usage: sandboxctl exec WS -- CMD [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Cmd = args[1:]
			req.Network = sandbox.Network(network)
			if len(envs) > 0 {
				req.Env = map[string]string{}
				for _, kv := range envs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return sandbox.Errorf(sandbox.ErrInvalidArgument, "--env %q: want KEY=VALUE", kv)
					}
					req.Env[k] = v
				}
			}
			if stdinFile != "" {
				var data []byte
				var err error
				if stdinFile == "-" {
					data, err = io.ReadAll(io.LimitReader(c.stdin, sandbox.MaxStdinBytes+1))
				} else {
					data, err = os.ReadFile(stdinFile)
				}
				if err != nil {
					return err
				}
				req.Stdin = data
			}
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var res sandbox.ExecResult
			if stream && !c.asJSON {
				res, err = s.ExecStream(cmd.Context(), req, func(ch sandbox.ExecChunk) {
					if ch.Stream == "stderr" {
						_, _ = c.stderr.Write(ch.Data)
					} else {
						_, _ = c.stdout.Write(ch.Data)
					}
				})
			} else {
				res, err = s.Exec(cmd.Context(), req)
			}
			if err != nil && cmd.Context().Err() != nil && res.Cancelled {
				fmt.Fprintf(c.stderr, "sandboxctl: command cancelled\n")
				return exitCodeError{code: 130}
			}
			if err != nil {
				return err
			}
			if res.Cancelled {
				fmt.Fprintf(c.stderr, "sandboxctl: command cancelled\n")
			}
			if stream && !c.asJSON {
				if res.TimedOut {
					fmt.Fprintf(c.stderr, "sandboxctl: command timed out\n")
				}
			} else if c.asJSON {
				if err := c.printJSON(res); err != nil {
					return err
				}
			} else {
				_, _ = c.stdout.Write(res.Stdout)
				_, _ = c.stderr.Write(res.Stderr)
				if res.TimedOut {
					fmt.Fprintf(c.stderr, "sandboxctl: command timed out\n")
				}
				if res.Truncated {
					fmt.Fprintf(c.stderr, "sandboxctl: output truncated (stdout %d bytes, stderr %d bytes in all)\n", res.StdoutBytes, res.StderrBytes)
				}
				if res.OutputID != "" {
					fmt.Fprintf(c.stderr, "sandboxctl: the whole output is kept: sandboxctl output %s %s\n", args[0], res.OutputID)
				}
			}
			if res.ExitCode != 0 {
				return exitCodeError{code: res.ExitCode & 0xff}
			}
			return nil
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
	f.StringVar(&network, "network", "", "network for this command: none, limited or default (default: the workspace's policy; never above it)")
	return cmd
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
				return sandbox.FieldError("port", "PORT %q: want a TCP port number from 1 to %d", args[1], sandboxapi.MaxPort)
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
