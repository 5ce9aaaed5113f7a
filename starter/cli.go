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
	"text/tabwriter"
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

func (c *cli) acquireCommand() *cobra.Command {
	var req sandbox.WorkspaceRequest
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
			"*.domain, IP or CIDR, with an optional :port or :low-high). Setting either replaces the policy.",
		Example: "  sandboxctl acquire --repo https://github.com/o/r --user u --project p --conversation c \\\n" +
			"      --network limited --network-allow npm.corp.example:443 --network-allow 10.20.0.0/16:443",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Mode = sandbox.WorkspaceMode(mode)
			req.Network = sandbox.Network(network)
			sc, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			_, h, err := sc.Acquire(cmd.Context(), req)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(h)
			}
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
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.RepoURL, "repo", "", "repository URL (https, ssh; file:// when the worker allows it)")
	f.StringVar(&req.UserID, "user", "", "user id")
	f.StringVar(&req.ProjectID, "project", "", "project id")
	f.StringVar(&mode, "mode", "edit", "edit, task or analysis")
	f.StringVar(&req.ConversationID, "conversation", "", "conversation id (edit mode)")
	f.StringVar(&req.TaskID, "task", "", "task id (task mode)")
	f.StringVar(&req.BaseRef, "ref", "", "base branch, tag or commit (default: the remote's default branch)")
	f.StringVar(&req.BranchName, "branch", "", "branch name override (edit and task modes)")
	f.StringVar(&req.FromBranch, "from-branch", "", "task mode: start the task branch from this local branch")
	f.StringVar(&network, "network", "", "network policy: none, limited or default (the widest network its commands may use)")
	f.StringArrayVar(&req.NetworkAllow, "network-allow", nil, "allow-list entry of the limited network for this workspace (repeatable)")
	_ = cmd.MarkFlagRequired("repo")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("project")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

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

func (c *cli) readCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "read WS PATH",
		Short: "Print a workspace file's bytes",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.ReadFileResult(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			if res.LFSPointer {
				fmt.Fprintf(c.stderr, "sandboxctl: %s is a Git LFS pointer: its content was not fetched\n", printablePath(args[1]))
			}
			_, err = c.stdout.Write(res.Content)
			return err
		},
	}
}

func (c *cli) writeCommand() *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   "write WS PATH < CONTENT",
		Short: "Create or replace a workspace file with stdin",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := strconv.ParseUint(mode, 8, 32)
			if err != nil {
				return sandbox.Errorf(sandbox.ErrInvalidArgument, "--mode %q: want octal permission bits such as 0644", mode)
			}
			data, err := io.ReadAll(io.LimitReader(c.stdin, sandbox.MaxFileBytes+1))
			if err != nil {
				return err
			}
			if len(data) > sandbox.MaxFileBytes {
				return sandbox.Errorf(sandbox.ErrResourceLimit, "content is larger than %d bytes", sandbox.MaxFileBytes)
			}
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := s.WriteFile(cmd.Context(), args[1], data, uint32(m)); err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(sandboxapi.WriteFileResult{Path: args[1], Bytes: int64(len(data))})
			}
			fmt.Fprintf(c.stdout, "wrote %d bytes to %s\n", len(data), printablePath(args[1]))
			return nil
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "0644", "file permission bits (octal)")
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
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.ListTree(cmd.Context(), in)
			if err != nil {
				return err
			}
			entries := res.Entries
			if c.asJSON {
				return c.printJSON(res)
			}
			w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
			for _, e := range entries {
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
		},
	}
	f := cmd.Flags()
	f.IntVar(&in.Depth, "depth", 0, "also list subdirectories this many levels down (2 or 3)")
	f.BoolVar(&in.SkipHidden, "skip-hidden", false, "leave out names starting with '.'")
	f.BoolVar(&in.SkipIgnored, "skip-ignored", false, "leave out what git ignores")
	return cmd
}

