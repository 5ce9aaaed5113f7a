package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Options configure NewServer.
type Options struct {
	// Version is the server's version in the MCP handshake.
	Version string
	// Logger receives the server's own log (nil: discarded).
	Logger *slog.Logger
	// ListWait bounds how long a tools/list waits for the workspace's first
	// acquire before answering with what the binding alone tells (0: 20 s);
	// the tool list is completed later with notifications/tools/list_changed.
	ListWait time.Duration
}

// Server is the MCP server of one workspace's tool surface.
type Server struct {
	*mcp.Server
	ws   *Workspace
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	installed []string // tool names on the server, in order
	caps      Caps
	started   bool
	first     chan struct{} // closed when the first acquire attempt ended

	// interactive: the commands of sandbox_exec and what of their output
	// was returned.
	interactive Interactive
}

// NewServer returns the MCP server (official Go SDK) of ws's tool surface:
// Tools(caps) for what ws may do, installed on the first tools/list or
// tools/call, after acquiring the workspace (a tools/list waits at most
// Options.ListWait for it). ctx bounds that first acquire.
func NewServer(ctx context.Context, ws *Workspace, opts Options) *Server {
	if opts.ListWait == 0 {
		opts.ListWait = 20 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{ws: ws, opts: opts, log: log, first: make(chan struct{})}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "sandboxcore", Title: "sandboxcore workspace", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: Instructions(ws.Caps()),
		Logger:       log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(rctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				s.ensure(ctx, rctx, opts.ListWait)
			case "tools/call":
				s.ensure(ctx, rctx, 0)
			}
			return next(rctx, method, req)
		}
	})
	return s
}

// Instructions returns the MCP server instructions for caps: one phrase
// for each tool Tools(caps) offers, in its order (toolPhrase), so they
// name every tool offered and no other (on a read-only workspace, or one
// not known yet, no sandbox_shell, sandbox_output, commit or push). The
// server sends them once, at initialize, so NewServer uses the
// capabilities known when it is made.
func Instructions(caps Caps) string {
	b := "Tools working in one sandboxcore workspace: a git worktree of the user's repository on its own branch, " +
		"kept durably by the service. Paths are relative to the repository root. "
	var phrases []string
	for _, t := range Tools(caps) {
		phrases = append(phrases, toolPhrase(t.Def.Name, caps.Writable))
	}
	list := strings.Join(phrases[:len(phrases)-1], ", ") + " and " + phrases[len(phrases)-1] + "."
	if !caps.Writable {
		return b + "The workspace is read-only: " + list
	}
	return b + strings.ToUpper(list[:1]) + list[1:] + " Work is kept across sessions: commit it with sandbox_git when done."
}

// toolPhrase says what the tool name is for, in the instructions of a
// writable workspace or a read-only one; a tool without a phrase of its
// own is named with its title.
func toolPhrase(name string, writable bool) string {
	switch name {
	case TextEditor:
		if writable {
			return "read and change files with sandbox_text_editor"
		}
		return "view files and directories with sandbox_text_editor (view)"
	case Shell:
		return "run commands with sandbox_shell (sh -c in an isolated runtime)"
	case Output:
		return "page through long output with sandbox_output"
	case ExecToolName:
		return "start long-running or interactive commands (dev servers, watchers, REPLs) with sandbox_exec"
	case WriteStdinToolName:
		return "send them input, poll or stop them with sandbox_write_stdin"
	case Search:
		return "find code with sandbox_search"
	case Git:
		if writable {
			return "see, commit and push your work with sandbox_git"
		}
		return "see its state, changes against the base commit and history with sandbox_git (status, diff, log)"
	case PR:
		return "open a pull request with sandbox_pr"
	case Overlaps:
		return "check with sandbox_overlaps whether other agents on this repository changed the same files"
	case SetupTool:
		return "see or re-run the repository's dependency setup with sandbox_setup"
	}
	return "use " + name
}

