package sandboxapi

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Background processes of a workspace's runtime (docs/API.md "Processes"):
// started at once, read by absolute byte offsets from a bounded buffer,
// written to, signalled, resized, listed.

// Process limits.
const (
	// MaxProcesses is the most live background processes a runtime holds:
	// one more is SandboxResourceLimit.
	MaxProcesses = 64
	// ProcessBufferBytes is each stream's buffer per process: the newest
	// ProcessBufferBytes bytes are kept, older ones are dropped
	// (dropped_bytes of a read from an older offset).
	ProcessBufferBytes = 1 << 20
	// MaxProcessReadWait bounds ProcessReadInput.WaitMS.
	MaxProcessReadWait = 30 * time.Second
	// DefaultProcessReadBytes is ProcessReadInput.MaxBytes when zero;
	// MaxProcessReadBytes the largest accepted.
	DefaultProcessReadBytes = 64 << 10
	MaxProcessReadBytes     = 1 << 20
	// MaxProcessWriteBytes bounds ProcessWriteInput.Data.
	MaxProcessWriteBytes = MaxStdinBytes
	// MaxProcessTagBytes bounds ProcessStartInput.Tag.
	MaxProcessTagBytes = 128
	// MaxTerminalSize bounds PTY rows and cols.
	MaxTerminalSize = 1000
	// DefaultProcessMaxIdle is how long a live background process keeps its
	// runtime from hibernating without being read (SANDBOX_PROCESS_MAX_IDLE).
	DefaultProcessMaxIdle = 2 * time.Hour
)

// Process streams (ProcessReadInput.Stream): StreamStdout (standard
// output, or the terminal of a PTY process), StreamStderr, and StreamPTY.
const (
	StreamPTY = "pty" // the terminal stream of a PTY process (same as StreamStdout)
)

// Process exit reasons (ProcessInfo.ExitReason).
const (
	ExitReasonExited         = "exited"          // the process exited on its own
	ExitReasonSignaled       = "signaled"        // a signal killed it
	ExitReasonTimeout        = "timeout"         // its time limit passed (an exec's timeout_s); its tree was killed
	ExitReasonCancelled      = "cancelled"       // it was cancelled (an exec's cancel); its tree was killed
	ExitReasonRuntimeStopped = "runtime_stopped" // the runtime was stopped (hibernated) or destroyed
	ExitReasonStartFailed    = "start_failed"    // it could not be started (exit code 127 or 126)
	ExitReasonLost           = "lost"            // its tracking was killed from inside the runtime
)

// ProcessStreams, ExitReasons and CancelStates list the values of those
// fields (docs/schema states them as enums).
var (
	ProcessStreams = []string{StreamStdout, StreamStderr, StreamPTY}
	ExitReasons    = []string{ExitReasonExited, ExitReasonSignaled, ExitReasonTimeout, ExitReasonCancelled,
		ExitReasonRuntimeStopped, ExitReasonStartFailed, ExitReasonLost}
	CancelStates = []string{CancelRunning, CancelQueued, CancelFinished, CancelUnknown}
)

// ProcessSignals are the signal names process_signal accepts (with or
// without "SIG", any case).
var ProcessSignals = []string{"INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT", "WINCH"}

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
	// with the runtime's hibernation, or with process_signal KILL).
	Lingering bool `json:"lingering,omitempty"`
	// StdoutBytes and StderrBytes count every byte written so far.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
}

// ProcessSupport describes a runtime's background processes (process_list).
type ProcessSupport struct {
	// Durable: processes and their buffered output survive a restart of the
	// worker (kill -9).
	Durable bool `json:"durable"`
	// PTY: processes can run on a pseudo-terminal.
	PTY bool `json:"pty"`
	// MaxProcesses bounds live background processes per runtime.
	MaxProcesses int `json:"max_processes"`
	// BufferBytes is each stream's buffer: the newest BufferBytes bytes are
	// kept, older ones are dropped.
	BufferBytes int `json:"buffer_bytes"`
}

