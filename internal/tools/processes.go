package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The interactive command tools, over the session's process updates
// (docs/API.md "Processes"): sandbox_exec starts a command and returns
// after yield_time_ms with its output so far (and, while it still runs, a
// session id); sandbox_write_stdin writes to it, polls it or kills it.

// Tool names.
const (
	ExecToolName       = "sandbox_exec"
	WriteStdinToolName = "sandbox_write_stdin"
)

// Bounds of the interactive tools' inputs.
const (
	MinYieldTimeMS        = 250
	MaxYieldTimeMS        = 30_000
	DefaultExecYieldMS    = 10_000
	DefaultWriteYieldMS   = 250
	DefaultInteractiveOut = 16 << 10
	MaxInteractiveOut     = 256 << 10
)

// ExecToolInput is sandbox_exec's input.
type ExecToolInput struct {
	Command string `json:"command,omitempty" jsonschema:"a shell command, run with /bin/sh -c in the workspace root (or workdir) (required)"`
	// Cmd is the name Command had first (commandArg).
	Cmd            string `json:"cmd,omitempty" jsonschema:"deprecated: the old name of command (give command)"`
	Workdir        string `json:"workdir,omitempty" jsonschema:"working directory, relative to the workspace root"`
	YieldTimeMS    int    `json:"yield_time_ms,omitempty" jsonschema:"return after this many milliseconds with the output so far (250 to 30000, default 10000); a command still running then gets a session_id"`
	TTY            bool   `json:"tty,omitempty" jsonschema:"run it on a terminal (for programs that need one: shells, REPLs, prompts)"`
	MaxOutputBytes int    `json:"max_output_bytes,omitempty" jsonschema:"bytes of output returned per call (default 16384, at most 262144); longer output keeps its head and tail"`
}

// WriteStdinInput is sandbox_write_stdin's input.
type WriteStdinInput struct {
	SessionID      string `json:"session_id" jsonschema:"the session_id sandbox_exec returned"`
	Chars          string `json:"chars,omitempty" jsonschema:"text written to the command's stdin (or terminal): \\n ends a line, \\u0003 is Ctrl-C on a terminal; empty: only wait for output"`
	YieldTimeMS    int    `json:"yield_time_ms,omitempty" jsonschema:"return after this many milliseconds with the output since the last call (250 to 30000, default 250)"`
	Kill           bool   `json:"kill,omitempty" jsonschema:"kill the command and everything it started"`
	MaxOutputBytes int    `json:"max_output_bytes,omitempty" jsonschema:"bytes of output returned (default 16384, at most 262144)"`
}

