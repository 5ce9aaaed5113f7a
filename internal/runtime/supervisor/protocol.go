package supervisor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"regexp"
	"time"
)

// Version is the control protocol version; Hello reports it and a client
// refuses a supervisor speaking another one (a sandbox left by an older
// worker is then restarted).
const Version = 2

// maxHeader and maxPayload bound one frame of the control protocol.
const (
	maxHeader  = 4 << 20
	maxPayload = 64 << 20
)

// Request is one call on a control connection (docs/SECURITY.md "Process
// model"): Op names it, the other fields are its arguments. A connection
// carries one request at a time; its response comes before the next request
// is read.
type Request struct {
	Op string `json:"op"` // hello, start, read, wait, write, signal, resize, list, shutdown

	// start
	Spec *Spec `json:"spec,omitempty"`

	// read, wait, write, signal, resize
	ID string `json:"id,omitempty"`

	// read: the next offset wanted of each stream (stdout or the terminal
	// stream; stderr), at most Max bytes per stream, waiting up to WaitMS
	// for anything new. An offset of math.MaxInt64 (NoStream) reads nothing
	// of that stream. A read acknowledges what precedes its offsets (a
	// foreground or Lossless process may then write on) unless Peek.
	// wait: waits up to WaitMS for the process's tree to end and its
	// streams to close.
	Offsets [2]int64 `json:"offsets,omitempty"`
	Max     int      `json:"max,omitempty"`
	// MaxTotal, when set, bounds both streams' data together (the first
	// stream is served first): a read fits one payload.
	MaxTotal int   `json:"max_total,omitempty"`
	WaitMS   int64 `json:"wait_ms,omitempty"`
	Peek     bool  `json:"peek,omitempty"`

	// write: the payload goes to stdin; Close closes stdin afterwards.
	Close bool `json:"close,omitempty"`

	// signal; with Reason ReasonCanceled (Signal SIGKILL) the killed
	// tree's exit reason is recorded as a cancellation.
	Signal int    `json:"signal,omitempty"`
	Reason string `json:"reason,omitempty"`

	// resize
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`

	// shutdown: how long to wait for the killed trees, in milliseconds.
	GraceMS int64 `json:"grace_ms,omitempty"`
}

// NoStream as a read offset reads nothing of that stream.
const NoStream = math.MaxInt64

// Spec is one process to start.
type Spec struct {
	// ID, when set, names the process (IDPattern): a start naming a process
	// the supervisor holds returns that one (Response.Existing) instead of
	// starting another, so a retried start never runs a command twice.
	ID   string   `json:"id,omitempty"`
	Argv []string `json:"argv"`
	// Env is the complete environment (KEY=value); with InheritEnv the
	// supervisor's own environment comes first and Env overrides it.
	Env        []string `json:"env"`
	InheritEnv bool     `json:"inherit_env,omitempty"`
	Dir        string   `json:"dir"`
	Tag        string   `json:"tag,omitempty"`
	// Foreground processes belong to the connection that started them: when
	// it closes before they end, their whole tree is killed; when their
	// leader exits, the rest of the tree is killed; their output is never
	// dropped (the process waits when the unread part fills the buffer).
	// Background processes outlive connections, their descendants outlive
	// the leader, and their buffers wrap (DroppedBytes).
	Foreground bool `json:"foreground,omitempty"`
	// Stdin, for a foreground process, is written to its standard input,
	// which is then closed (/dev/null when nil). OpenStdin keeps a
	// background process's standard input open for write requests.
	Stdin     []byte `json:"stdin,omitempty"`
	OpenStdin bool   `json:"open_stdin,omitempty"`
	// Exec marks an exec's command: a background process (it outlives
	// connections and the worker) whose tree dies with its leader, that
	// Stdin is written to, that counts toward no limit and is not listed;
	// the most recent ended ones (KeptExec) stay readable.
	Exec bool `json:"exec,omitempty"`
	// HeadBytes keeps the first HeadBytes of each stream for the process's
	// whole life besides the buffer's newest bytes (reads of those offsets
	// are served from it).
	HeadBytes int `json:"head_bytes,omitempty"`
	// Lossless: the buffer never drops a byte no read has asked past: the
	// process waits while its unread output fills the buffer (twice the
	// usual size, so that it writes on while a reader fetches), as long as
	// a read (not a peek) came within LosslessIdle.
	Lossless bool `json:"lossless,omitempty"`
	// NoFileGrowth starts the process with a file size limit of zero
	// (RLIMIT_FSIZE, soft and hard): neither it nor anything it starts can
	// make a file larger (the write fails with EFBIG, the writer gets
	// SIGXFSZ) or raise the limit again without CAP_SYS_RESOURCE; removing
	// and truncating files still work. The bubblewrap runtime sets it while
	// the runtime is over its disk quota (docs/SECURITY.md "Resource
	// limits (bubblewrap)").
	NoFileGrowth bool `json:"no_file_growth,omitempty"`
	// PTY runs the process on a new pseudo-terminal of Rows×Cols as its
	// controlling terminal (one output stream).
	PTY  bool   `json:"pty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// TimeoutMS kills the tree after that long (0: never); the exit reason
	// is then ReasonTimeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// IDPattern is what Spec.ID must match.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// LosslessIdle is how long a Lossless process waits for a reader: once no
// read came for that long its buffer drops the oldest bytes again (a
// reader that went away does not stall the command for good).
const LosslessIdle = 10 * time.Second

// What a supervisor keeps and how long a read waits, which the worker's
// side follows too (Archive, Client.Run).
const (
	// KeptExited is how many ended background processes stay listed.
	KeptExited = 64
	// KeptExec is how many ended exec processes (Spec.Exec) stay readable.
	KeptExec = 16
	// MaxReadWait bounds how long one read waits for output.
	MaxReadWait = 30 * time.Second
)

// Exit reasons of a process (Info.Reason).
const (
	ReasonExited   = "exited"          // the leader exited on its own
	ReasonSignaled = "signaled"        // a signal killed the leader
	ReasonTimeout  = "timeout"         // Spec.TimeoutMS passed; the tree was killed
	ReasonCanceled = "cancelled"       // the foreground owner went away, or a cancel (Request.Reason); the tree was killed
	ReasonStopped  = "runtime_stopped" // the runtime was stopped (shutdown); the tree was killed
	ReasonStartErr = "start_failed"    // the executable could not be started
	ReasonLost     = "supervisor_lost" // its tracking process was killed from inside the sandbox
)

// Info describes one process.
type Info struct {
	ID        string   `json:"id"`
	Tag       string   `json:"tag,omitempty"`
	Argv      []string `json:"argv"`
	PTY       bool     `json:"pty,omitempty"`
	Exec      bool     `json:"exec,omitempty"` // Spec.Exec
	Pid       int      `json:"pid,omitempty"`  // in the sandbox's pid namespace
	StartedMS int64    `json:"started_ms"`     // Unix milliseconds
	// Exited is set once the leader has ended; ExitCode is its shell-style
	// code (128+n for signal n), Reason why. TreeRunning tells that
	// processes it started still run (background processes only).
	Exited      bool   `json:"exited,omitempty"`
	ExitCode    int    `json:"exit_code"`
	Reason      string `json:"reason,omitempty"`
	EndedMS     int64  `json:"ended_ms,omitempty"`
	TreeRunning bool   `json:"tree_running,omitempty"`
	// Message explains a start failure (e.g. "command not found").
	Message string `json:"message,omitempty"`
	// Totals written so far to each stream (stdout or terminal; stderr).
	Totals [2]int64 `json:"totals"`
}

// Chunk is what a read returns of one stream.
type Chunk struct {
	// Offset is the absolute offset of the first returned byte: the
	// requested one, or the oldest still buffered when bytes were dropped
	// (Dropped = Offset - requested).
	Offset  int64 `json:"offset"`
	Len     int   `json:"len"`
	Dropped int64 `json:"dropped,omitempty"`
	// EOF: the stream is closed, the process and every process it started
	// have ended, and nothing follows Offset+Len.
	EOF bool `json:"eof,omitempty"`
}

// Response answers one Request. Error is set on failure (Kind is one of the
// Err* strings).
type Response struct {
	Error *Error `json:"error,omitempty"`

	// hello
	Hello *HelloInfo `json:"hello,omitempty"`
	// start, read, wait, list, shutdown
	Info *Info `json:"info,omitempty"`
	// start: Spec.ID named a process the supervisor already held.
	Existing bool     `json:"existing,omitempty"`
	Chunks   [2]Chunk `json:"chunks,omitempty"` // read: data in the payload, stdout first
	List     []Info   `json:"list,omitempty"`
	// shutdown: every background process with the sizes of what it keeps
	// (heads, then tails, of each process in order: the payload).
	Final []FinalHeader `json:"final,omitempty"`
	// write: bytes accepted
	Written int `json:"written,omitempty"`
}

// HelloInfo identifies a running supervisor.
type HelloInfo struct {
	Version   int    `json:"version"`
	Runtime   string `json:"runtime"`
	Layout    string `json:"layout"`
	Pid       int    `json:"pid"`
	StartedMS int64  `json:"started_ms"`
}

// Final is a background process as shutdown leaves it: its Info, the
// newest bytes of each stream (at most ArchiveTailBytes, starting at
// Starts[i]), and the head each kept (Spec.HeadBytes, from offset 0).
type Final struct {
	Info   Info      `json:"info"`
	Starts [2]int64  `json:"starts"`
	Data   [2][]byte `json:"data"`
	Heads  [2][]byte `json:"heads,omitempty"`
}

// FinalHeader is a Final on the wire: the byte counts of its heads and
// tails, which follow in the response's payload.
type FinalHeader struct {
	Info     Info     `json:"info"`
	Starts   [2]int64 `json:"starts"`
	Lens     [2]int   `json:"lens"`
	HeadLens [2]int   `json:"head_lens,omitempty"`
}

// EgressListen is where the forwarder listens inside a limited runtime;
// commands get HTTP_PROXY=http://EgressListen. The forwarder is
// daemon.ForwardEgress (docs/SECURITY.md "Network modes").
const EgressListen = "127.0.0.1:3128"

// ArchiveTailBytes bounds what shutdown keeps of each stream's newest
// output (so that a runtime's archive stays a few MiB whatever ran there).
const ArchiveTailBytes = 256 << 10

// EncodeFinals splits the final records of a shutdown (or an archive) into
// their headers and one payload: per record its two heads then its two
// tails (stdout, stderr), whose lengths in bytes the headers carry
// (HeadLens, Lens) in that order.
func EncodeFinals(fs []Final) ([]FinalHeader, []byte) {
	hs := make([]FinalHeader, len(fs))
	var payload []byte
	for i, f := range fs {
		hs[i] = FinalHeader{Info: f.Info, Starts: f.Starts}
		for j := range 2 {
			hs[i].HeadLens[j] = len(f.Heads[j])
			payload = append(payload, f.Heads[j]...)
		}
		for j := range 2 {
			hs[i].Lens[j] = len(f.Data[j])
			payload = append(payload, f.Data[j]...)
		}
	}
	return hs, payload
}

// decodeFinals is EncodeFinals' inverse.
func decodeFinals(hs []FinalHeader, payload []byte) ([]Final, error) {
	out := make([]Final, len(hs))
	take := func(n int) ([]byte, error) {
		if n < 0 || n > len(payload) {
			return nil, errors.New("supervisor: malformed shutdown response")
		}
		b := payload[:n:n]
		payload = payload[n:]
		if n == 0 {
			return nil, nil
		}
		return b, nil
	}
	for i, h := range hs {
		out[i] = Final{Info: h.Info, Starts: h.Starts}
		var err error
		for j := range 2 {
			if out[i].Heads[j], err = take(h.HeadLens[j]); err != nil {
				return nil, err
			}
		}
		for j := range 2 {
			if out[i].Data[j], err = take(h.Lens[j]); err != nil {
				return nil, err
			}
		}
	}
	if len(payload) != 0 {
		return nil, errors.New("supervisor: malformed shutdown response")
	}
	return out, nil
}

// Error kinds of Response.Error.
const (
	ErrInvalid  = "invalid"   // a malformed request
	ErrNotFound = "not_found" // no such process
	ErrLimit    = "limit"     // too many processes
	ErrState    = "state"     // the process cannot do that now (stdin closed, no terminal, ended)
	ErrInternal = "internal"  // the supervisor failed (fork, pipe, …)
)

// Error is a failed request.
type Error struct {
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Msg }

// WriteFrame writes one frame of the control protocol (doc.go): hdr as JSON
// and payload, each behind its 4-byte big-endian length in bytes, in one
// Write. Errors: hdr's marshalling error, w's.
func WriteFrame(w io.Writer, hdr any, payload []byte) error {
	h, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 8+len(h)+len(payload))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(h)))
	buf = append(buf, h...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
	buf = append(buf, payload...)
	_, err = w.Write(buf)
	return err
}

// ReadFrame reads one frame WriteFrame wrote, decodes its header into hdr
// and returns its payload (nil when empty). Errors: io.EOF before a frame
// starts; io.ErrUnexpectedEOF inside one; a header over maxHeader or a
// payload over maxPayload bytes refused before it is read; the header's
// JSON error.
func ReadFrame(r io.Reader, hdr any) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	hl := binary.BigEndian.Uint32(n[:])
	if hl > maxHeader {
		return nil, errors.New("control frame header too large")
	}
	h := make([]byte, hl)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, unexpected(err)
	}
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, unexpected(err)
	}
	pl := binary.BigEndian.Uint32(n[:])
	if pl > maxPayload {
		return nil, errors.New("control frame payload too large")
	}
	var p []byte
	if pl > 0 {
		p = make([]byte, pl)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, unexpected(err)
		}
	}
	if err := json.Unmarshal(h, hdr); err != nil {
		return nil, err
	}
	return p, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
