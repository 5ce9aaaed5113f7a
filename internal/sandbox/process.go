package sandbox

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ExecNotices is an optional capability of a ProcessRuntime: what the
// runtime has to tell the agent about how it treated an exec's command
// (ProcessSpec.Exec) that ended — killed at the memory limit or the disk
// quota, started unable to grow files, refused by the network policy —
// as the lines its ExecResult's stderr ends with, the same as Runtime.Exec
// writes for a command it runs itself (docs/API.md "exec"; docs/SECURITY.md
// "Resource limits (bubblewrap)", "Network modes"). The exec activity asserts
// it (`pr.(sandbox.ExecNotices)`). info is the ended process; the result is
// "" when there is nothing to say, or when the runtime no longer knows the
// process's start (a worker restarted in between).
type ExecNotices interface {
	ExecNotice(id string, info sandboxapi.ProcessInfo) string
}

// ProcessRuntime is the optional capability of a Runtime to run background
// processes an agent controls (docs/SECURITY.md "Process model", docs/API.md
// "Processes"): started at once, read by absolute byte offsets from a
// bounded buffer, written to, signalled, resized, listed; the session's
// exec runs its command as one too (ProcessSpec.Exec), so that a worker
// restart re-attaches to it. Its consumer (the session's process and exec
// activities) asserts it on a Runtime (`rt.(sandbox.ProcessRuntime)`); a
// runtime without it runs exec through Runtime.Exec and refuses process
// operations. Every method is safe for concurrent use. Errors:
// ErrInvalidArgument for a bad request (nothing runs then), ErrNotFound for
// an unknown process id or a destroyed runtime, ErrResourceLimit beyond
// MaxProcesses live processes, ErrCommandRejected for an operation the
// process cannot take now (stdin closed, no terminal), ErrRuntimeUnavailable
// when the runtime fails, ErrTimeout when ctx's deadline passes.
type ProcessRuntime interface {
	// ProcessSupport reports what this runtime's processes can do.
	ProcessSupport() sandboxapi.ProcessSupport
	// StartProcess starts spec and returns as soon as the process exists
	// (a start failure, e.g. command not found, is an exited process with
	// exit code 127 or 126 and the reason on its stderr, not an error). A
	// stopped runtime is started first. A spec whose ID names a process the
	// runtime holds (running, ended or archived by Stop) returns that
	// process and starts nothing.
	StartProcess(ctx context.Context, spec ProcessSpec) (sandboxapi.ProcessInfo, error)
	// ReadProcess returns output from req.Offset, waiting up to req.Wait
	// (at most MaxProcessReadWait) when there is nothing new: it returns as
	// soon as there are new bytes or the process has ended.
	ReadProcess(ctx context.Context, id string, req ProcessReadRequest) (ProcessOutput, error)
	// WaitProcess waits up to wait (at most MaxProcessReadWait) for the
	// process and everything it started to end and its output to be
	// complete, and returns the process as it is then.
	WaitProcess(ctx context.Context, id string, wait time.Duration) (sandboxapi.ProcessInfo, error)
	// WriteProcess writes data to the process's stdin (the terminal for a
	// PTY process) and, when closeStdin, closes it afterwards (for a PTY
	// process: sends end-of-file, ^D). It returns the bytes written.
	WriteProcess(ctx context.Context, id string, data []byte, closeStdin bool) (int, error)
	// SignalProcess sends a signal (ProcessSignals names them) to the
	// process's group while its leader runs, and to every process it left
	// afterwards; "KILL" kills the whole tree at once.
	SignalProcess(ctx context.Context, id string, signal string) error
	// CancelProcess kills the process's whole tree at once, recording exit
	// reason ExitReasonCancelled when it was still running (an ended process
	// is left as it is).
	CancelProcess(ctx context.Context, id string) error
	// ResizeProcess sets the terminal size of a PTY process.
	ResizeProcess(ctx context.Context, id string, rows, cols int) error
	// ListProcesses returns the runtime's background processes, live and
	// recently ended (at most MaxProcesses of each), oldest first; exec
	// processes are not listed.
	ListProcesses(ctx context.Context) ([]sandboxapi.ProcessInfo, error)
}