// ensure installs the tool set: once the workspace is acquired, the full set
// for its capabilities; before that (or when acquiring failed) the set the
// binding alone allows. A tools/call waits for the first acquire attempt to
// end (wait 0); a tools/list at most wait.
func (s *Server) ensure(lifetime, rctx context.Context, wait time.Duration) {
	s.mu.Lock()
	if !s.started {
		s.started = true
		go func() {
			defer close(s.first)
			if _, _, err := s.ws.Acquire(lifetime); err != nil {
				s.log.Warn("acquire the workspace", "error", err)
			}
			s.install()
		}()
	}
	s.mu.Unlock()
	if _, ok := s.ws.Known(); !ok {
		var timeout <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-s.first:
		case <-timeout:
		case <-rctx.Done():
		}
	}
	s.install()
}

// install puts Tools(s.ws.Caps()) on the server when it differs from what
// is there (the SDK then notifies clients that the list changed).
func (s *Server) install() {
	s.mu.Lock()
	defer s.mu.Unlock()
	caps := s.ws.Caps()
	if s.installed != nil && caps == s.caps {
		return
	}
	set := Tools(caps)
	var names []string
	for _, t := range set {
		names = append(names, t.Def.Name)
	}
	var gone []string
	for _, n := range s.installed {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.RemoveTools(gone...)
	}
	for _, t := range set {
		s.AddTool(t.Def, s.handler(t))
	}
	s.installed, s.caps = names, caps
}

// Tool is one tool of the surface: its MCP declaration (name, description,
// input and output schemas, annotations) and how it runs.
type Tool struct {
	Def *mcp.Tool
	run func(ctx context.Context, c call, args json.RawMessage) (structured any, text string, err error)
	in  *jsonschema.Resolved
}