func (c *cli) searchCommand() *cobra.Command {
	var req sandbox.SearchRequest
	cmd := &cobra.Command{
		Use:   "search WS PATTERN",
		Short: "Search workspace files (RE2 regexp, or --literal)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Pattern = args[1]
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.Search(cmd.Context(), req)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			for _, m := range res.Matches {
				fmt.Fprintf(c.stdout, "%s:%d:%s\n", printablePath(m.Path), m.Line, printableText(m.Text))
			}
			if res.Truncated {
				fmt.Fprintf(c.stderr, "sandboxctl: more matches were found than returned\n")
			}
			if len(res.Matches) == 0 {
				return exitCodeError{code: 1}
			}
			return nil
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

func (c *cli) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status WS",
		Short: "Show the workspace's git status (untracked files count as dirty)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st, err := s.Status(cmd.Context())
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(st)
			}
			plural := "s"
			if st.CommitsSinceBase == 1 {
				plural = ""
			}
			fmt.Fprintf(c.stdout, "branch %s at %s (base %s, %d commit%s since base, %d unpushed)\n", orDash(st.Branch), short(st.Head), short(st.BaseCommit), st.CommitsSinceBase, plural, st.UnpushedCommits)
			if !st.Dirty {
				fmt.Fprintln(c.stdout, "clean")
			}
			for _, f := range st.Files {
				fmt.Fprintf(c.stdout, "%s %s\n", f.Status, printablePath(f.Path))
			}
			for _, w := range st.ConfigWarnings {
				fmt.Fprintf(c.stderr, "warning: git config %s\n", printablePath(w))
			}
			for _, p := range st.UninitializedSubmodules {
				fmt.Fprintf(c.stderr, "warning: submodule %s is not checked out\n", printablePath(p))
			}
			for _, p := range st.LFSPointers {
				fmt.Fprintf(c.stderr, "warning: %s is a Git LFS pointer (content not fetched)\n", printablePath(p))
			}
			return nil
		},
	}
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (c *cli) diffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff WS",
		Short: "Print the agent's change against the workspace's base commit",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			d, err := s.Diff(cmd.Context())
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(d)
			}
			fmt.Fprint(c.stdout, d.Patch)
			if d.Truncated {
				fmt.Fprintf(c.stderr, "sandboxctl: diff truncated (%d bytes in all)\n", d.TotalBytes)
			}
			return nil
		},
	}
}

func (c *cli) commitCommand() *cobra.Command {
	var req sandbox.CommitRequest
	cmd := &cobra.Command{
		Use:   "commit WS -m MESSAGE",
		Short: "Commit every change (including untracked files) onto the workspace branch",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.Commit(cmd.Context(), req)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			if res.NothingToCommit {
				fmt.Fprintln(c.stdout, "nothing to commit")
				return nil
			}
			fmt.Fprintf(c.stdout, "committed %s on %s\n", res.Commit, res.Branch)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&req.Message, "message", "m", "", "commit message")
	f.StringVar(&req.AuthorName, "author-name", "", "author name (default: sandboxcore agent)")
	f.StringVar(&req.AuthorEmail, "author-email", "", "author email")
	_ = cmd.MarkFlagRequired("message")
	return cmd
}

func (c *cli) hibernateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hibernate WS",
		Short: "Stop the workspace's runtime; the workspace stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.Hibernate(cmd.Context())
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "runtime %s stopped\n", res.RuntimeID)
			return nil
		},
	}
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
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			u, err := s.PreviewURL(cmd.Context(), port)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(u)
			}
			fmt.Fprintln(c.stdout, printablePath(u.URL))
			if u.Token != "" {
				fmt.Fprintf(c.stdout, "token %s (send it as the backend asks, e.g. Daytona's x-daytona-preview-token header)\n", printablePath(u.Token))
			}
			if u.ExpiresAt != nil {
				fmt.Fprintf(c.stdout, "expires %s\n", u.ExpiresAt.Local().Format(time.RFC3339))
			}
			return nil
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
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := s.Release(cmd.Context(), destroy)
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "released %s (runtime %s)\n", res.WorkspaceID, res.Runtime)
			return nil
		},
	}
	cmd.Flags().BoolVar(&destroy, "destroy-runtime", false, "destroy the runtime instead of stopping it")
	return cmd
}

func (c *cli) describeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe WS",
		Short: "Describe the workspace's session (state, runtime, idle timers)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			d, err := s.Describe(cmd.Context())
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(d)
			}
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
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			q := ""
			if user != "" {
				if err := sandbox.ValidateID("user", user); err != nil {
					return err
				}
				q = fmt.Sprintf("%s = '%s'", sandboxapi.SearchAttrUser, user)
			}
			list, err := sc.ListSessions(cmd.Context(), q, limit)
			if all {
				list, err = sc.ListSessionRuns(cmd.Context(), q, limit)
			}
			if err != nil {
				return err
			}
			if c.asJSON {
				return c.printJSON(list)
			}
			w := tabwriter.NewWriter(c.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "WORKSPACE\tSTATE\tSTATUS\tUSER\tPROJECT\tMODE\tBRANCH\tREPO")
			for _, s := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.WorkspaceID, s.State, s.Status, s.User, s.Project, s.Mode, orDash(s.Handle.Branch), s.Repo)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "only this user's sessions")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many sessions")
	cmd.Flags().BoolVar(&all, "all", false, "list the latest run of every session instead, ended ones included (failed acquires, removed workspaces)")
	return cmd
}