// ExecToolOutput is the result of both tools: the output since the last
// call (stdout and stderr as they came; one terminal stream with tty), and
// either the exit code or the session id of a command still running.
type ExecToolOutput struct {
	Output string `json:"output"`
	// SessionID names the running command for sandbox_write_stdin; empty
	// once it ended.
	SessionID string `json:"session_id,omitempty"`
	Running   bool   `json:"running"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	// ExitReason is why it ended (exited, signaled, runtime_stopped, …).
	ExitReason string `json:"exit_reason,omitempty"`
	// OutputBytes counts the output of this call; Truncated: only its head
	// and tail are in Output.
	OutputBytes int64 `json:"output_bytes"`
	Truncated   bool  `json:"truncated,omitempty"`
	// DroppedBytes were lost before this call's output (the command wrote
	// more than its 1 MiB buffer between two calls).
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	WallTimeMS   int64 `json:"wall_time_ms"`
}

// Interactive keeps, per running command, the offsets its caller has
// seen. It is safe for concurrent use; the zero value is ready. A session
// id it does not know (a new MCP server process) is read from the oldest
// output its buffer still holds.
type Interactive struct {
	mu    sync.Mutex
	known map[string]seen
}

// seen is what a caller has seen of one command: its offsets, and whether
// it has two streams (no terminal).
type seen struct {
	off  [2]int64
	both bool
}

func yield(ms, def int) (time.Duration, error) {
	if ms == 0 {
		ms = def
	}
	if ms < MinYieldTimeMS || ms > MaxYieldTimeMS {
		return 0, sandboxapi.FieldError("yield_time_ms", "yield_time_ms must be between %d and %d", MinYieldTimeMS, MaxYieldTimeMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// collectLimits validates a call's yield_time_ms (def when 0) and
// max_output_bytes: how long collect waits and how many bytes it returns
// (yield, outCap; the yield error first). Errors: ErrInvalidArgument.
func collectLimits(yieldMS, def, maxOut int) (time.Duration, int, error) {
	wait, err := yield(yieldMS, def)
	if err != nil {
		return 0, 0, err
	}
	limit, err := outCap(maxOut)
	if err != nil {
		return 0, 0, err
	}
	return wait, limit, nil
}

func outCap(n int) (int, error) {
	if n == 0 {
		return DefaultInteractiveOut, nil
	}
	if n < 0 || n > MaxInteractiveOut {
		return 0, sandboxapi.FieldError("max_output_bytes", "max_output_bytes must be between 1 and %d", MaxInteractiveOut)
	}
	return n, nil
}

// Exec is sandbox_exec: start in.Command (or in.Cmd, commandArg) as a background process of s's
// workspace and collect its output for yield_time_ms. Errors: the sandbox
// typed errors (InvalidArgument for bad input; SandboxResourceLimit when
// 64 processes run; SandboxCommandRejected on a runtime without processes).
func (x *Interactive) Exec(ctx context.Context, s *sandboxclient.Session, in ExecToolInput) (ExecToolOutput, string, error) {
	command, err := commandArg(in.Command, in.Cmd)
	if err != nil {
		return ExecToolOutput{}, "", err
	}
	wait, limit, err := collectLimits(in.YieldTimeMS, DefaultExecYieldMS, in.MaxOutputBytes)
	if err != nil {
		return ExecToolOutput{}, "", err
	}
	start := time.Now()
	req := sandboxapi.ProcessStartInput{Cmd: []string{"sh", "-c", command}, Cwd: in.Workdir, Tag: ExecToolName, Stdin: !in.TTY}
	if in.TTY {
		req.PTY = &sandboxapi.TerminalSize{Rows: 24, Cols: 120}
	}
	p, err := s.ProcessStart(ctx, req)
	if err != nil {
		return ExecToolOutput{}, "", err
	}
	x.set(p.ProcessID, seen{both: !in.TTY})
	return x.collect(ctx, s, p.ProcessID, start, wait, limit)
}

// WriteStdin is sandbox_write_stdin: write in.Chars to the command (or
// kill it), then collect its output for yield_time_ms.
func (x *Interactive) WriteStdin(ctx context.Context, s *sandboxclient.Session, in WriteStdinInput) (ExecToolOutput, string, error) {
	if in.SessionID == "" {
		return ExecToolOutput{}, "", sandboxapi.FieldError("session_id", "session_id is empty")
	}
	wait, limit, err := collectLimits(in.YieldTimeMS, DefaultWriteYieldMS, in.MaxOutputBytes)
	if err != nil {
		return ExecToolOutput{}, "", err
	}
	start := time.Now()
	switch {
	case in.Kill:
		if err := s.ProcessSignal(ctx, in.SessionID, "KILL"); err != nil {
			return ExecToolOutput{}, "", err
		}
	case in.Chars != "":
		if _, err := s.ProcessWrite(ctx, in.SessionID, []byte(in.Chars), false); err != nil {
			return ExecToolOutput{}, "", err
		}
	}
	if _, ok := x.get(in.SessionID); !ok {
		// Not started by this process: from the oldest output kept.
		probe, err := s.ProcessRead(ctx, sandboxapi.ProcessReadInput{ProcessID: in.SessionID, MaxBytes: 1})
		if err != nil {
			return ExecToolOutput{}, "", err
		}
		x.set(in.SessionID, seen{both: !probe.Process.PTY})
	}
	return x.collect(ctx, s, in.SessionID, start, wait, limit)
}

func (x *Interactive) set(id string, v seen) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.known == nil {
		x.known = map[string]seen{}
	}
	x.known[id] = v
}

func (x *Interactive) get(id string) (seen, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	v, ok := x.known[id]
	return v, ok
}

func (x *Interactive) forget(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.known, id)
}

// collect reads process id's new output until it ends or wait passes.
func (x *Interactive) collect(ctx context.Context, s *sandboxclient.Session, id string, start time.Time, wait time.Duration, limit int) (ExecToolOutput, string, error) {
	st, _ := x.get(id)
	off, both := st.off, st.both
	kept := output.NewCapped(limit)
	var out ExecToolOutput
	deadline := start.Add(wait)
	for {
		left := time.Until(deadline)
		in := sandboxapi.ProcessReadInput{ProcessID: id, Offset: off[0], MaxBytes: sandboxapi.MaxProcessReadBytes, WaitMS: int(max(left, 0) / time.Millisecond)}
		if both {
			e := off[1]
			in.StderrOffset = &e
		}
		r, err := s.ProcessRead(ctx, in)
		if err != nil {
			return ExecToolOutput{}, "", err
		}
		out.DroppedBytes += r.DroppedBytes
		_, _ = kept.Write(r.Data)
		off[0] = r.NextOffset
		if r.Stderr != nil {
			out.DroppedBytes += r.Stderr.DroppedBytes
			_, _ = kept.Write(r.Stderr.Data)
			off[1] = r.Stderr.NextOffset
		}
		if r.EOF {
			code := r.ExitCode
			out.ExitCode, out.ExitReason = &code, r.ExitReason
			x.forget(id)
			break
		}
		if time.Until(deadline) <= 0 {
			out.SessionID, out.Running = id, true
			x.set(id, seen{off: off, both: both})
			break
		}
	}
	out.Output = strings.ToValidUTF8(string(kept.Bytes()), "\uFFFD")
	out.OutputBytes, out.Truncated = kept.Total(), kept.Truncated()
	out.WallTimeMS = time.Since(start).Milliseconds()
	return out, interactiveText(out), nil
}

func interactiveText(out ExecToolOutput) string {
	var b strings.Builder
	b.WriteString(out.Output)
	if out.Output != "" && !strings.HasSuffix(out.Output, "\n") {
		b.WriteString("\n")
	}
	if out.DroppedBytes > 0 {
		fmt.Fprintf(&b, "[%d bytes of output were lost before this]\n", out.DroppedBytes)
	}
	if out.Running {
		fmt.Fprintf(&b, "[still running after %d ms: session_id %s; use %s to send input, poll or kill]\n", out.WallTimeMS, out.SessionID, WriteStdinToolName)
	} else if out.ExitCode != nil {
		fmt.Fprintf(&b, "[exit code %d (%s) after %d ms]\n", *out.ExitCode, out.ExitReason, out.WallTimeMS)
	}
	return b.String()
}
