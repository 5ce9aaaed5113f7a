package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// detachKey ends `proc attach` without touching the process (Ctrl-]).
const detachKey = 0x1d

// procCommand is `sandboxctl proc start|read|write|kill|list|attach`
// (docs/API.md "Processes").
func (c *cli) procCommand() *cobra.Command {
	proc := &cobra.Command{Use: "proc", Short: "Background processes of a workspace: start, read, write, kill, list, attach"}
	proc.AddCommand(c.procStartCommand(), c.procReadCommand(), c.procWriteCommand(), c.procKillCommand(),
		c.procListCommand(), c.procAttachCommand())
	return proc
}

func (c *cli) procStartCommand() *cobra.Command {
	var in sandboxapi.ProcessStartInput
	var envs []string
	var pty bool
	var rows, cols int
	cmd := &cobra.Command{
		Use:   "start WS [--pty] [--tag T] -- CMD [ARG...]",
		Short: "Start a background process and print its id",
		Long: "Start a background process (an argv; sh -c for a shell line) in the workspace's runtime and\n" +
			"print its id at once. Its output is kept (the newest 1 MiB of each stream): read it with\n" +
			"`proc read`, talk to it with `proc write` (--stdin keeps its stdin open) or, with --pty, `proc attach`.",
		Example: "  sandboxctl proc start $WS --tag web -- python3 -m http.server 8000\n  sandboxctl proc start $WS --pty -- bash",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "usage: sandboxctl proc start WS [--pty] [--tag T] -- CMD [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Cmd = args[1:]
			env, err := parseEnv(envs)
			if err != nil {
				return err
			}
			in.Env = env
			if pty {
				in.PTY = &sandboxapi.TerminalSize{Rows: rows, Cols: cols}
				if w, h, err := term.GetSize(int(os.Stdin.Fd())); err == nil && rows == 0 && cols == 0 {
					in.PTY.Rows, in.PTY.Cols = h, w
				}
				if in.PTY.Rows == 0 || in.PTY.Cols == 0 {
					in.PTY.Rows, in.PTY.Cols = 24, 80
				}
			}
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ProcessStartResult, error) {
				return s.ProcessStart(ctx, in)
			}, func(res sandboxapi.ProcessStartResult) error {
				fmt.Fprintln(c.stdout, res.ProcessID)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&pty, "pty", false, "run it on a pseudo-terminal (for `proc attach`)")
	f.IntVar(&rows, "rows", 0, "terminal rows with --pty (default: this terminal's, else 24)")
	f.IntVar(&cols, "cols", 0, "terminal columns with --pty (default: this terminal's, else 80)")
	f.StringVar(&in.Tag, "tag", "", "a label shown by `proc list`")
	f.StringVar(&in.Cwd, "cwd", "", "working directory, relative to the workspace root")
	f.StringArrayVar(&envs, "env", nil, "KEY=VALUE added to its environment (repeatable)")
	f.BoolVar(&in.Stdin, "stdin", false, "keep its stdin open for `proc write`")
	f.Var((*networkFlag)(&in.Network), "network", "network for this process: none, limited or default (default: the workspace's policy; never above it)")
	return cmd
}

