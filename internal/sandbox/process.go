package sandbox

import (
	"context"
	"time"
)

// ProcessRuntime is the optional capability of a Runtime to run background
// processes an agent controls (docs/SECURITY.md "Process model"): started
// at once, read by absolute byte offsets from a bounded buffer, written to,
// signalled, resized, listed. Its consumer (the session's process updates)
// asserts it on a Runtime (`rt.(sandbox.ProcessRuntime)`); a runtime without
// it cannot run background processes. Every method is safe for concurrent
// use. Errors: ErrInvalidArgument for a bad request (nothing runs then),
// ErrNotFound for an unknown process id or a destroyed runtime,
// ErrResourceLimit beyond MaxProcesses live processes, ErrCommandRejected
// for an operation the process cannot take now (stdin closed, no terminal),
// ErrRuntimeUnavailable when the runtime fails, ErrTimeout when ctx's
// deadline passes.
type ProcessRuntime interface {
	// ProcessSupport reports what this runtime's processes can do.
	ProcessSupport() ProcessSupport
	// StartProcess starts spec and returns as soon as the process exists
	// (a start failure, e.g. command not found, is an exited process with
	// exit code 127 or 126 and the reason on its stderr, not an error). A
	// stopped runtime is started first.
	StartProcess(ctx context.Context, spec ProcessSpec) (ProcessInfo, error)
	// ReadProcess returns output of one stream from req.Offset, waiting up
	// to req.Wait (at most MaxProcessReadWait) when there is nothing new:
	// it returns as soon as there are new bytes or the process has ended.
	ReadProcess(ctx context.Context, id string, req ProcessReadRequest) (ProcessOutput, error)
	// WriteProcess writes data to the process's stdin (the terminal for a
	// PTY process) and, when closeStdin, closes it afterwards (for a PTY
	// process: sends end-of-file, ^D). It returns the bytes written.
	WriteProcess(ctx context.Context, id string, data []byte, closeStdin bool) (int, error)
	// SignalProcess sends a signal (ProcessSignals names them) to the
	// process's group while its leader runs, and to every process it left
	// afterwards; "KILL" kills the whole tree at once.
	SignalProcess(ctx context.Context, id string, signal string) error
	// ResizeProcess sets the terminal size of a PTY process.
	ResizeProcess(ctx context.Context, id string, rows, cols int) error
	// ListProcesses returns the runtime's background processes, live and
	// recently ended (at most MaxProcesses of each), oldest first.
	ListProcesses(ctx context.Context) ([]ProcessInfo, error)
}

// ProcessSupport describes a runtime's background processes.
type ProcessSupport struct {
	// Durable: processes and their buffered output survive a restart of the
	// worker (kill -9): a new worker's Create with the same spec reattaches.
	Durable bool `json:"durable"`
	// PTY: processes can run on a pseudo-terminal.
	PTY bool `json:"pty"`
	// MaxProcesses bounds live background processes per runtime.
	MaxProcesses int `json:"max_processes"`
	// BufferBytes is each stream's buffer: the newest BufferBytes bytes are
	// kept, older ones are dropped (ProcessOutput.DroppedBytes).
	BufferBytes int `json:"buffer_bytes"`
}

// Process limits.
const (
	// MaxProcesses is the most live background processes a runtime holds.
	MaxProcesses = 64
	// ProcessBufferBytes is each stream's buffer per background process.
	ProcessBufferBytes = 1 << 20
	// MaxProcessReadWait bounds ProcessReadRequest.Wait.
	MaxProcessReadWait = 30 * time.Second
	// DefaultProcessReadBytes is ProcessReadRequest.MaxBytes when zero;
	// MaxProcessReadBytes the largest accepted.
	DefaultProcessReadBytes = 64 << 10
	MaxProcessReadBytes     = 1 << 20
	// MaxProcessTagBytes bounds ProcessSpec.Tag.
	MaxProcessTagBytes = 128
	// MaxTerminalSize bounds PTY rows and cols.
	MaxTerminalSize = 1000
)

