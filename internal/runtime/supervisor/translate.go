package supervisor

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ValidateProcessSpec checks spec's backend-independent rules and returns
// an error wrapping sandboxapi.ErrInvalidArgument on the first violation: Cmd,
// Cwd and Env as in an ExecRequest (runspec.ValidateCmd, runspec.ValidateEnv), Tag at most sandboxapi.MaxProcessTagBytes
// of valid text without control characters, a terminal size within
// 1..sandbox.MaxTerminalSize, an ID matching IDPattern, Timeout within
// 0..sandbox.MaxExecTimeout, HeadBytes within 0..sandbox.MaxProcessHeadBytes,
// StdinData at most sandboxapi.MaxStdinBytes and not with a PTY.
func ValidateProcessSpec(spec sandbox.ProcessSpec) error {
	bad := func(format string, args ...any) error {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_start: "+format, args...)
	}
	if spec.ID != "" && !IDPattern.MatchString(spec.ID) {
		return bad("id %q: want %s", sandboxapi.Clip(spec.ID, 64), IDPattern)
	}
	if spec.Timeout < 0 || spec.Timeout > sandboxapi.MaxExecTimeout {
		return bad("timeout %v is outside 0..%v", spec.Timeout, sandboxapi.MaxExecTimeout)
	}
	if spec.HeadBytes < 0 || spec.HeadBytes > sandbox.MaxProcessHeadBytes {
		return bad("head bytes %d is outside 0..%d", spec.HeadBytes, sandbox.MaxProcessHeadBytes)
	}
	if len(spec.StdinData) > sandboxapi.MaxStdinBytes || (spec.StdinData != nil && spec.PTY != nil) {
		return bad("stdin data: at most %d bytes, and not for a terminal", sandboxapi.MaxStdinBytes)
	}
	if err := runspec.ValidateCmd("process_start", spec.Cmd); err != nil {
		return err
	}
	if _, err := sandboxapi.CleanRelPath(spec.Cwd); err != nil {
		return bad("cwd: %s", sandboxapi.Message(err))
	}
	if err := runspec.ValidateEnv(spec.Env); err != nil {
		return bad("%s", sandboxapi.Message(err))
	}
	if len(spec.Tag) > sandboxapi.MaxProcessTagBytes || strings.ContainsFunc(spec.Tag, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
		return bad("tag must be at most %d bytes of text without control characters", sandboxapi.MaxProcessTagBytes)
	}
	if t := spec.PTY; t != nil && (t.Rows < 1 || t.Cols < 1 || t.Rows > sandboxapi.MaxTerminalSize || t.Cols > sandboxapi.MaxTerminalSize) {
		return bad("pty %d×%d is outside 1..%d", t.Rows, t.Cols, sandboxapi.MaxTerminalSize)
	}
	return nil
}

// SignalByName maps a name of sandboxapi.ProcessSignals (with or without
// "SIG", any case) to its signal; others are sandboxapi.ErrInvalidArgument.
func SignalByName(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	sigs := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "WINCH": syscall.SIGWINCH}
	if s, ok := sigs[n]; ok {
		return s, nil
	}
	return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_signal: signal %q: want one of %s", sandboxapi.Clip(name, 64), strings.Join(sandboxapi.ProcessSignals, ", "))
}

// ToInfo maps a supervisor Info onto sandboxapi.ProcessInfo.
func ToInfo(i Info) sandboxapi.ProcessInfo {
	out := sandboxapi.ProcessInfo{
		ID: i.ID, Tag: i.Tag, Cmd: i.Argv, PTY: i.PTY, StartedAt: time.UnixMilli(i.StartedMS).UTC(),
		Exited: i.Exited, ExitCode: i.ExitCode, Lingering: i.TreeRunning,
		StdoutBytes: i.Totals[0], StderrBytes: i.Totals[1],
	}
	if i.Exited {
		out.EndedAt = time.UnixMilli(i.EndedMS).UTC()
		switch i.Reason {
		case ReasonExited:
			out.ExitReason = sandboxapi.ExitReasonExited
		case ReasonSignaled:
			out.ExitReason = sandboxapi.ExitReasonSignaled
		case ReasonTimeout:
			out.ExitReason = sandboxapi.ExitReasonTimeout
		case ReasonCanceled:
			out.ExitReason = sandboxapi.ExitReasonCancelled
		case ReasonStopped:
			out.ExitReason = sandboxapi.ExitReasonRuntimeStopped
		case ReasonStartErr:
			out.ExitReason = sandboxapi.ExitReasonStartFailed
		default:
			out.ExitReason = sandboxapi.ExitReasonLost
		}
	}
	return out
}

// MapError maps a supervisor error onto the sandbox kinds (nil stays nil).
func MapError(err error, op string) error {
	if err == nil {
		return nil
	}
	var pe *Error
	switch {
	case errors.As(err, &pe):
		kind := sandboxapi.ErrRuntimeUnavailable
		switch pe.Kind {
		case ErrInvalid:
			kind = sandboxapi.ErrInvalidArgument
		case ErrNotFound:
			kind = sandboxapi.ErrNotFound
		case ErrLimit:
			kind = sandboxapi.ErrResourceLimit
		case ErrState:
			kind = sandboxapi.ErrCommandRejected
		}
		return sandboxapi.Errorf(kind, "%s: %s", op, pe.Msg)
	case errors.Is(err, context.DeadlineExceeded):
		return sandboxapi.Wrap(sandboxapi.ErrTimeout, err, "%s", op)
	}
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s: the runtime's supervisor", op)
}