func parseEnv(envs []string) (map[string]string, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range envs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "--env %q: want KEY=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

func (c *cli) procReadCommand() *cobra.Command {
	var follow bool
	var offset, errOffset int64
	var stream string
	cmd := &cobra.Command{
		Use:   "read WS ID [--follow] [--offset N]",
		Short: "Print a process's output (stdout to stdout, stderr to stderr)",
		Long: "Print what a process wrote from --offset on (stdout, or its terminal, to stdout; stderr to\n" +
			"stderr), then exit; with --follow keep printing until it ends and exit with its exit code.\n" +
			"Bytes the buffer no longer holds are reported on stderr. With --json: the last read's\n" +
			"result (next_offset to continue from).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := c.session(ctx, args[0])
			if err != nil {
				return err
			}
			id := args[1]
			out, errw := c.stdout, c.stderr
			both := stream == "" || stream == sandboxapi.StreamStdout
			for {
				in := sandboxapi.ProcessReadInput{ProcessID: id, Stream: stream, Offset: offset, MaxBytes: sandboxapi.MaxProcessReadBytes}
				if both {
					eo := errOffset
					in.StderrOffset = &eo
				}
				var r sandboxapi.ProcessReadResult
				if follow {
					in.WaitMS = 5000
					r, err = s.StreamRead(ctx, in)
				} else {
					r, err = s.ProcessRead(ctx, in)
				}
				if err != nil {
					if follow && ctx.Err() != nil {
						return exitCodeError{code: 130}
					}
					return err
				}
				if c.asJSON && !follow {
					return c.printJSON(r)
				}
				if r.DroppedBytes > 0 {
					fmt.Fprintf(errw, "sandboxctl: %d bytes before offset %d are no longer kept\n", r.DroppedBytes, r.Offset)
				}
				w := out
				if stream == sandboxapi.StreamStderr {
					w = errw
				}
				_, _ = w.Write(r.Data)
				offset = r.NextOffset
				got := len(r.Data)
				if r.Stderr != nil {
					_, _ = errw.Write(r.Stderr.Data)
					errOffset = r.Stderr.NextOffset
					got += len(r.Stderr.Data)
				}
				if r.EOF {
					if c.asJSON {
						return c.printJSON(r)
					}
					if follow && r.ExitCode != 0 {
						return exitCodeError{code: r.ExitCode & 0xff}
					}
					return nil
				}
				if !follow && got == 0 {
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVar(&follow, "follow", false, "keep printing until the process ends; exit with its exit code")
	f.Int64Var(&offset, "offset", 0, "byte offset to start at (a previous read's next_offset)")
	f.Int64Var(&errOffset, "stderr-offset", 0, "byte offset of stderr to start at")
	f.StringVar(&stream, "stream", "", "only this stream: stdout, stderr or pty (default: stdout and stderr)")
	return cmd
}

func (c *cli) procWriteCommand() *cobra.Command {
	var closeIn bool
	cmd := &cobra.Command{
		Use:   "write WS ID [--close]",
		Short: "Send sandboxctl's stdin to a process's stdin (or terminal)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ProcessWriteResult, error) {
				return c.copyStdin(ctx, s, args[1], closeIn)
			}, nil)
		},
	}
	cmd.Flags().BoolVar(&closeIn, "close", false, "close its stdin afterwards (end of file; ^D on a terminal)")
	return cmd
}

// copyStdin sends sandboxctl's stdin to process id's stdin in writes of up
// to 64 KiB, the last one closing it when closeIn; the result counts the
// bytes written. Errors: process_write's.
func (c *cli) copyStdin(ctx context.Context, s *sandboxclient.Session, id string, closeIn bool) (sandboxapi.ProcessWriteResult, error) {
	total := 0
	buf := make([]byte, 64<<10)
	for {
		n, rerr := io.ReadFull(c.stdin, buf)
		if n > 0 || (closeIn && rerr != nil) {
			last := rerr != nil
			res, err := s.ProcessWrite(ctx, id, buf[:n], closeIn && last)
			if err != nil {
				return sandboxapi.ProcessWriteResult{}, err
			}
			total += res.Written
		}
		if rerr != nil {
			return sandboxapi.ProcessWriteResult{ProcessID: id, Written: total}, nil
		}
	}
}

func (c *cli) procKillCommand() *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill WS ID [--signal S]",
		Short: "Send a signal to a process (default TERM; KILL ends its whole tree)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ProcessResult, error) {
				return sandboxapi.ProcessResult{ProcessID: args[1]}, s.ProcessSignal(ctx, args[1], sig)
			}, nil)
		},
	}
	cmd.Flags().StringVar(&sig, "signal", "TERM", "one of "+strings.Join(sandboxapi.ProcessSignals, ", "))
	return cmd
}

func (c *cli) procListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list WS",
		Short: "List the workspace's background processes, live and recently ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(c, cmd, args[0], func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.ProcessListResult, error) {
				return s.ProcessList(ctx)
			}, func(res sandboxapi.ProcessListResult) error {
				w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tTAG\tSTATE\tSTARTED\tOUT/ERR BYTES\tCOMMAND")
				for _, p := range res.Processes {
					state := "running"
					switch {
					case p.Exited && p.Lingering:
						state = fmt.Sprintf("exited %d (children run)", p.ExitCode)
					case p.Exited:
						state = fmt.Sprintf("exited %d (%s)", p.ExitCode, p.ExitReason)
					}
					if p.PTY {
						state += ", pty"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", p.ID, orDash(p.Tag), state, p.StartedAt.Local().Format(time.DateTime),
						p.StdoutBytes, p.StderrBytes, printableMessage(strings.Join(p.Cmd, " ")))
				}
				return w.Flush()
			})
		},
	}
}

