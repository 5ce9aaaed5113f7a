package wire

import (
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Activity names of exec on processes and of the process updates
// (docs/API.md "Processes"; registered by package activities).
const (
	// ActivityExecStart starts an exec's command as a process of the
	// runtime (ProcessSpec.Exec, id sandboxapi.ExecProcessID) and waits a
	// short while for it to end: a local activity when the session runs on
	// its host's queue, so a short command costs one workflow task.
	ActivityExecStart = "sandbox.ExecStart"
	// ActivityExecCancel kills an exec's process tree (cancel, hibernate and
	// release during a command).
	ActivityExecCancel    = "sandbox.ExecCancel"
	ActivityProcessStart  = "sandbox.ProcessStart"
	ActivityProcessRead   = "sandbox.ProcessRead"
	ActivityProcessWrite  = "sandbox.ProcessWrite"
	ActivityProcessSignal = "sandbox.ProcessSignal"
	ActivityProcessResize = "sandbox.ProcessResize"
	ActivityProcessList   = "sandbox.ProcessList"
)

// ExecStartResult is ActivityExecStart's result.
type ExecStartResult struct {
	// Unsupported: the runtime has no processes (sandbox.ProcessRuntime);
	// nothing ran: run the command with ActivityExec without ProcessID.
	Unsupported bool `json:"unsupported,omitempty"`
	// Done: the command ended within the wait; Result is its outcome.
	Done   bool                  `json:"done,omitempty"`
	Result sandboxapi.ExecResult `json:"result"`
}

// ExecCancelInput is ActivityExecCancel's argument.
type ExecCancelInput struct {
	WorkspaceID string `json:"workspace_id"`
	ProcessID   string `json:"process_id"`
	// Wait bounds how long the activity waits for the killed tree to be gone.
	Wait time.Duration `json:"wait,omitempty"`
}

// ExecCancelResult is ActivityExecCancel's result.
type ExecCancelResult struct {
	// Ended: the process and its tree are gone.
	Ended bool `json:"ended"`
}

// ProcessReadActivityInput is ActivityProcessRead's argument.
type ProcessReadActivityInput struct {
	WorkspaceID string                      `json:"workspace_id"`
	Request     sandboxapi.ProcessReadInput `json:"request"`
	// Wait overrides Request.WaitMS: the session's first, local attempt of
	// a read does not wait (the workflow task is not held).
	Wait time.Duration `json:"wait"`
}

// ProcessListResult is ActivityProcessList's result.
type ProcessListResult = sandboxapi.ProcessListResult

// ProcessTrack is a background process the session started and may still
// be live, carried across continue-as-new (idle rules, docs/API.md "Idle
// rules for processes").
type ProcessTrack struct {
	ID string `json:"id"`
	// LastUse is when it was started, read or written last.
	LastUse time.Time `json:"last_use"`
}

// ProcessSpecFor maps a process_start argument onto the runtime's spec.
func ProcessSpecFor(in sandboxapi.ProcessStartInput) sandbox.ProcessSpec {
	return sandbox.ProcessSpec{Cmd: in.Cmd, Cwd: in.Cwd, Env: in.Env, Tag: in.Tag, PTY: in.PTY, Stdin: in.Stdin, Network: in.Network}
}
