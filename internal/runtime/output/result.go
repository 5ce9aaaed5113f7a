package output

import (
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Outcome is what one command left, however its runtime ran it: its exit
// code and how it ended (a sandboxapi.ExitReason* value, "" when it exited
// by itself), each stream's kept bytes (head and tail joined by Join or
// Capped) with its full byte count, whether either was cut, and how long it
// ran.
type Outcome struct {
	ExitCode                 int
	Reason                   string
	Stdout, Stderr           []byte
	StdoutBytes, StderrBytes int64
	Truncated                bool
	Duration                 time.Duration
}

// Result builds the command's sandboxapi.ExecResult: the one place the
// exit codes of an ending the command did not choose are set (docs/API.md
// "exec"): 124 and timed_out when its timeout killed it, 130 and cancelled
// when it was cancelled, 137 when its runtime was stopped under it.
func (o Outcome) Result() sandboxapi.ExecResult {
	res := sandboxapi.ExecResult{
		ExitCode: o.ExitCode, Stdout: o.Stdout, Stderr: o.Stderr, Truncated: o.Truncated,
		StdoutBytes: o.StdoutBytes, StderrBytes: o.StderrBytes, DurationMS: o.Duration.Milliseconds(),
	}
	switch o.Reason {
	case sandboxapi.ExitReasonTimeout:
		res.ExitCode, res.TimedOut = 124, true
	case sandboxapi.ExitReasonCancelled:
		res.ExitCode, res.Cancelled = 130, true
	case sandboxapi.ExitReasonRuntimeStopped:
		res.ExitCode = 137
	}
	return res
}