func (c *cli) procAttachCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "attach WS ID",
		Short: "Interactive terminal of a PTY process (Ctrl-] detaches)",
		Long: "Connect this terminal to a process started with `proc start --pty`: the terminal is put in\n" +
			"raw mode, keys go to the process, its output comes back, the size follows this window\n" +
			"(SIGWINCH). It ends when the process ends (exit code: the process's) or on Ctrl-]\n" +
			"(the process keeps running; attach again later: the output it wrote meanwhile is replayed\n" +
			"from the buffer).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.attach(cmd.Context(), s, args[1])
		},
	}
}

// attach runs `proc attach`: raw terminal (resized on SIGWINCH), keys to
// process_write, output from StreamRead until the process ends (its exit
// code), Ctrl-] detaches (exit 0) or the context ends (exit 130).
func (c *cli) attach(parent context.Context, s *sandboxclient.Session, id string) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	restore, err := c.rawTerminal(ctx, s, id)
	if err != nil {
		return err
	}
	defer restore()
	detached := c.forwardKeys(ctx, cancel, s, id)
	return c.copyTerminalOutput(ctx, s, id, detached)
}

// rawTerminal puts sandboxctl's stdin, when it is a terminal, in raw mode
// and keeps process id's terminal at its size (now and on every SIGWINCH
// until ctx ends); restore undoes both. Errors: term.MakeRaw's.
func (c *cli) rawTerminal(ctx context.Context, s *sandboxclient.Session, id string) (restore func(), err error) {
	in, isFile := c.stdin.(*os.File)
	if !isFile || !term.IsTerminal(int(in.Fd())) {
		return func() {}, nil
	}
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil, err
	}
	resize := func() {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil {
			_ = s.ProcessResize(ctx, id, h, w)
		}
	}
	resize()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-winch:
				resize()
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		_ = term.Restore(int(in.Fd()), old)
	}, nil
}

// forwardKeys sends what sandboxctl reads from stdin to process id, all
// that one read returns in one write, until stdin ends or the process has
// ended (process_write refused with SandboxCommandRejected: its output says
// so). Ctrl-] (detachKey) sends what came before it, closes the returned
// channel and cancels the attach.
func (c *cli) forwardKeys(ctx context.Context, cancel context.CancelFunc, s *sandboxclient.Session, id string) <-chan struct{} {
	detached := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.stdin.Read(buf)
			if n > 0 {
				data := buf[:n]
				if i := indexByte(data, detachKey); i >= 0 {
					if i > 0 {
						_, _ = s.ProcessWrite(ctx, id, data[:i], false)
					}
					close(detached)
					cancel()
					return
				}
				if _, werr := s.ProcessWrite(ctx, id, data, false); werr != nil && ctx.Err() == nil {
					if sandboxapi.IsCommandRejected(werr) {
						return // the process ended: its output says so
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return detached
}

// copyTerminalOutput writes process id's output (its terminal, or stdout
// then stderr) to sandboxctl's stdout as it comes, until the process ends:
// exitCodeError with its exit code (nil for 0). After detached is closed it
// says so and returns nil; when ctx was cancelled otherwise, exitCodeError
// 130. Errors: StreamRead's.
func (c *cli) copyTerminalOutput(ctx context.Context, s *sandboxclient.Session, id string, detached <-chan struct{}) error {
	var off int64
	for {
		r, err := s.StreamRead(ctx, sandboxapi.ProcessReadInput{ProcessID: id, Offset: off, MaxBytes: 256 << 10, WaitMS: 5000})
		if err != nil {
			select {
			case <-detached:
				fmt.Fprintf(c.stderr, "\r\nsandboxctl: detached from %s\r\n", id)
				return nil
			default:
			}
			if errors.Is(ctx.Err(), context.Canceled) {
				return exitCodeError{code: 130}
			}
			return err
		}
		_, _ = c.stdout.Write(r.Data)
		if r.Stderr != nil {
			_, _ = c.stdout.Write(r.Stderr.Data)
		}
		off = r.NextOffset
		if r.EOF {
			if r.ExitCode != 0 {
				return exitCodeError{code: r.ExitCode & 0xff}
			}
			return nil
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// networkFlag is a --network flag holding a sandboxapi.Network.
type networkFlag sandboxapi.Network

func (n *networkFlag) String() string { return string(*n) }

// Set takes the mode as given; the session refuses an unknown one
// (InvalidArgument) or one above the workspace's policy.
func (n *networkFlag) Set(v string) error { *n = networkFlag(v); return nil }

func (n *networkFlag) Type() string { return "mode" }
