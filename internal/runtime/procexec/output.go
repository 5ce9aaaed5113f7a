// Package procexec is the exec machinery the runtime adapters share, kept in
// one place so that every backend gives a command the same environment,
// output bounds, exit codes and kill rules (DESIGN.md "Non-negotiables:
// Exec"):
//
//   - Output: a command's stdout and stderr, each capped (output.Capped), the
//     serialized onChunk callback, and the sandboxapi.ExecResult built from them
//     with the shared exit codes (124 timed out; 127, 126 or 137 with a
//     "sandbox: …" notice on stderr when the runtime itself did not run the
//     command). Every adapter uses it (local, bwrap, Docker).
//   - BasePath, BaseEnv and EnvList: the fixed base environment and the
//     layering of Options.BaseEnv, RuntimeSpec.Env and ExecRequest.Env
//     (every adapter).
//   - ResolveCwd: an ExecRequest's cwd checked against the host workdir
//     (every adapter).
//   - Run: one host process as the leader of its own process group, its
//     output pumped concurrently into an Output, the whole group killed on
//     timeout, on cancellation, on Stop/Destroy and as soon as the leader
//     exits, pipes still held by escaped processes cut after DrainGrace, and
//     the wait status mapped to a shell-style exit code (128+n for signal n).
//     Used by the adapters whose commands are host processes (local, bwrap).
//   - Lifecycle and Registry: the running/stopped/destroyed state machine of
//     such a runtime with the commands in flight that Stop and Destroy kill,
//     and a provider's in-memory set of runtimes (local, bwrap).
package procexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BasePath is the PATH every command starts with (RuntimeSpec.Env or
// ExecRequest.Env may replace it).
const BasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BaseEnv returns the fixed base set every command's environment starts
// from: PATH=BasePath, HOME=home, LANG=C.UTF-8 and TERM=dumb. The worker's
// own environment is never consulted.
func BaseEnv(home string) map[string]string {
	return map[string]string{"PATH": BasePath, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb"}
}

// EnvList merges layers (a later layer wins) into sorted "KEY=value" entries.
func EnvList(layers ...map[string]string) []string {
	m := map[string]string{}
	for _, l := range layers {
		maps.Copy(m, l)
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// Output collects one command's stdout and stderr, each capped at the same
// limit (head and tail kept, see output.Capped), hands every piece written to
// the onChunk callback given to NewOutput (when non-nil; calls are serialized
// and receive data they may keep), and builds the command's
// sandboxapi.ExecResult. It is safe for concurrent use.
type Output struct {
	stdout, stderr *output.Capped
	start          time.Time
	mu             sync.Mutex
	onChunk        func(sandboxapi.ExecChunk)
	// Epilogue, when set, is called once as the result is built; what it
	// returns is written on stderr first (the runtime's notices about the
	// command, such as the network policy's refusals while it ran).
	Epilogue func() string
}

// NewOutput returns an empty Output keeping at most limit bytes of each
// stream (ExecRequest.OutputCap()); the command's duration (DurationMS) is
// counted from now.
func NewOutput(limit int, onChunk func(sandboxapi.ExecChunk)) *Output {
	return &Output{stdout: output.NewCapped(limit), stderr: output.NewCapped(limit), start: time.Now(), onChunk: onChunk}
}

// Stdout returns the writer of the command's standard output: every Write
// is recorded and handed to onChunk as stream "stdout"; it never fails.
func (o *Output) Stdout() io.Writer { return stream{o, "stdout", o.stdout} }

// Stderr returns the writer of the command's standard error: every Write is
// recorded and handed to onChunk as stream "stderr"; it never fails.
func (o *Output) Stderr() io.Writer { return stream{o, "stderr", o.stderr} }

// Result returns the command's result with exit code code: the kept output,
// the truncation flag, the full byte counts and the duration so far.
func (o *Output) Result(code int) sandboxapi.ExecResult { return o.result(code, false) }

// TimedOut returns the result of a command killed at its own timeout
// (ExecRequest.Timeout()): exit code 124 with TimedOut set.
func (o *Output) TimedOut() sandboxapi.ExecResult { return o.result(124, true) }

// Notice writes "sandbox: <name>: <msg>" as a line on stderr and returns
// Result(code): the outcome of a command that the runtime did not run or
// stopped itself (127 not found, 126 cannot execute, 137 killed).
func (o *Output) Notice(code int, name, msg string) sandboxapi.ExecResult {
	o.emit("stderr", o.stderr, []byte("sandbox: "+name+": "+msg+"\n"))
	return o.Result(code)
}

// Interrupted returns the partial result (exit code code) and the error of
// a call whose caller's context ended before the command did; cause is that
// context's Err(). The error wraps cause and sandboxapi.ErrTimeout when the
// deadline passed, sandboxapi.ErrRuntimeUnavailable otherwise (cancellation).
func (o *Output) Interrupted(code int, name string, cause error) (sandboxapi.ExecResult, error) {
	res := o.Result(code)
	if errors.Is(cause, context.DeadlineExceeded) {
		return res, sandboxapi.Wrap(sandboxapi.ErrTimeout, cause, "exec %s", name)
	}
	return res, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, cause, "exec %s", name)
}

func (o *Output) result(code int, timedOut bool) sandboxapi.ExecResult {
	if f := o.Epilogue; f != nil {
		o.Epilogue = nil
		if t := f(); t != "" {
			o.emit("stderr", o.stderr, []byte(t))
		}
	}
	out := output.Outcome{ExitCode: code, Stdout: o.stdout.Bytes(), Stderr: o.stderr.Bytes(),
		StdoutBytes: o.stdout.Total(), StderrBytes: o.stderr.Total(),
		Truncated: o.stdout.Truncated() || o.stderr.Truncated(), Duration: time.Since(o.start)}
	if timedOut {
		out.Reason = sandboxapi.ExitReasonTimeout
	}
	return out.Result()
}

func (o *Output) emit(name string, c *output.Capped, p []byte) {
	_, _ = c.Write(p)
	if o.onChunk != nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.onChunk(sandboxapi.ExecChunk{Stream: name, Data: bytes.Clone(p)})
	}
}

// stream is the io.Writer of one of an Output's streams.
type stream struct {
	o    *Output
	name string
	c    *output.Capped
}

// Write records p in the stream's capped buffer and hands it to onChunk; it
// never fails.
func (s stream) Write(p []byte) (int, error) {
	s.o.emit(s.name, s.c, p)
	return len(p), nil
}

func clip(s string) string { return sandboxapi.Clip(s, 64) }