// ProcessStartInput is process_start's argument: one background process.
// Cmd, Cwd and Env follow ExecRequest's rules (an argv, workspace-relative
// cwd, environment layered on the runtime's fixed one).
type ProcessStartInput struct {
	Cmd []string          `json:"cmd"`
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Tag is a free label (at most MaxProcessTagBytes of text) shown by process_list.
	Tag string `json:"tag,omitempty"`
	// PTY, when set, runs the process on a pseudo-terminal of that size as
	// its controlling terminal: one output stream (StreamPTY), input
	// through process_write.
	PTY *TerminalSize `json:"pty,omitempty"`
	// Stdin keeps standard input open for process_write; otherwise it is
	// /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// Network is the process's network, as ExecRequest.Network: "" is the
	// workspace's policy; a mode above it is ErrCommandRejected
	// (docs/SECURITY.md "Network modes").
	Network Network `json:"network,omitempty"`
}

// ProcessStartResult is process_start's result, returned as soon as the
// process exists (a command that cannot start is an exited process with
// exit code 127 or 126 and the reason on its stderr).
type ProcessStartResult struct {
	ProcessID string      `json:"process_id"`
	Process   ProcessInfo `json:"process"`
}

// ProcessReadInput is process_read's argument.
type ProcessReadInput struct {
	ProcessID string `json:"process_id"`
	// Stream is StreamStdout ("" too), StreamStderr or StreamPTY.
	Stream string `json:"stream,omitempty"`
	// Offset is the absolute byte offset to read from: the next_offset of
	// the previous read, 0 at first.
	Offset int64 `json:"offset"`
	// StderrOffset, when set (Stream stdout), also reads stderr from that
	// offset in the same call (ProcessReadResult.Stderr).
	StderrOffset *int64 `json:"stderr_offset,omitempty"`
	// MaxBytes bounds the data returned (0: DefaultProcessReadBytes, at
	// most MaxProcessReadBytes): with StderrOffset both streams' together,
	// stdout first, so that one read fits one Temporal payload.
	MaxBytes int `json:"max_bytes,omitempty"`
	// WaitMS is how long to wait, in milliseconds, when there is nothing
	// new (at most 30,000): the read returns as soon as there are new bytes
	// or the process has ended. A process that does not exist yet (an
	// exec's, before its command starts) is waited for too.
	WaitMS int `json:"wait_ms,omitempty"`
}

// ProcessChunk is what a read returned of one stream: Data covers
// [Offset, NextOffset); DroppedBytes were lost before Offset (the buffer
// wrapped past the requested offset); EOF: nothing more will come.
type ProcessChunk struct {
	Data         []byte `json:"data"`
	Offset       int64  `json:"offset"`
	NextOffset   int64  `json:"next_offset"`
	DroppedBytes int64  `json:"dropped_bytes"`
	EOF          bool   `json:"eof"`
}

// ProcessReadResult is process_read's result: the requested stream's
// chunk (Data from Offset to NextOffset), the stderr chunk when
// StderrOffset was given, and the process as it is now. EOF: the process
// and everything it started have ended and every byte of the stream (both
// streams with StderrOffset) has been read.
type ProcessReadResult struct {
	ProcessID    string        `json:"process_id"`
	Stream       string        `json:"stream"`
	Data         []byte        `json:"data"`
	Offset       int64         `json:"offset"`
	NextOffset   int64         `json:"next_offset"`
	DroppedBytes int64         `json:"dropped_bytes"`
	Stderr       *ProcessChunk `json:"stderr,omitempty"`
	EOF          bool          `json:"eof"`
	Exited       bool          `json:"exited"`
	ExitCode     int           `json:"exit_code"`
	ExitReason   string        `json:"exit_reason,omitempty"`
	Process      ProcessInfo   `json:"process"`
}

// ProcessWriteInput is process_write's argument: Data goes to the
// process's standard input (the terminal of a PTY process); CloseStdin
// closes it afterwards (for a PTY process: sends end-of-file, ^D).
type ProcessWriteInput struct {
	ProcessID  string `json:"process_id"`
	Data       []byte `json:"data,omitempty"`
	CloseStdin bool   `json:"close_stdin,omitempty"`
}

// ProcessWriteResult is process_write's result.
type ProcessWriteResult struct {
	ProcessID string `json:"process_id"`
	Written   int    `json:"written"`
}

