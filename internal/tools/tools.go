package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Tool names (README "Use it from an agent").
const (
	TextEditor = "sandbox_text_editor"
	Shell      = "sandbox_shell"
	Output     = "sandbox_output"
	Search     = "sandbox_search"
	Git        = "sandbox_git"
	PR         = "sandbox_pr"
)

// Defaults and bounds of the tools' inputs.
const (
	// DefaultShellTimeoutS is sandbox_shell's timeout_s when absent.
	DefaultShellTimeoutS = 120
	// DefaultShellOutputBytes is sandbox_shell's max_output_bytes (per
	// stream) when absent: 16 KiB, a few hundred lines of a model's
	// context; what is cut stays readable with sandbox_output.
	DefaultShellOutputBytes = 16 << 10
	// DefaultOutputPageBytes is sandbox_output's limit when absent.
	DefaultOutputPageBytes = 80_000
	// DefaultSearchHits is sandbox_search's max_hits when absent.
	DefaultSearchHits = 200
	// DefaultLogCommits is sandbox_git log's limit when absent.
	DefaultLogCommits = 20
	// MaxViewLines bounds a view of a whole file; a view_range shows any part.
	MaxViewLines = 2000
)

// --- inputs and outputs (their JSON Schemas are the tools' schemas) ---------

// EditorInput is sandbox_text_editor's input.
type EditorInput struct {
	Command    string `json:"command" jsonschema:"view (a file's numbered lines, or a directory two levels deep), create (write file_text as the whole file), str_replace (replace the one occurrence of old_str with new_str), insert (insert new_str after line insert_line)"`
	Path       string `json:"path" jsonschema:"workspace-relative path of the file (or, for view, the directory; \".\" is the root)"`
	ViewRange  []int  `json:"view_range,omitempty" jsonschema:"view of a file: [start, end] lines, 1-based, end -1 = to the last line"`
	FileText   string `json:"file_text,omitempty" jsonschema:"create: the whole content of the file"`
	OldStr     string `json:"old_str,omitempty" jsonschema:"str_replace: the exact text to replace; it must occur exactly once in the file, whitespace included"`
	NewStr     string `json:"new_str,omitempty" jsonschema:"str_replace: the replacement (may be empty); insert: the lines to insert"`
	InsertLine *int   `json:"insert_line,omitempty" jsonschema:"insert: insert after this line (0 = before the first line)"`
	IfMatch    string `json:"if_match,omitempty" jsonschema:"create, str_replace, insert: change the file only if it still has this content_hash (from a view); otherwise fail with SandboxConflict and change nothing"`
}

// EditorOutput is sandbox_text_editor's result: Text holds the numbered
// lines of a view, a directory listing, or the numbered lines around an edit.
type EditorOutput struct {
	Command string `json:"command"`
	Path    string `json:"path"`
	// Kind is "file", "directory" or "edit".
	Kind string `json:"kind"`
	Text string `json:"text"`
	// Lines is a viewed file's line count; Bytes a viewed or edited file's size.
	Lines     int   `json:"lines,omitempty"`
	Bytes     int64 `json:"bytes,omitempty"`
	Truncated bool  `json:"truncated,omitempty"`
	// ContentHash is a viewed or edited file's content hash afterwards
	// (the if_match of a later edit).
	ContentHash string `json:"content_hash,omitempty"`
}

// ShellInput is sandbox_shell's input.
type ShellInput struct {
	Command string `json:"command,omitempty" jsonschema:"a shell command, run with /bin/sh -c in the workspace root (required)"`
	// Cmd is the name sandbox_exec's command had first (commandArg).
	Cmd            string            `json:"cmd,omitempty" jsonschema:"deprecated: the old name of command (give command)"`
	TimeoutS       int               `json:"timeout_s,omitempty" jsonschema:"seconds before the command is killed (default 120, at most 7200)"`
	MaxOutputBytes int               `json:"max_output_bytes,omitempty" jsonschema:"bytes of stdout and of stderr returned (default 16384); longer output keeps its head and tail and the whole of it is kept for sandbox_output"`
	Network        string            `json:"network,omitempty" jsonschema:"the network this command runs with: none (loopback only), limited (the workspace's allow-list, through the HTTP proxy in HTTP_PROXY/HTTPS_PROXY) or default (unrestricted); default: the workspace's policy, and never above it. E.g. limited for npm install, then none for npm test"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command only, over the workspace's (e.g. {\"CI\": \"1\"}, or a PATH with a tool's directory first)"`
}

