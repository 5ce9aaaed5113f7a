package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Exit codes of sandboxctl (besides exec, which exits with the command's code).
const (
	exitOK      = 0
	exitError   = 1
	exitInvalid = 2
)

// exitCodeError makes Main exit with code without printing anything more.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return "exit " + strconv.Itoa(e.code) }

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
	var ec exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	code := exitError
	k := sandbox.KindOf(err)
	switch {
	case k != nil && (errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrInvalidWorkspacePath)):
		code = exitInvalid
	case k == nil && (strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "flag") || strings.Contains(err.Error(), "arg(s)")):
		code = exitInvalid
	}
	var fe flagParseError
	if c.asJSON || (errors.As(err, &fe) && wantsJSON(args)) {
		// --json: the error too is JSON, on stderr: {"error": {"type": "...", "message": "..."}}.
		// When the flags themselves failed to parse, --json among the
		// arguments is taken at its word.
		typ, msg := "UsageError", err.Error()
		if k != nil {
			typ, msg = k.Type, sandbox.Message(err)
		}
		_ = json.NewEncoder(stderr).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
		return code
	}
	fmt.Fprintf(stderr, "error: %s\n", printableMessage(err.Error()))
	return code
}

// wantsJSON reports whether args hold --json before any "--"; used only for
// an error raised while parsing the flags (where a value that happens to be
// "--json", as in `commit WS -m --json`, cannot be told apart).
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// flagError adds to a flag parsing error the way to pass an argument that
// starts with '-' (a file "-n", a search for "-x"): after "--".
func flagError(_ *cobra.Command, err error) error {
	if msg := err.Error(); strings.Contains(msg, "unknown shorthand flag") || strings.Contains(msg, "unknown flag") {
		err = fmt.Errorf("%w (an argument that starts with '-' goes after --, e.g. `sandboxctl exec WS -- ls -la`; "+
			"paths and search patterns may not start with '-': name the file ./-n, search for \\-x)", err)
	}
	if k := sandbox.KindOf(err); k != nil {
		// A flag value's typed error (e.g. a bad --timeout): keep the kind and
		// the flag's name, which pflag puts in front of the value's message.
		err = sandbox.Errorf(k, "%s", strings.Replace(err.Error(), k.Type+": ", "", 1))
	}
	return flagParseError{err}
}

// flagParseError marks an error raised while parsing flags (before --json
// itself could be read).
type flagParseError struct{ error }

func (e flagParseError) Unwrap() error { return e.error }

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
	root.AddCommand(c.acquireCommand(), c.execCommand(), c.readCommand(), c.writeCommand(), c.lsCommand(),
		c.searchCommand(), c.statusCommand(), c.diffCommand(), c.commitCommand(), c.hibernateCommand(),
		c.releaseCommand(), c.describeCommand(), c.listCommand(),
		c.pushCommand(), c.prCommand(), c.editCommand(), c.logCommand(), c.outputCommand(), c.mcpCommand(), c.previewCommand(),
		c.procCommand())
	root.AddCommand(c.fanoutCommand())
	root.AddCommand(c.evictionCommand(), c.pinCommand(), c.unpinCommand(), c.restoreCommand(), c.runtimesCommand())
	root.AddCommand(c.codecServerCommand())
	root.AddCommand(c.checkpointCommand(), c.rollbackCommand(), c.forkCommand(), c.destroyCommand(), c.cleanupCommand())
	return root
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