// Tools returns the tool set for caps (README "Use it from an agent"): on
// a writable workspace every tool but sandbox_pr, which needs a code host
// too; on a read-only (analysis) workspace — or one not known yet — only
// the read tools: sandbox_text_editor with view only, sandbox_search and
// sandbox_git with status, diff and log. What is left out is absent, not
// failing.
func Tools(caps Caps) []Tool {
	w := caps.Writable
	editorCommands := []string{"view"}
	gitCommands := []string{"status", "diff", "log"}
	if w {
		editorCommands = []string{"view", sandboxapi.EditCreate, sandboxapi.EditStrReplace, sandboxapi.EditInsert}
		gitCommands = append(gitCommands, writeGitCommands...)
	}
	var set []Tool
	editorDesc := "View a file of the workspace with numbered lines (view_range [start, end] for a part) or a directory two levels deep (hidden and git-ignored entries left out)."
	editorAnn := &mcp.ToolAnnotations{Title: "Text editor", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	if w {
		editorDesc += " Create a file (create: file_text, parents made), replace a unique string (str_replace: old_str must occur exactly once — add surrounding lines to make it unique; new_str may be empty), or insert lines (insert: new_str after line insert_line, 0 = before the first line). Edits are applied in one step by the service and answer with the numbered lines around the change."
		editorAnn = &mcp.ToolAnnotations{Title: "Text editor", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}
	}
	set = append(set, newTool(TextEditor, editorDesc, editorAnn, map[string][]string{"command": editorCommands},
		func(ctx context.Context, c call, in EditorInput) (EditorOutput, string, error) {
			if !slices.Contains(editorCommands, in.Command) {
				return EditorOutput{}, "", invalid("command", "command %q: want %v", sandboxapi.Clip(in.Command, 40), editorCommands)
			}
			return c.editor(ctx, in)
		}))
	if w {
		set = append(set,
			newTool(Shell, "Run a shell command (/bin/sh -c) in the workspace's isolated runtime, in the repository root. Returns the exit code (a non-zero exit is a result, not an error), stdout and stderr. Long output keeps its head and tail, says how much was cut and gives an output_id: read the whole of it with sandbox_output. Commit with sandbox_git, not git commit (the repository's object store is read-only inside the runtime).",
				&mcp.ToolAnnotations{Title: "Shell", DestructiveHint: ptr(true)}, map[string][]string{"network": {"none", "limited", "default"}},
				func(ctx context.Context, c call, in ShellInput) (ShellOutput, string, error) { return c.shell(ctx, in) }),
			newTool(Output, "Read a page of the whole output of a sandbox_shell command that was cut (its output_id): offset and limit in bytes, stream stdout (default) or stderr; follow next_offset until eof.",
				&mcp.ToolAnnotations{Title: "Command output", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
				map[string][]string{"stream": {sandboxapi.StreamStdout, sandboxapi.StreamStderr}},
				func(ctx context.Context, c call, in OutputInput) (OutputPage, string, error) {
					return c.output(ctx, in)
				}),
			newTool(ExecToolName, "Start a shell command (/bin/sh -c) in the workspace's runtime as a background process and return after yield_time_ms (250 to 30000, default 10000) with its output so far: the exit code when it ended, else a session_id to continue with sandbox_write_stdin (send input, poll for more output, kill). For dev servers, watchers, REPLs and long builds; tty runs it on a terminal. A server it starts is reachable from later commands over the runtime's loopback.",
				&mcp.ToolAnnotations{Title: "Interactive command", DestructiveHint: ptr(true)}, nil,
				func(ctx context.Context, c call, in ExecToolInput) (ExecToolOutput, string, error) {
					return c.processes().Exec(ctx, c.s, in)
				}),
			newTool(WriteStdinToolName, "Continue a command sandbox_exec left running (its session_id): write chars to its stdin or terminal (\\n ends a line, \\u0003 is Ctrl-C on a terminal; empty chars only polls), or kill it and everything it started; returns after yield_time_ms (250 to 30000, default 250) with the output since the last call, and the exit code once it ended.",
				&mcp.ToolAnnotations{Title: "Command input", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}, nil,
				func(ctx context.Context, c call, in WriteStdinInput) (ExecToolOutput, string, error) {
					return c.processes().WriteStdin(ctx, c.s, in)
				}),
			overlapsTool(),
			setupTool())
	}
	set = append(set, newTool(Search, "Search the workspace's files for lines matching a regular expression (RE2), or a plain string with literal. Case is smart by default (insensitive unless the pattern has an upper-case letter). glob keeps only matching files (*.go by name, src/**/*.ts by path); path searches under a directory. Binary files, .git and symlinks are skipped.",
		&mcp.ToolAnnotations{Title: "Search", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
		map[string][]string{"case": {"smart", "sensitive", "insensitive"}},
		func(ctx context.Context, c call, in SearchInput) (SearchOutput, string, error) {
			return c.search(ctx, in)
		}))
	gitDesc := "Git in the workspace: status (branch, changed and untracked files, commits since the base), diff (everything changed against the workspace's base commit, committed or not; paths to narrow it), log (the newest commits, limit)."
	gitAnn := &mcp.ToolAnnotations{Title: "Git", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	if w {
		gitDesc += " commit (every change, untracked files included, or paths; a message is required) onto the workspace's branch; push the branch to the same branch of the repository (force_with_lease to replace what this workspace pushed before); checkpoint records the exact current files and HEAD (label optional) without committing, checkpoints lists them, rollback (checkpoint id) brings files and HEAD back to one, checkpointing the state it leaves first so a rollback can be undone."
		gitAnn = &mcp.ToolAnnotations{Title: "Git", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}
	}
	set = append(set, newTool(Git, gitDesc, gitAnn, map[string][]string{"command": gitCommands},
		func(ctx context.Context, c call, in GitInput) (GitOutput, string, error) {
			if !slices.Contains(gitCommands, in.Command) {
				return GitOutput{Command: in.Command}, "", invalid("command", "command %q: want %v", sandboxapi.Clip(in.Command, 40), gitCommands)
			}
			return c.git(ctx, in, w)
		}))
	if w && caps.CodeHost {
		set = append(set, newTool(PR, "Open a pull request from the workspace's branch (push it first with sandbox_git push) into base_branch (default: the repository's default branch), optionally as a draft, with reviewers and labels. An open pull request for the branch is returned as it is.",
			&mcp.ToolAnnotations{Title: "Pull request", IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}, nil,
			func(ctx context.Context, c call, in PRInput) (sandboxapi.PullRequest, string, error) {
				return c.pr(ctx, in)
			}))
	}
	return set
}

func ptr[T any](v T) *T { return &v }

// newTool declares a tool whose input schema is In's (with the given
// enumerations on its properties; a property whose description starts
// with "deprecated:" is marked deprecated) and whose output schema is
// Out's or, for a tool error, ErrorOutput's.
func newTool[In, Out any](name, desc string, ann *mcp.ToolAnnotations, enums map[string][]string, fn func(context.Context, call, In) (Out, string, error)) Tool {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: input schema of %s: %v", name, err))
	}
	for prop, vals := range enums {
		p := in.Properties[prop]
		if p == nil {
			panic(fmt.Sprintf("tools: %s has no property %s", name, prop))
		}
		for _, v := range vals {
			p.Enum = append(p.Enum, v)
		}
	}
	for _, p := range in.Properties {
		if strings.HasPrefix(p.Description, "deprecated:") {
			p.Deprecated = true
		}
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tools: input schema of %s: %v", name, err))
	}
	out := OutputSchema[Out]()
	if ann != nil && ann.Title == "" {
		ann.Title = name
	}
	return Tool{
		Def: &mcp.Tool{Name: name, Description: desc, InputSchema: in, OutputSchema: out, Annotations: ann},
		in:  resolved,
		run: func(ctx context.Context, c call, args json.RawMessage) (any, string, error) {
			var v In
			if err := wire.CheckDuplicateKeys(name, args, reflect.TypeFor[In]()); err != nil {
				return nil, "", err
			}
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil {
				return nil, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %v", name, err)
			}
			o, t, err := fn(ctx, c, v)
			return o, t, err
		},
	}
}

// OutputSchema is the output schema of a tool whose result is Out: an
// object that is either Out or an ErrorOutput (the structured content of a
// tool error).
func OutputSchema[Out any]() *jsonschema.Schema {
	res, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(err)
	}
	e, err := jsonschema.For[ErrorOutput](nil)
	if err != nil {
		panic(err)
	}
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{res, e}}
}

// handler adapts t to the SDK: arguments validated against the input
// schema, the workspace acquired, the tool run; the result has text and
// structured content, a typed error is an isError result carrying it.
func (s *Server) handler(t Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = json.RawMessage("{}")
		}
		// A duplicate key would be validated with one value and decoded
		// with another; t.run checks again knowing the argument type
		// (keys differing in case are then the same field's).
		if err := wire.CheckDuplicateKeys(t.Def.Name, args, nil); err != nil {
			return errorResult(err), nil
		}
		var m map[string]any
		if err := json.Unmarshal(args, &m); err != nil {
			return errorResult(sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: the arguments are not a JSON object: %v", t.Def.Name, err)), nil
		}
		if err := t.in.Validate(m); err != nil {
			return errorResult(sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %v", t.Def.Name, err)), nil
		}
		sess, _, err := s.ws.Acquire(ctx)
		if err != nil {
			return errorResult(err), nil
		}
		c := call{s: sess, interactive: &s.interactive}
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			c.progress = func(done, total float64, msg string) {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: done, Total: total, Message: msg})
			}
		}
		out, text, err := t.run(ctx, c, args)
		if err != nil {
			return errorResult(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
	}
}

// errorResult is the isError result of err: its type and message as text,
// ErrorOutput as structured content.
func errorResult(err error) *mcp.CallToolResult {
	te := ErrorFor(err)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: te.Type + ": " + te.Message}},
		StructuredContent: ErrorOutput{Error: te},
	}
}