// Process streams (ProcessReadRequest.Stream).
const (
	StreamStdout = "stdout" // standard output, or the terminal of a PTY process
	StreamStderr = "stderr"
	StreamPTY    = "pty" // the terminal stream of a PTY process (same as stdout)
)

// Process exit reasons (ProcessInfo.ExitReason).
const (
	ExitReasonExited         = "exited"          // the process exited on its own
	ExitReasonSignaled       = "signaled"        // a signal killed it
	ExitReasonRuntimeStopped = "runtime_stopped" // the runtime was stopped (hibernated) or destroyed
	ExitReasonStartFailed    = "start_failed"    // it could not be started (exit code 127 or 126)
	ExitReasonLost           = "lost"            // its tracking was killed from inside the runtime
)

// ProcessSignals are the signal names SignalProcess accepts.
var ProcessSignals = []string{"INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT", "WINCH"}

// ProcessSpec is one background process to start. Cmd, Cwd and Env follow
// ExecRequest's rules (argv, workspace-relative cwd, environment layered on
// the runtime's).
type ProcessSpec struct {
	Cmd []string          `json:"cmd"`
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Tag is a free label (at most MaxProcessTagBytes) shown by list.
	Tag string `json:"tag,omitempty"`
	// PTY, when set, runs the process on a pseudo-terminal of that size as
	// its controlling terminal: one output stream (StreamPTY).
	PTY *TerminalSize `json:"pty,omitempty"`
	// Stdin keeps standard input open for WriteProcess; otherwise it is
	// /dev/null. A PTY process always has its terminal as input.
	Stdin bool `json:"stdin,omitempty"`
	// Network is the network the process runs with, as ExecRequest.Network:
	// "" is RuntimeSpec.Network, a mode above it is ErrCommandRejected.
	Network Network `json:"network,omitempty"`
}

// TerminalSize is a terminal's size in character cells.
type TerminalSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// ProcessInfo describes one background process.
type ProcessInfo struct {
	ID        string    `json:"process_id"`
	Tag       string    `json:"tag,omitempty"`
	Cmd       []string  `json:"cmd"`
	PTY       bool      `json:"pty,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Exited is set once the process (its leader) has ended; ExitCode is
	// then its shell-style code (128+n for signal n, 137 when the runtime
	// was stopped) and ExitReason says why (ExitReason* constants).
	Exited     bool      `json:"exited"`
	ExitCode   int       `json:"exit_code"`
	ExitReason string    `json:"exit_reason,omitempty"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	// Lingering: processes it started still run after it exited (they end
	// with the runtime's Stop, or with SignalProcess "KILL").
	Lingering bool `json:"lingering,omitempty"`
	// StdoutBytes and StderrBytes count every byte written so far.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
}

// ProcessReadRequest asks for output of one stream.
type ProcessReadRequest struct {
	// Stream is StreamStdout ("" too), StreamStderr or StreamPTY.
	Stream string `json:"stream,omitempty"`
	// Offset is the absolute byte offset to read from (the NextOffset of
	// the previous read; 0 at first).
	Offset int64 `json:"offset"`
	// MaxBytes bounds the returned data (0: DefaultProcessReadBytes, at
	// most MaxProcessReadBytes).
	MaxBytes int `json:"max_bytes,omitempty"`
	// Wait is how long to wait for new output (at most MaxProcessReadWait).
	Wait time.Duration `json:"wait,omitempty"`
}

// ProcessOutput is one read.
type ProcessOutput struct {
	Data []byte `json:"data"`
	// Offset is the absolute offset of Data[0]; NextOffset the one to read
	// from next. When the buffer wrapped past the requested offset,
	// DroppedBytes (= Offset - requested) bytes are lost.
	Offset       int64 `json:"offset"`
	NextOffset   int64 `json:"next_offset"`
	DroppedBytes int64 `json:"dropped_bytes"`
	// EOF: the process and everything it started have ended, its stream is
	// closed and every byte has been read: nothing more will come.
	EOF bool `json:"eof"`
	// The process as it is now.
	Process ProcessInfo `json:"process"`
}
