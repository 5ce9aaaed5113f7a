package sandboxapi

import "time"

// Setup modes (WorkspaceRequest.Setup; docs/RUNTIMES.md "Setup").
const (
	// SetupAuto ("" too): a new workspace, or one whose lockfiles changed,
	// runs its repository's setup commands after the acquire returns;
	// commands sent meanwhile wait for it.
	SetupAuto = "auto"
	// SetupWait: as auto, and the acquire returns once the setup ended.
	SetupWait = "wait"
	// SetupSkip: the setup is not run (its state says skipped).
	SetupSkip = "skip"
)

// Setup states (SetupState.State).
const (
	SetupPending = "pending"
	SetupRunning = "running"
	SetupDone    = "done"
	SetupFailed  = "failed"
	SetupSkipped = "skipped"
)

// SetupOutputTailBytes caps SetupState.StdoutTail and StderrTail: the last
// bytes of each stream (the whole output is kept: OutputID).
const SetupOutputTailBytes = 4 << 10

// SetupTimeout bounds one setup run (all its commands).
const SetupTimeout = 30 * time.Minute

// ValidateSetupMode checks a WorkspaceRequest.Setup value: "", auto, wait or
// skip. Errors: ErrInvalidArgument naming the field.
func ValidateSetupMode(mode string) error {
	switch mode {
	case "", SetupAuto, SetupWait, SetupSkip:
		return nil
	}
	return Errorf(ErrInvalidArgument, "setup %q: must be auto, wait or skip", clip(mode))
}

// SetupState is the state of a workspace's setup run (docs/RUNTIMES.md
// "Setup"): the handle's and describe's "setup", nil when the repository
// names no setup command.
type SetupState struct {
	// State is one of pending, running, done, failed, skipped.
	State string `json:"state"`
	// ExitCode is the setup script's exit code once it ended (done: 0).
	ExitCode int `json:"exit_code"`
	// StartedAt and FinishedAt bound the run; DurationMS is their
	// difference in milliseconds.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	// Commands is how many setup commands the run had.
	Commands int `json:"commands,omitempty"`
	// StdoutTail and StderrTail are the last SetupOutputTailBytes of each
	// stream (invalid UTF-8 replaced).
	StdoutTail string `json:"stdout_tail,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	// OutputID names the whole output for read_output when a stream was
	// longer than the tail (docs/API.md "Kept output").
	OutputID string `json:"output_id,omitempty"`
	// LockfilesHash is RepoEnvironment.LockfilesHash as of this run: a
	// later acquire that sees another hash runs the setup again.
	LockfilesHash string `json:"lockfiles_hash,omitempty"`
	// Prepared says how the run used a prepared tree (docs/RUNTIMES.md
	// "Prepared trees"): restored in place of the commands, or saved after
	// them; nil when the environment names no prepared directory.
	Prepared *PreparedTree `json:"prepared,omitempty"`
	// Error says why a failed setup could not run (no exit code of its own),
	// or that it timed out.
	Error string `json:"error,omitempty"`
}

// Ended reports whether the setup run is over (done, failed or skipped).
func (s *SetupState) Ended() bool {
	return s != nil && (s.State == SetupDone || s.State == SetupFailed || s.State == SetupSkipped)
}

// Prepared-tree actions (PreparedTree.Action).
const (
	// PreparedRestored: the directories came from a prepared tree and the
	// setup commands did not run.
	PreparedRestored = "restored"
	// PreparedSaved: the setup ran and its directories were kept as a
	// prepared tree for the next workspace.
	PreparedSaved = "saved"
	// PreparedNone: no tree was restored or saved; Note says why (none
	// kept yet for these lockfiles, a directory already there, too large…).
	PreparedNone = "none"
)

// PreparedTree is what a setup run did with a prepared tree
// (SetupState.Prepared; docs/RUNTIMES.md "Prepared trees").
type PreparedTree struct {
	// Action is restored, saved or none.
	Action string `json:"action"`
	// Key names the tree: a hash of the cache scope, the lockfiles'
	// content, the setup commands, the prepared paths and the runtime.
	Key string `json:"key,omitempty"`
	// Mode is how a restored tree's files reached the worktree: reflink
	// (copy-on-write clones), link (hard links to files no command can
	// change) or copy.
	Mode string `json:"mode,omitempty"`
	// Files and Bytes count the regular files and their bytes.
	Files int64 `json:"files,omitempty"`
	Bytes int64 `json:"bytes,omitempty"`
	// DurationMS is how long the restore or save took.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Note says why nothing was restored or saved, or what failed.
	Note string `json:"note,omitempty"`
	// LockfilesHash is the lockfiles' hash the tree is keyed by: as the
	// worktree held them before the setup commands ran.
	LockfilesHash string `json:"lockfiles_hash,omitempty"`
}