// ProcessSignalInput is process_signal's argument: Signal is one of
// ProcessSignals (default TERM), sent to the process's group while its
// leader runs and to every process it left afterwards; KILL kills the
// whole tree at once.
type ProcessSignalInput struct {
	ProcessID string `json:"process_id"`
	Signal    string `json:"signal,omitempty"`
}

// ProcessResizeInput is process_resize's argument: the new terminal size
// of a PTY process.
type ProcessResizeInput struct {
	ProcessID string `json:"process_id"`
	Rows      int    `json:"rows"`
	Cols      int    `json:"cols"`
}

// ProcessResult is the result of process_signal and process_resize.
type ProcessResult struct {
	ProcessID string `json:"process_id"`
}

// ProcessListResult is process_list's result: the runtime's background
// processes, live and recently ended (at most MaxProcesses of each),
// oldest first, and what its processes can do.
type ProcessListResult struct {
	Processes []ProcessInfo  `json:"processes"`
	Support   ProcessSupport `json:"support"`
}

// CancelInput is cancel's argument: the update id of an exec to cancel.
type CancelInput struct {
	UpdateID string `json:"update_id"`
}

// Cancel outcomes (CancelResult.State).
const (
	// CancelRunning: the exec's command was running; its whole tree was
	// killed and the exec returned cancelled.
	CancelRunning = "running"
	// CancelQueued: the exec waited for the session's lock; it returned
	// cancelled without running.
	CancelQueued = "queued"
	// CancelFinished: the exec had already returned (its result stands).
	CancelFinished = "finished"
	// CancelUnknown: no exec with that update id in this session run.
	CancelUnknown = "unknown"
)

// CancelResult is cancel's result: the state the exec was in.
type CancelResult struct {
	UpdateID string `json:"update_id"`
	// Cancelled: the exec returned cancelled (state running or queued).
	Cancelled bool   `json:"cancelled"`
	State     string `json:"state"`
}

// ExecProcessID returns the process id under which an exec update with id
// updateID runs its command in workspace workspaceID: "exec-" and the
// first 24 hex digits of sha256(workspaceID + "/" + updateID). A client
// reads a running exec's output with process_read on it (docs/API.md
// "Streaming exec output"). The command runs at most once per process id
// while the runtime keeps its record.
func ExecProcessID(workspaceID, updateID string) string {
	sum := sha256.Sum256([]byte(workspaceID + "/" + updateID))
	return "exec-" + hex.EncodeToString(sum[:12])
}

// The stream workflow (docs/API.md "Streaming exec output"): a reader of a
// workspace's process output that works beside the session. Its only
// update is process_read (the session's argument and result); its history
// is shed by continue-as-new every few MiB, so streaming a command's whole
// output never grows the session's history, and a read never waits for
// the session's lock.
const (
	// ProcessStreamWorkflowType is its registered name; start it on the
	// shared task queue with update-with-start (conflict policy USE_EXISTING).
	ProcessStreamWorkflowType = "ProcessStreamWorkflow"
	// StreamWorkflowIDPrefix + the workspace id's 24 hex digits is its
	// workflow id (StreamWorkflowID).
	StreamWorkflowIDPrefix = "sandbox-stream/"
	// SignalProcessUsed is the session signal the stream workflow sends
	// (ProcessUsedSignal) so that reading a process through it keeps the
	// process in use for the session's idle rules.
	SignalProcessUsed = "process_used"
)

// StreamWorkflowID returns the stream workflow id of a workspace
// ("sandbox-stream/" + its 24 hex digits). Errors: ErrInvalidArgument for a
// malformed workspace id.
func StreamWorkflowID(wsID string) (string, error) {
	if err := ValidateWorkspaceID(wsID); err != nil {
		return "", err
	}
	return StreamWorkflowIDPrefix + wsID[len("ws-"):], nil
}

// StreamInput is the stream workflow's argument.
type StreamInput struct {
	WorkspaceID string `json:"workspace_id"`
}

// ProcessUsedSignal is the payload of SignalProcessUsed: processes read
// through the stream workflow since its last signal.
type ProcessUsedSignal struct {
	ProcessIDs []string `json:"process_ids"`
}
