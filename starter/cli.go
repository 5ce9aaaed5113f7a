package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

type cli struct {
	conn      sandboxclient.Connection
	tlsFlag   bool // --tls, applied when given
	noVerify  bool // --tls-disable-host-verification, applied when given
	taskQueue string
	asJSON    bool
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	sc        *sandboxclient.Client
	started   bool // the command line passed cobra's checks: the command is running
}

// Main runs sandboxctl with args and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// SIGINT and SIGTERM end the command's context: exec cancels its
	// command (exit 130), proc attach and read --follow detach.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if c.sc != nil {
		c.sc.Close()
	}
	if err == nil {
		return exitOK
	}
	if !c.started && sandboxapi.KindOf(err) == nil && !errors.Is(err, errUsage) {
		// Refused before the command ran (cobra: an unknown command, the
		// wrong number of arguments, a required flag not set).
		err = usageError{error: err}
	}
	code := exitCode(err)
	if errors.As(err, new(exitCodeError)) {
		return code // the command said what there was to say
	}
	var ue usageError
	if c.asJSON || (errors.As(err, &ue) && ue.flags && wantsJSON(args)) {
		// --json: the error too is JSON, on stderr: {"error": {"type": "...", "message": "..."}}.
		// When the flags themselves failed to parse, --json among the
		// arguments is taken at its word.
		typ, msg := "UsageError", err.Error()
		if k := sandboxapi.KindOf(err); k != nil {
			typ, msg = k.Type, sandboxapi.Message(err)
		}
		_ = json.NewEncoder(stderr).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
		return code
	}
	fmt.Fprintf(stderr, "error: %s\n", printableMessage(err.Error()))
	return code
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "sandboxctl",
		Short:         "Drive sandboxcore workspaces: acquire, exec, read, write, search, diff, commit",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c.connectionFlags(root)
	root.PersistentFlags().StringVar(&c.taskQueue, "task-queue", envOr("SANDBOX_TASK_QUEUE", sandboxapi.DefaultTaskQueue), "task queue sessions start on (SANDBOX_TASK_QUEUE)")
	root.PersistentFlags().BoolVar(&c.asJSON, "json", false, "print JSON instead of text")
	root.SetFlagErrorFunc(flagError)
	c.markStarted(root)
	root.AddCommand(c.acquireCommand(), c.execCommand(), c.readCommand(), c.writeCommand(), c.lsCommand(),
		c.searchCommand(), c.statusCommand(), c.diffCommand(), c.commitCommand(), c.hibernateCommand(),
		c.releaseCommand(), c.describeCommand(), c.listCommand(),
		c.pushCommand(), c.prCommand(), c.editCommand(), c.logCommand(), c.outputCommand(), c.mcpCommand(), c.previewCommand(),
		c.procCommand(), c.overlapsCommand(), c.mergeCommand(), c.psCommand(), c.cancelCommand(), c.setupCommand())
	root.AddCommand(c.fanoutCommand())
	root.AddCommand(c.evictionCommand(), c.pinCommand(), c.unpinCommand(), c.restoreCommand(), c.runtimesCommand())
	root.AddCommand(c.codecServerCommand())
	root.AddCommand(c.checkpointCommand(), c.rollbackCommand(), c.forkCommand(), c.destroyCommand(), c.cleanupCommand())
	return root
}

// markStarted makes root's PersistentPreRunE (which runs for every command,
// after cobra checked its arguments) check the required flags and flag
// groups — cobra does so only after the hook — and then record that the
// command line was accepted: an untyped error from then on is the command's
// (exit 1), one before it cobra's refusal of the command line (usageError).
func (c *cli) markStarted(root *cobra.Command) {
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return usageError{error: err}
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return usageError{error: err}
		}
		c.started = true
		if pre == nil {
			return nil
		}
		return pre(cmd, args)
	}
}

func (c *cli) client(ctx context.Context) (*sandboxclient.Client, error) {
	if c.sc != nil {
		return c.sc, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sc, err := sandboxclient.Dial(dctx, sandboxclient.DialOptions{
		TaskQueue: c.taskQueue, Connection: c.conn, DefaultAddress: defaultAddress, Logger: discardLogger(),
	})
	if err != nil {
		return nil, connectError(err)
	}
	c.sc = sc
	return c.sc, nil
}

func (c *cli) session(ctx context.Context, wsID string) (*sandboxclient.Session, error) {
	sc, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	return sc.Session(wsID)
}

// readFileArg returns the bytes of the file a flag names: "-" is
// sandboxctl's stdin, read up to stdinLimit bytes (one more than the
// operation takes, so that it refuses an oversized input with its own
// error); a file is read whole. Errors: the read's, untyped (exit 1).
func (c *cli) readFileArg(name string, stdinLimit int64) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(c.stdin, stdinLimit))
	}
	return os.ReadFile(name)
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