// MaxProcessHeadBytes bounds ProcessSpec.HeadBytes, in bytes.
const MaxProcessHeadBytes = sandboxapi.ProcessBufferBytes

// ProcessSpec is one background process to start. Cmd, Cwd and Env follow
// ExecRequest's rules (argv, workspace-relative cwd, environment layered on
// the runtime's).
type ProcessSpec struct {
	// ID, when set, names the process ([A-Za-z0-9][A-Za-z0-9_.-]{0,63}):
	// starting an ID the runtime holds returns that process (a retried
	// start never runs a command twice). Empty: the runtime picks one.
	ID  string            `json:"id,omitempty"`
	Cmd []string          `json:"cmd"`
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Tag is a free label (at most MaxProcessTagBytes) shown by list.
	Tag string `json:"tag,omitempty"`
	// PTY, when set, runs the process on a pseudo-terminal of that size as
	// its controlling terminal: one output stream (StreamPTY).
	PTY *sandboxapi.TerminalSize `json:"pty,omitempty"`
	// Stdin keeps standard input open for WriteProcess; otherwise it is
	// /dev/null. A PTY process always has its terminal as input.
	Stdin bool `json:"stdin,omitempty"`
	// StdinData, when not nil, is written to standard input, which is then
	// closed (an exec's stdin; at most MaxStdinBytes; not with PTY).
	StdinData []byte `json:"stdin_data,omitempty"`
	// Exec marks an exec's command (docs/API.md "exec"): its whole tree
	// dies when its leader exits, it counts toward no process limit and is
	// not listed; the most recent ended ones stay readable.
	Exec bool `json:"exec,omitempty"`
	// Timeout kills the whole tree after that long (0: never; at most
	// MaxExecTimeout): exit code 137, reason ExitReasonTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// HeadBytes keeps the first HeadBytes of each stream (at most
	// MaxProcessHeadBytes) for the process's whole life besides the
	// buffer's newest bytes: reads of those offsets never lose them.
	HeadBytes int `json:"head_bytes,omitempty"`
	// Lossless: the buffer never drops a byte no read has asked past; the
	// process waits while its unread output fills the buffer, as long as a
	// read came within the last 10 s (a reader that went away does not
	// stall it for good).
	Lossless bool `json:"lossless,omitempty"`
	// Network is the network the process runs with, as ExecRequest.Network:
	// "" is RuntimeSpec.Network, a mode above it is ErrCommandRejected.
	Network sandboxapi.Network `json:"network,omitempty"`
}

// ProcessReadRequest asks for output of one stream, or of both.
type ProcessReadRequest struct {
	// Stream is StreamStdout ("" too), StreamStderr or StreamPTY.
	Stream string `json:"stream,omitempty"`
	// Offset is the absolute byte offset to read from (the NextOffset of
	// the previous read; 0 at first).
	Offset int64 `json:"offset"`
	// Both also reads stderr from StderrOffset (Stream stdout only):
	// ProcessOutput.Stderr.
	Both         bool  `json:"both,omitempty"`
	StderrOffset int64 `json:"stderr_offset,omitempty"`
	// MaxBytes bounds the returned data (0: DefaultProcessReadBytes, at
	// most MaxProcessReadBytes); a Both read's two streams together,
	// stdout first.
	MaxBytes int `json:"max_bytes,omitempty"`
	// Wait is how long to wait for new output (at most MaxProcessReadWait).
	Wait time.Duration `json:"wait,omitempty"`
	// Peek reads without acknowledging: a Lossless process does not make
	// room for what a peek returned.
	Peek bool `json:"peek,omitempty"`
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
	// Stderr is the stderr chunk of a Both read.
	Stderr *sandboxapi.ProcessChunk `json:"stderr,omitempty"`
	// The process as it is now.
	Process sandboxapi.ProcessInfo `json:"process"`
}
