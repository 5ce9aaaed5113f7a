package sandboxapi

import "time"

// Default and maximum exec limits.
const (
	// DefaultExecTimeout applies when ExecRequest.TimeoutS is zero.
	DefaultExecTimeout = 10 * time.Minute
	// MaxExecTimeout is the largest accepted ExecRequest.TimeoutS.
	MaxExecTimeout = 2 * time.Hour
	// DefaultMaxOutputBytes caps each of stdout and stderr when ExecRequest.MaxOutputBytes is zero.
	DefaultMaxOutputBytes = 256 << 10 // 256 KiB
	// MaxOutputBytesLimit is the largest accepted ExecRequest.MaxOutputBytes: both
	// streams at the limit, base64-encoded in JSON (×4/3), stay at about 1.3 MiB,
	// well under Temporal's 2 MB payload limit.
	MaxOutputBytesLimit = 512 << 10 // 512 KiB
	// MaxStdinBytes bounds ExecRequest.Stdin.
	MaxStdinBytes = 512 << 10
)

// ExecRequest is the exec update's argument: one command (docs/API.md "Updates"). Cmd is an argv: no shell is
// implied (use ["sh","-c","..."] for one). Cwd is relative to the workspace root.
type ExecRequest struct {
	Cmd            []string          `json:"cmd"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutS       int               `json:"timeout_s,omitempty"`        // seconds; 0 = DefaultExecTimeout
	Stdin          []byte            `json:"stdin,omitempty"`            // nil = /dev/null
	MaxOutputBytes int               `json:"max_output_bytes,omitempty"` // per stream; 0 = default
	// Stream: a client reads the command's output while it runs (process_read
	// on ExecProcessID, docs/API.md "Streaming exec output"); the command
	// then waits while its unread output fills the process buffer, so the
	// stream loses nothing.
	Stream bool `json:"stream,omitempty"`
	// KeepOutput: when a stream is longer than the cap, the worker keeps the
	// whole output of both streams (bounded: MaxKeptStreamBytes per stream,
	// MaxKeptOutputBytes per workspace, oldest dropped first) and the result's
	// OutputID names it for read_output (docs/API.md "Kept output").
	KeepOutput bool `json:"keep_output,omitempty"`
	// Network is the network this command runs with (none, limited or
	// default; docs/SECURITY.md "Network modes"): "" is the workspace's
	// policy; a mode above it is SandboxCommandRejected naming the policy.
	Network Network `json:"network,omitempty"`
	// BesideSetup: while the workspace's setup runs, this command runs at
	// once beside it instead of waiting for it to end (docs/RUNTIMES.md
	// "Setup"); on a remote runtime, and when no setup runs, it is an
	// ordinary command.
	BesideSetup bool `json:"beside_setup,omitempty"`
}

// SetupExecPrefix starts the id of a setup run's command (listed by ps,
// stopped by cancel; docs/RUNTIMES.md "Setup").
const SetupExecPrefix = "setup-"

// Timeout returns the effective timeout.
func (r ExecRequest) Timeout() time.Duration {
	if r.TimeoutS <= 0 {
		return DefaultExecTimeout
	}
	return time.Duration(r.TimeoutS) * time.Second
}

// OutputCap returns the effective per-stream output cap in bytes.
func (r ExecRequest) OutputCap() int {
	if r.MaxOutputBytes <= 0 {
		return DefaultMaxOutputBytes
	}
	return r.MaxOutputBytes
}

// ExecResult is a finished command. A non-zero exit is a result, not an error.
// Exit codes: 127 command not found, 124 timeout (TimedOut true), 130 cancelled
// (Cancelled true: the cancel update, or hibernate/release during the command),
// 128+n killed by signal n.
// When a stream exceeds the cap its head and tail are kept, joined by a marker line,
// Truncated is true, and StdoutBytes/StderrBytes hold the full byte counts.
type ExecResult struct {
	ExitCode    int    `json:"exit_code"`
	Stdout      []byte `json:"stdout"`
	Stderr      []byte `json:"stderr"`
	TimedOut    bool   `json:"timed_out"`
	Cancelled   bool   `json:"cancelled"`
	Truncated   bool   `json:"truncated"`
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	DurationMS  int64  `json:"duration_ms"`
	// OutputID names the kept whole output (read_output) when the request
	// asked for KeepOutput and the output was truncated; "" otherwise.
	OutputID string `json:"output_id,omitempty"`
}

// ExecChunk is a piece of streamed output.
type ExecChunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   []byte `json:"data"`
}

// StreamWindowBytes bounds each stream's bytes in one ExecProgress.
const StreamWindowBytes = 64 << 10

// ExecActivityType is the Temporal activity type that runs an exec
// update's command; its heartbeat details are ExecProgress (docs/API.md
// "Streaming output").
const ExecActivityType = "sandbox.Exec"

// ExecProgress is the heartbeat detail of a running exec activity
// (ActivityExec): the newest bytes of each stream (at most StreamWindowBytes)
// and the absolute offset just past them, so Stdout covers
// [StdoutEnd-len(Stdout), StdoutEnd). A client streams a command's output by
// polling the session's pending exec activity (DescribeWorkflowExecution) and
// printing the bytes past what it has printed (docs/API.md).
type ExecProgress struct {
	UpdateID  string `json:"update_id"`
	Stdout    []byte `json:"stdout"`
	StdoutEnd int64  `json:"stdout_end"`
	Stderr    []byte `json:"stderr"`
	StderrEnd int64  `json:"stderr_end"`
}

// Output streams of read_output (ReadOutputInput.Stream) and process_read
// (ProcessReadInput.Stream, with StreamPTY).
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Kept output limits (docs/API.md "Kept output").
const (
	// MaxKeptStreamBytes bounds what is kept of one stream of one command;
	// bytes past it are counted but not kept (ReadOutputResult.Kept).
	MaxKeptStreamBytes = 32 << 20
	// MaxKeptOutputBytes bounds the kept output of one workspace: when a new
	// command's output is kept, the oldest outputs are dropped first until
	// the workspace's total is within it.
	MaxKeptOutputBytes = 64 << 20
	// DefaultReadOutputBytes is read_output's page size when Limit is 0.
	DefaultReadOutputBytes = 64 << 10
	// MaxReadOutputBytes is the largest read_output page (base64 in JSON
	// keeps it far below Temporal's payload limit).
	MaxReadOutputBytes = 1 << 20
)

// ReadOutputInput is read_output's argument: a page of the whole output of
// an exec that kept it (ExecRequest.KeepOutput, ExecResult.OutputID). Stream
// is "stdout" (default, "") or "stderr"; Offset a byte offset into that
// stream; Limit the page size in bytes (0 = DefaultReadOutputBytes, at most
// MaxReadOutputBytes).
type ReadOutputInput struct {
	OutputID string `json:"output_id"`
	Stream   string `json:"stream,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ReadOutputResult is one page of kept output: Data covers [Offset,
// Offset+len(Data)) of the stream; Total is the stream's full byte count as
// the command wrote it, Kept how many of those bytes are kept (Total unless
// the stream was larger than MaxKeptStreamBytes); EOF is set when the page
// reaches the end of the kept bytes.
type ReadOutputResult struct {
	OutputID string `json:"output_id"`
	Stream   string `json:"stream"`
	Offset   int64  `json:"offset"`
	Data     []byte `json:"data"`
	Total    int64  `json:"total"`
	Kept     int64  `json:"kept"`
	EOF      bool   `json:"eof"`
}

// Validate checks a read_output argument. Errors: ErrInvalidArgument (with
// the field).
func (in ReadOutputInput) Validate() error {
	if err := ValidateOutputID(in.OutputID); err != nil {
		return err
	}
	if in.Stream != "" && in.Stream != StreamStdout && in.Stream != StreamStderr {
		return FieldError("stream", "read_output stream %q: want stdout or stderr", Clip(in.Stream, 40))
	}
	if in.Offset < 0 {
		return FieldError("offset", "read_output offset must not be negative")
	}
	if in.Limit < 0 || in.Limit > MaxReadOutputBytes {
		return FieldError("limit", "read_output limit must be between 0 and %d", MaxReadOutputBytes)
	}
	return nil
}

// OutputIDPrefix starts every kept output's id ("out-" and 32 hex digits).
const OutputIDPrefix = "out-"

// ValidateOutputID checks the shape of an output id. Errors: ErrInvalidArgument.
func ValidateOutputID(id string) error {
	if len(id) != len(OutputIDPrefix)+32 || id[:len(OutputIDPrefix)] != OutputIDPrefix {
		return FieldError("output_id", "output id %q: want %s followed by 32 hex digits", Clip(id, 60), OutputIDPrefix)
	}
	for _, c := range id[len(OutputIDPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return FieldError("output_id", "output id %q: want %s followed by 32 hex digits", Clip(id, 60), OutputIDPrefix)
		}
	}
	return nil
}