// ShellOutput is sandbox_shell's result: a non-zero exit code is a result,
// not a tool error.
type ShellOutput struct {
	ExitCode    int    `json:"exit_code"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	TimedOut    bool   `json:"timed_out"`
	Truncated   bool   `json:"truncated"`
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	// OutputID names the whole output kept on the worker when it was cut
	// (page through it with sandbox_output).
	OutputID   string `json:"output_id,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// OutputInput is sandbox_output's input.
type OutputInput struct {
	OutputID string `json:"output_id" jsonschema:"the output_id sandbox_shell returned for a cut output"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset to start at (next_offset of the previous page)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"bytes to return (default 80000, at most 1048576)"`
	Stream   string `json:"stream,omitempty" jsonschema:"stdout (default) or stderr"`
}

// OutputPage is sandbox_output's result: Text covers bytes [Offset,
// NextOffset) of the stream (cut on a UTF-8 boundary); EOF is set at the end.
type OutputPage struct {
	OutputID   string `json:"output_id"`
	Stream     string `json:"stream"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Total      int64  `json:"total"`
	EOF        bool   `json:"eof"`
	Text       string `json:"text"`
}

// SearchInput is sandbox_search's input.
type SearchInput struct {
	Pattern string `json:"pattern" jsonschema:"a regular expression (RE2 syntax), or a plain string with literal"`
	Glob    string `json:"glob,omitempty" jsonschema:"only files matching this glob: *.go matches names, src/**/*.ts paths"`
	Path    string `json:"path,omitempty" jsonschema:"search under this workspace-relative directory or file (default: everything)"`
	Case    string `json:"case,omitempty" jsonschema:"smart (default: case-insensitive unless the pattern has an upper-case letter), sensitive or insensitive"`
	Literal bool   `json:"literal,omitempty" jsonschema:"match pattern as a plain string"`
	MaxHits int    `json:"max_hits,omitempty" jsonschema:"matching lines to return (default 200, at most 5000)"`
}

// SearchOutput is sandbox_search's result.
type SearchOutput struct {
	Matches   []sandboxapi.SearchMatch `json:"matches"`
	Truncated bool                     `json:"truncated"`
	// TruncatedBy says why a truncated search stopped (sandboxapi.SearchResult).
	TruncatedBy string `json:"truncated_by,omitempty"`
	// SkippedTooLarge lists files not searched for their size.
	SkippedTooLarge []string `json:"skipped_too_large,omitempty"`
	// SkippedTooLargeCount counts them all.
	SkippedTooLargeCount int  `json:"skipped_too_large_count,omitempty"`
	IgnoreCase           bool `json:"ignore_case"`
}

// GitInput is sandbox_git's input.
type GitInput struct {
	Command        string   `json:"command" jsonschema:"status, diff (against the workspace's base commit; optional paths), log (limit), commit (message, optional paths), push (force_with_lease), checkpoint (label), checkpoints or rollback (checkpoint)"`
	Paths          []string `json:"paths,omitempty" jsonschema:"diff: only these files or directories; commit: only these paths (default: every change, untracked files included)"`
	Limit          int      `json:"limit,omitempty" jsonschema:"log: commits to show (default 20, at most 500)"`
	Message        string   `json:"message,omitempty" jsonschema:"commit: the commit message"`
	ForceWithLease bool     `json:"force_with_lease,omitempty" jsonschema:"push: replace the remote branch, but only while it is still at what this workspace pushed last"`
	Label          string   `json:"label,omitempty" jsonschema:"checkpoint: a one-line label shown by checkpoints"`
	Checkpoint     int      `json:"checkpoint,omitempty" jsonschema:"rollback: the id of the checkpoint to go back to (see checkpoints)"`
}

// GitOutput is sandbox_git's result: the field of the command that ran.
type GitOutput struct {
	Command string                      `json:"command"`
	Status  *sandboxapi.WorkspaceStatus `json:"status,omitempty"`
	Diff    *sandboxapi.Diff            `json:"diff,omitempty"`
	Log     *sandboxapi.LogResult       `json:"log,omitempty"`
	Commit  *sandboxapi.CommitResult    `json:"commit,omitempty"`
	Push    *sandboxapi.PushResult      `json:"push,omitempty"`
	// Checkpoint is the checkpoint taken (checkpoint).
	Checkpoint *sandboxapi.Checkpoint `json:"checkpoint,omitempty"`
	// Checkpoints lists the workspace's checkpoints, oldest first (checkpoints).
	Checkpoints []sandboxapi.Checkpoint `json:"checkpoints,omitempty"`
	// Rollback says what a rollback did (rollback).
	Rollback *sandboxapi.RollbackResult `json:"rollback,omitempty"`
}

// PRInput is sandbox_pr's input.
type PRInput struct {
	Title      string   `json:"title" jsonschema:"the pull request's title (one line)"`
	Body       string   `json:"body,omitempty" jsonschema:"its description (Markdown)"`
	BaseBranch string   `json:"base_branch,omitempty" jsonschema:"the branch to merge into (default: the repository's default branch)"`
	Draft      bool     `json:"draft,omitempty" jsonschema:"open it as a draft"`
	Reviewers  []string `json:"reviewers,omitempty" jsonschema:"logins (or org/team) to request reviews from"`
	Labels     []string `json:"labels,omitempty" jsonschema:"labels to add"`
}

// ErrorOutput is the structured content of a tool error (isError): the
// sandbox error's type and details (docs/API.md "Errors").
type ErrorOutput struct {
	Error ToolError `json:"error"`
}

// ToolError is a typed error of a tool call.
type ToolError struct {
	// Type is the error's stable type string, e.g. "InvalidWorkspacePath".
	Type    string `json:"type"`
	Message string `json:"message"`
	Family  string `json:"family"`
	Kind    string `json:"kind"`
	SubKind string `json:"sub_kind,omitempty"`
	// Retryable: the same call, sent again unchanged, may succeed.
	Retryable bool   `json:"retryable"`
	Field     string `json:"field,omitempty"`
}

// ErrorFor describes err as a ToolError (untyped errors are SandboxError).
func ErrorFor(err error) ToolError {
	k := sandboxapi.KindOf(err)
	if k == nil {
		k = sandboxapi.ErrSandbox
	}
	d := k.Details()
	var se *sandboxapi.Error
	if errors.As(err, &se) {
		d.Field = se.Field
	}
	return ToolError{Type: k.Type, Message: sandboxapi.Message(err), Family: d.Family, Kind: d.Kind, SubKind: d.SubKind,
		Retryable: d.Retryable, Field: d.Field}
}

// invalid is an InvalidArgument about field.
func invalid(field, format string, args ...any) error {
	return sandboxapi.FieldError(field, format, args...)
}

// --- handlers ----------------------------------------------------------------

// call is one tool invocation: its workspace session and, for a long
// command, the progress reporter (nil when the client did not ask).
type call struct {
	s        *sandboxclient.Session
	progress func(done float64, total float64, message string)
	// interactive keeps the offsets sandbox_exec and sandbox_write_stdin
	// have returned (one per server; nil: a fresh one per call).
	interactive *Interactive
}

// processes returns the call's Interactive.
func (c call) processes() *Interactive {
	if c.interactive == nil {
		return &Interactive{}
	}
	return c.interactive
}

func (c call) editor(ctx context.Context, in EditorInput) (EditorOutput, string, error) {
	switch in.Command {
	case "view":
		return c.view(ctx, in)
	case sandboxapi.EditCreate, sandboxapi.EditStrReplace, sandboxapi.EditInsert:
		if in.ViewRange != nil {
			return EditorOutput{}, "", invalid("view_range", "view_range is for view only")
		}
		req := sandboxapi.EditFileInput{Path: in.Path, Command: in.Command, OldStr: in.OldStr, NewStr: in.NewStr, FileText: in.FileText, IfMatch: in.IfMatch}
		if in.Command == sandboxapi.EditInsert {
			if in.InsertLine == nil {
				return EditorOutput{}, "", invalid("insert_line", "insert needs insert_line (0 = before the first line)")
			}
			req.InsertLine = *in.InsertLine
		} else if in.InsertLine != nil {
			return EditorOutput{}, "", invalid("insert_line", "insert_line is for insert only")
		}
		res, err := c.s.EditFile(ctx, req)
		if err != nil {
			return EditorOutput{}, "", err
		}
		out := EditorOutput{Command: in.Command, Path: res.Path, Kind: "edit", Text: res.Snippet, Bytes: res.Bytes, ContentHash: res.ContentHash}
		verb := map[string]string{sandboxapi.EditCreate: "Wrote", sandboxapi.EditStrReplace: "Edited", sandboxapi.EditInsert: "Inserted into"}[in.Command]
		return out, fmt.Sprintf("%s %s (%d bytes). The lines around the change:\n%s", verb, res.Path, res.Bytes, res.Snippet), nil
	}
	return EditorOutput{}, "", invalid("command", "command %q: want view, create, str_replace or insert", sandboxapi.Clip(in.Command, 40))
}

func (c call) view(ctx context.Context, in EditorInput) (EditorOutput, string, error) {
	if in.OldStr != "" || in.NewStr != "" || in.FileText != "" || in.InsertLine != nil || in.IfMatch != "" {
		return EditorOutput{}, "", invalid("command", "view takes path and view_range only")
	}
	p := in.Path
	if p == "" {
		p = "."
	}
	if p != "." {
		data, err := c.s.ReadFile(ctx, p)
		if err == nil {
			out, text, err := viewFile(p, data, in.ViewRange)
			out.ContentHash = sandboxapi.ContentHash(data)
			return out, text, err
		}
		if !sandboxapi.IsInvalidWorkspacePath(err) || sandboxapi.IsFileNotFound(err) {
			return EditorOutput{}, "", err
		}
		// Not a readable file: a directory?
		out, text, lerr := c.viewDir(ctx, p, in.ViewRange)
		if lerr != nil {
			return EditorOutput{}, "", err // the read's error says what p is
		}
		return out, text, nil
	}
	return c.viewDir(ctx, p, in.ViewRange)
}

func (c call) viewDir(ctx context.Context, p string, viewRange []int) (EditorOutput, string, error) {
	res, err := c.s.ListTree(ctx, sandboxapi.ListDirInput{Path: p, Depth: 2, SkipHidden: true, SkipIgnored: true})
	if err != nil {
		return EditorOutput{}, "", err
	}
	if viewRange != nil {
		return EditorOutput{}, "", invalid("view_range", "view_range is for files, %s is a directory", p)
	}
	var b strings.Builder
	for _, e := range res.Entries {
		b.WriteString(e.Name)
		if e.Type == sandboxapi.EntryDir {
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	out := EditorOutput{Command: "view", Path: p, Kind: "directory", Text: b.String(), Truncated: res.Truncated}
	head := fmt.Sprintf("Files and directories in %s, two levels deep (hidden and git-ignored ones left out):\n", p)
	if res.Truncated {
		head = fmt.Sprintf("The first %d entries of %s, two levels deep (hidden and git-ignored ones left out):\n", len(res.Entries), p)
	}
	return out, head + out.Text, nil
}

// commandArg is the shell command of sandbox_shell or sandbox_exec: the
// command field, or cmd, the name sandbox_exec's had first (still
// accepted by both tools, so callers of either name keep working). Errors:
// InvalidArgument when neither holds a command, or both do and differ.
func commandArg(command, cmd string) (string, error) {
	switch {
	case command != "" && cmd != "" && command != cmd:
		return "", invalid("cmd", "give the command once, as command (cmd is its old name)")
	case command == "":
		command = cmd
	}
	if strings.TrimSpace(command) == "" {
		return "", invalid("command", "command is empty")
	}
	return command, nil
}

func (c call) shell(ctx context.Context, in ShellInput) (ShellOutput, string, error) {
	var err error
	if in.Command, err = commandArg(in.Command, in.Cmd); err != nil {
		return ShellOutput{}, "", err
	}
	if in.TimeoutS == 0 {
		in.TimeoutS = DefaultShellTimeoutS
	}
	if in.MaxOutputBytes == 0 {
		in.MaxOutputBytes = DefaultShellOutputBytes
	}
	if in.TimeoutS < 1 || in.TimeoutS > int(sandboxapi.MaxExecTimeout.Seconds()) {
		return ShellOutput{}, "", invalid("timeout_s", "timeout_s must be between 1 and %d", int(sandboxapi.MaxExecTimeout.Seconds()))
	}
	if in.MaxOutputBytes < 1 || in.MaxOutputBytes > sandboxapi.MaxOutputBytesLimit {
		return ShellOutput{}, "", invalid("max_output_bytes", "max_output_bytes must be between 1 and %d", sandboxapi.MaxOutputBytesLimit)
	}
	if err := sandboxapi.ValidateNetwork("network", sandboxapi.Network(in.Network)); err != nil {
		return ShellOutput{}, "", err
	}
	req := sandboxapi.ExecRequest{Cmd: []string{"/bin/sh", "-c", in.Command}, TimeoutS: in.TimeoutS, MaxOutputBytes: in.MaxOutputBytes, KeepOutput: true,
		Network: sandboxapi.Network(in.Network), Env: in.Env}
	var res sandboxapi.ExecResult
	if c.progress == nil {
		res, err = c.s.Exec(ctx, req)
	} else {
		res, err = c.execWithProgress(ctx, req)
	}
	if err != nil {
		return ShellOutput{}, "", err
	}
	out := ShellOutput{ExitCode: res.ExitCode, Stdout: text(res.Stdout), Stderr: text(res.Stderr), TimedOut: res.TimedOut,
		Truncated: res.Truncated, StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, OutputID: res.OutputID, DurationMS: res.DurationMS}
	return out, shellText(out, in), nil
}

// execWithProgress runs req streaming its output, and reports progress
// about once a second: the seconds elapsed out of the timeout, with the
// newest line of output as the message.
func (c call) execWithProgress(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	start := time.Now()
	lines := make(chan string, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-done:
				return
			case l := <-lines:
				last = l
			case <-t.C:
				el := time.Since(start).Seconds()
				msg := fmt.Sprintf("running for %.0f s", el)
				if last != "" {
					msg += ": " + last
				}
				c.progress(el, float64(req.TimeoutS), msg)
			}
		}
	}()
	var tail []byte
	return c.s.ExecStream(ctx, req, func(ch sandboxapi.ExecChunk) {
		tail = append(tail, ch.Data...)
		if len(tail) > 4096 {
			tail = tail[len(tail)-4096:]
		}
		if l := lastLine(tail); l != "" {
			select {
			case lines <- l:
			default:
				select { // replace a line not yet taken
				case <-lines:
				default:
				}
				lines <- l
			}
		}
	})
}

func shellText(out ShellOutput, in ShellInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d", out.ExitCode)
	if out.TimedOut {
		fmt.Fprintf(&b, " (timed out after %d s: the command was killed)", in.TimeoutS)
	}
	fmt.Fprintf(&b, ", %d ms\n", out.DurationMS)
	for _, s := range []struct {
		name  string
		text  string
		total int64
	}{{"stdout", out.Stdout, out.StdoutBytes}, {"stderr", out.Stderr, out.StderrBytes}} {
		if s.total == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s", s.name)
		if s.total > int64(in.MaxOutputBytes) {
			fmt.Fprintf(&b, " (%d bytes, %d cut from the middle)", s.total, s.total-int64(in.MaxOutputBytes))
		}
		b.WriteString(" ---\n")
		b.WriteString(s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
	}
	if out.OutputID != "" {
		fmt.Fprintf(&b, "The whole output is kept: read it with sandbox_output {\"output_id\": %q} (stream stdout or stderr, offset, limit).\n", out.OutputID)
	} else if out.Truncated {
		b.WriteString("The output was cut and could not be kept whole.\n")
	}
	return b.String()
}

func (c call) output(ctx context.Context, in OutputInput) (OutputPage, string, error) {
	if in.Limit == 0 {
		in.Limit = DefaultOutputPageBytes
	}
	res, err := c.s.ReadOutput(ctx, sandboxapi.ReadOutputInput{OutputID: in.OutputID, Stream: in.Stream, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return OutputPage{}, "", err
	}
	data := res.Data
	if !res.EOF {
		data = cutToRune(data)
	}
	page := OutputPage{OutputID: res.OutputID, Stream: res.Stream, Offset: res.Offset, NextOffset: res.Offset + int64(len(data)),
		Total: res.Total, EOF: res.EOF && int64(len(data)) == int64(len(res.Data)), Text: text(data)}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s, bytes %d-%d of %d", page.Stream, page.OutputID, page.Offset, page.NextOffset, page.Total)
	switch {
	case page.EOF && res.Kept < res.Total:
		fmt.Fprintf(&b, " (the end of what was kept: the first %d bytes)", res.Kept)
	case page.EOF:
		b.WriteString(" (the end)")
	default:
		fmt.Fprintf(&b, " (more: offset %d)", page.NextOffset)
	}
	b.WriteString(":\n")
	b.WriteString(page.Text)
	return page, b.String(), nil
}

func (c call) search(ctx context.Context, in SearchInput) (SearchOutput, string, error) {
	if in.MaxHits == 0 {
		in.MaxHits = DefaultSearchHits
	}
	if in.MaxHits < 1 || in.MaxHits > sandboxapi.MaxSearchResults {
		return SearchOutput{}, "", invalid("max_hits", "max_hits must be between 1 and %d", sandboxapi.MaxSearchResults)
	}
	ignore, err := ignoreCase(in.Case, in.Pattern, in.Literal)
	if err != nil {
		return SearchOutput{}, "", err
	}
	res, err := c.s.Search(ctx, sandboxapi.SearchRequest{Pattern: in.Pattern, Path: in.Path, Literal: in.Literal, IgnoreCase: ignore, MaxResults: in.MaxHits, Glob: in.Glob})
	if err != nil {
		return SearchOutput{}, "", err
	}
	if res.Matches == nil {
		res.Matches = []sandboxapi.SearchMatch{}
	}
	out := SearchOutput{Matches: res.Matches, Truncated: res.Truncated, TruncatedBy: res.TruncatedBy,
		SkippedTooLarge: res.SkippedTooLarge, SkippedTooLargeCount: res.SkippedTooLargeCount, IgnoreCase: ignore}
	return out, SearchText(res), nil
}

// SearchText renders a search result for a model: the matches, then why
// the search stopped early (only the result cap means more matches exist;
// the file and byte limits mean files were left unsearched) and which
// files were skipped for their size.
func SearchText(res sandboxapi.SearchResult) string {
	var b strings.Builder
	if len(res.Matches) == 0 {
		b.WriteString("No matches.\n")
	}
	for _, m := range res.Matches {
		fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line, m.Text)
	}
	if res.Truncated {
		b.WriteString("(" + SearchStopReason(res) + ")\n")
	}
	if res.SkippedTooLargeCount > 0 {
		fmt.Fprintf(&b, "(%d files over the search's per-file size limit were not searched: %s", res.SkippedTooLargeCount, strings.Join(res.SkippedTooLarge, ", "))
		if res.SkippedTooLargeCount > len(res.SkippedTooLarge) {
			b.WriteString(", …")
		}
		b.WriteString("; read them in parts with sandbox_exec (e.g. grep -n))\n")
	}
	return b.String()
}

// SearchStopReason says in words why a truncated search stopped
// (SearchResult.TruncatedBy); shared with sandboxctl.
func SearchStopReason(res sandboxapi.SearchResult) string {
	switch res.TruncatedBy {
	case sandboxapi.SearchCapFiles, sandboxapi.SearchCapBytes:
		what := "files"
		if res.TruncatedBy == sandboxapi.SearchCapBytes {
			what = "bytes"
		}
		return fmt.Sprintf("the search stopped at its limit of %s read: files were left unsearched and may hold matches; narrow the path or glob", what)
	default:
		return fmt.Sprintf("more matches exist: the first %d are shown; narrow the pattern, path or glob", len(res.Matches))
	}
}

func (c call) git(ctx context.Context, in GitInput, writable bool) (GitOutput, string, error) {
	out := GitOutput{Command: in.Command}
	if err := checkGitInput(in, writable); err != nil {
		return out, "", err
	}
	switch in.Command {
	case "status", "diff", "log", "checkpoints":
		return c.gitRead(ctx, in, out)
	case "commit", "push", "checkpoint", "rollback":
		return c.gitChange(ctx, in, out)
	}
	return out, "", invalid("command", "command %q: want status, diff, log, commit, push, checkpoint, checkpoints or rollback", sandboxapi.Clip(in.Command, 40))
}

// checkGitInput refuses a sandbox_git field given to a command it is not
// for (limit: log, message: commit, force_with_lease: push, label:
// checkpoint, checkpoint: rollback, paths: diff and commit), in that order,
// and a changing command on a read-only workspace. Errors:
// ErrInvalidArgument on the field.
func checkGitInput(in GitInput, writable bool) error {
	onlyFor := func(field, cmd string, set bool) error {
		if set && in.Command != cmd {
			return invalid(field, "%s is for %s only", field, cmd)
		}
		return nil
	}
	for _, e := range []error{
		onlyFor("limit", "log", in.Limit != 0),
		onlyFor("message", "commit", in.Message != ""),
		onlyFor("force_with_lease", "push", in.ForceWithLease),
		onlyFor("label", "checkpoint", in.Label != ""),
		onlyFor("checkpoint", "rollback", in.Checkpoint != 0),
	} {
		if e != nil {
			return e
		}
	}
	if in.Paths != nil && in.Command != "diff" && in.Command != "commit" {
		return invalid("paths", "paths is for diff and commit only")
	}
	if !writable && slices.Contains(writeGitCommands, in.Command) {
		return invalid("command", "command %q: this workspace is read-only (status, diff, log)", in.Command)
	}
	return nil
}

// gitRead runs the sandbox_git commands that change nothing: status, diff
// (filtered to in.Paths), log (DefaultLogCommits when no limit) and
// checkpoints, each with its text. Errors: the session's.
func (c call) gitRead(ctx context.Context, in GitInput, out GitOutput) (GitOutput, string, error) {
	switch in.Command {
	case "status":
		st, err := c.s.Status(ctx)
		if err != nil {
			return out, "", err
		}
		out.Status = &st
		return out, statusText(st), nil
	case "diff":
		d, err := c.s.Diff(ctx)
		if err != nil {
			return out, "", err
		}
		if len(in.Paths) > 0 {
			if d, err = filterDiff(d, in.Paths); err != nil {
				return out, "", err
			}
		}
		out.Diff = &d
		return out, diffText(d), nil
	case "log":
		if in.Limit == 0 {
			in.Limit = DefaultLogCommits
		}
		l, err := c.s.Log(ctx, in.Limit)
		if err != nil {
			return out, "", err
		}
		out.Log = &l
		return out, logText(l), nil
	default: // checkpoints
		cps, err := c.s.Checkpoints(ctx)
		if err != nil {
			return out, "", err
		}
		out.Checkpoints = cps
		if out.Checkpoints == nil {
			out.Checkpoints = []sandboxapi.Checkpoint{}
		}
		return out, checkpointsText(cps), nil
	}
}

// gitChange runs the sandbox_git commands that change the workspace or
// its remote: commit (a message required), push, checkpoint and rollback
// (a checkpoint id required), each with its text. Errors:
// ErrInvalidArgument (message, checkpoint), the session's.
func (c call) gitChange(ctx context.Context, in GitInput, out GitOutput) (GitOutput, string, error) {
	switch in.Command {
	case "commit":
		if strings.TrimSpace(in.Message) == "" {
			return out, "", invalid("message", "commit needs a message")
		}
		r, err := c.s.Commit(ctx, sandboxapi.CommitRequest{Message: in.Message, Paths: in.Paths})
		if err != nil {
			return out, "", err
		}
		out.Commit = &r
		if r.NothingToCommit {
			return out, "Nothing to commit: the workspace is clean.\n", nil
		}
		return out, fmt.Sprintf("Committed %s on %s.\n", r.Commit, r.Branch), nil
	case "push":
		r, err := c.s.Push(ctx, in.ForceWithLease)
		if err != nil {
			return out, "", err
		}
		out.Push = &r
		return out, fmt.Sprintf("Push of %s: %s (remote at %s, was %s).\n", r.Branch, r.Status, short(r.Commit), orNone(short(r.PreviousRemoteCommit))), nil
	case "checkpoint":
		cp, err := c.s.Checkpoint(ctx, in.Label)
		if err != nil {
			return out, "", err
		}
		out.Checkpoint = &cp
		return out, fmt.Sprintf("Checkpoint %d taken (%s, %d files changed against HEAD %s); undo later edits with rollback checkpoint=%d.\n",
			cp.ID, orNone(cp.Label), cp.FilesChanged, short(cp.Head), cp.ID), nil
	default: // rollback
		if in.Checkpoint < 1 {
			return out, "", invalid("checkpoint", "rollback needs checkpoint: the id of a checkpoint (see checkpoints)")
		}
		r, err := c.s.Rollback(ctx, in.Checkpoint)
		if err != nil {
			return out, "", err
		}
		out.Rollback = &r
		return out, fmt.Sprintf("Rolled back to checkpoint %d (HEAD %s on %s); the state left is checkpoint %d: rollback checkpoint=%d undoes this.\n",
			r.Checkpoint.ID, short(r.Head), orNone(r.Branch), r.Undo.ID, r.Undo.ID), nil
	}
}

// diffText is a diff's text: its patch (with a note when it was cut), or a
// line saying there is no change against the base commit.
func diffText(d sandboxapi.Diff) string {
	if d.Patch == "" {
		return "No changes against the base commit " + short(d.BaseCommit) + ".\n"
	}
	t := d.Patch
	if d.Truncated {
		t += fmt.Sprintf("\n(the diff is cut: %d bytes in all; name paths to see less)\n", d.TotalBytes)
	}
	return t
}

// logText is a log's text: one line per commit (short id, date, author,
// subject), and a note when older commits exist.
func logText(l sandboxapi.LogResult) string {
	var b strings.Builder
	for _, cm := range l.Commits {
		fmt.Fprintf(&b, "%s %s %s: %s\n", short(cm.Commit), cm.Date, cm.AuthorName, cm.Subject)
	}
	if l.Truncated {
		b.WriteString("(older commits exist)\n")
	}
	return b.String()
}

// checkpointsText is the checkpoints' text: one line each (id, time in
// RFC 3339 UTC, label, files changed, HEAD), or a line saying there are none.
func checkpointsText(cps []sandboxapi.Checkpoint) string {
	if len(cps) == 0 {
		return "No checkpoints yet.\n"
	}
	var b strings.Builder
	for _, cp := range cps {
		fmt.Fprintf(&b, "%d %s %s (%d files changed, HEAD %s)\n", cp.ID, cp.CreatedAt.UTC().Format(time.RFC3339), orNone(cp.Label), cp.FilesChanged, short(cp.Head))
	}
	return b.String()
}

// writeGitCommands are sandbox_git's commands that change the workspace or
// its remote, or need a writable workspace: offered on writable workspaces only (docs/API.md "Checkpoints"; README "Use it from an agent").
var writeGitCommands = []string{"commit", "push", "checkpoint", "checkpoints", "rollback"}

func (c call) pr(ctx context.Context, in PRInput) (sandboxapi.PullRequest, string, error) {
	res, err := c.s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: in.Title, Body: in.Body, Base: in.BaseBranch,
		Draft: in.Draft, Reviewers: in.Reviewers, Labels: in.Labels})
	if err != nil {
		return res, "", err
	}
	verb := "Opened"
	if !res.Created {
		verb = "Found the existing"
	}
	t := fmt.Sprintf("%s pull request #%d: %s (%s into %s, %s).\n", verb, res.Number, res.URL, res.Head, res.Base, res.State)
	for _, w := range res.Warnings {
		t += "warning: " + w + "\n"
	}
	return res, t, nil
}

func statusText(st sandboxapi.WorkspaceStatus) string {
	var b strings.Builder
	branch := st.Branch
	if branch == "" {
		branch = "(detached)"
	}
	fmt.Fprintf(&b, "On %s at %s; base %s; %d commit(s) since base, %d unpushed.\n", branch, short(st.Head), short(st.BaseCommit), st.CommitsSinceBase, st.UnpushedCommits)
	if !st.Dirty {
		b.WriteString("Working tree clean.\n")
	}
	for _, f := range st.Files {
		fmt.Fprintf(&b, "%s %s\n", f.Status, f.Path)
	}
	for _, w := range st.ConfigWarnings {
		fmt.Fprintf(&b, "warning: git config %s\n", w)
	}
	return b.String()
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
