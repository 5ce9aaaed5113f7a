package tools

import (
	"errors"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Tool names (README "Use it from an agent").
const (
	TextEditor = "sandbox_text_editor"
	Shell      = "sandbox_shell"
	Output     = "sandbox_output"
	Search     = "sandbox_search"
	Git        = "sandbox_git"
	PR         = "sandbox_pr"
)

// Defaults and bounds of the tools' inputs.
const (
	// DefaultShellTimeoutS is sandbox_shell's timeout_s when absent.
	DefaultShellTimeoutS = 120
	// DefaultShellOutputBytes is sandbox_shell's max_output_bytes (per
	// stream) when absent: 16 KiB, a few hundred lines of a model's
	// context; what is cut stays readable with sandbox_output.
	DefaultShellOutputBytes = 16 << 10
	// DefaultOutputPageBytes is sandbox_output's limit when absent.
	DefaultOutputPageBytes = 80_000
	// DefaultSearchHits is sandbox_search's max_hits when absent.
	DefaultSearchHits = 200
	// DefaultLogCommits is sandbox_git log's limit when absent.
	DefaultLogCommits = 20
	// MaxViewLines bounds a view of a whole file; a view_range shows any part.
	MaxViewLines = 2000
)

// --- inputs and outputs (their JSON Schemas are the tools' schemas) ---------

// ErrorOutput is the structured content of a tool error (isError): the
// sandbox error's type and details (docs/API.md "Errors").
type ErrorOutput struct {
	Error ToolError `json:"error"`
}

// ToolError is a typed error of a tool call.
type ToolError struct {
	// Type is the error's stable type string, e.g. "InvalidWorkspacePath".
	Type    string `json:"type"`
	Message string `json:"message"`
	Family  string `json:"family"`
	Kind    string `json:"kind"`
	SubKind string `json:"sub_kind,omitempty"`
	// Retryable: the same call, sent again unchanged, may succeed.
	Retryable bool   `json:"retryable"`
	Field     string `json:"field,omitempty"`
}

// ErrorFor describes err as a ToolError (untyped errors are SandboxError).
func ErrorFor(err error) ToolError {
	k := sandboxapi.KindOf(err)
	if k == nil {
		k = sandboxapi.ErrSandbox
	}
	d := k.Details()
	var se *sandboxapi.Error
	if errors.As(err, &se) {
		d.Field = se.Field
	}
	return ToolError{Type: k.Type, Message: sandboxapi.Message(err), Family: d.Family, Kind: d.Kind, SubKind: d.SubKind,
		Retryable: d.Retryable, Field: d.Field}
}

// invalid is an InvalidArgument about field.
func invalid(field, format string, args ...any) error {
	return sandboxapi.FieldError(field, format, args...)
}

// --- handlers ----------------------------------------------------------------

// call is one tool invocation: its workspace session and, for a long
// command, the progress reporter (nil when the client did not ask).
type call struct {
	s        *sandboxclient.Session
	progress func(done float64, total float64, message string)
	// interactive keeps the offsets sandbox_exec and sandbox_write_stdin
	// have returned (one per server; nil: a fresh one per call).
	interactive *Interactive
}

// processes returns the call's Interactive.
func (c call) processes() *Interactive {
	if c.interactive == nil {
		return &Interactive{}
	}
	return c.interactive
}
