package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// Kind is a typed-error sentinel (docs/API.md "Errors"). Every error the
// service returns wraps exactly one Kind, checked with errors.Is. Each Kind
// belongs to one of two families — ErrSandbox (runtimes and backends) and
// ErrWorkspace (repo caches and workspaces) — and errors.Is(err, ErrSandbox)
// or errors.Is(err, ErrWorkspace) tells the family. A sub-kind (e.g.
// ErrFileNotFound) wraps its kind (ErrInvalidWorkspacePath), so a check for
// the kind also holds for the sub-kind.
//
// Type is the stable string used as the Temporal application error type;
// clients in any language branch on it or on the error's ErrorDetails.
type Kind struct {
	// Type is the stable wire name, e.g. "WorkspaceNotFound".
	Type string
	// Retryable says whether the same call may succeed when it is sent again
	// unchanged (after a pause); Temporal retries activities that fail with
	// a retryable kind.
	Retryable bool
	parent    *Kind
}

// Error implements error.
func (k *Kind) Error() string { return k.Type }

// Unwrap returns the parent kind (nil for the family roots), so that
// errors.Is(ErrWorkspaceNotFound, ErrWorkspace) is true.
func (k *Kind) Unwrap() error {
	if k.parent == nil {
		return nil
	}
	return k.parent
}

// Family returns "sandbox" or "workspace".
func (k *Kind) Family() string {
	root := k
	for root.parent != nil {
		root = root.parent
	}
	if root == ErrWorkspace {
		return FamilyWorkspace
	}
	return FamilySandbox
}

// Details returns the ErrorDetails an application error of this kind carries.
func (k *Kind) Details() ErrorDetails {
	d := ErrorDetails{Family: k.Family(), Kind: k.Type, Retryable: k.Retryable}
	// A kind directly below a family root is a kind; one further down is a
	// sub-kind of its parent.
	if k.parent != nil && k.parent.parent != nil {
		d.Kind, d.SubKind = k.parent.Type, k.Type
	}
	return d
}

// The error families (ErrorDetails.Family).
const (
	FamilySandbox   = "sandbox"
	FamilyWorkspace = "workspace"
)

var kinds = map[string]*Kind{}

func newKind(typ string, parent *Kind, retryable bool) *Kind {
	k := &Kind{Type: typ, parent: parent, Retryable: retryable}
	kinds[typ] = k
	return k
}

// The two family roots.
var (
	// ErrSandbox is the root of the runtime/backend family, and the type of
	// an error that fits no other kind.
	ErrSandbox = newKind("SandboxError", nil, false)
	// ErrWorkspace is the root of the repo-cache/workspace family.
	ErrWorkspace = newKind("WorkspaceError", nil, false)
)

// The runtime/backend family.
var (
	// ErrNotFound: a runtime, snapshot or other backend object does not exist.
	ErrNotFound = newKind("SandboxNotFound", ErrSandbox, false)
	// ErrUnauthorized: the backend refused our credentials.
	ErrUnauthorized = newKind("SandboxUnauthorized", ErrSandbox, false)
	// ErrTimeout: a backend call (not a command: a command's timeout is a result) timed out.
	ErrTimeout = newKind("SandboxTimeout", ErrSandbox, true)
	// ErrConflict: the object exists in a state that forbids the call (e.g. a
	// uniqueness violation in the store).
	ErrConflict = newKind("SandboxConflict", ErrSandbox, false)
	// ErrRuntimeUnavailable: the runtime backend, the store or the service
	// cannot be reached, or is not installed (type "SandboxUnavailable").
	ErrRuntimeUnavailable = newKind("SandboxUnavailable", ErrSandbox, true)
	// ErrResourceLimit: a quota, size or disk limit was hit.
	ErrResourceLimit = newKind("SandboxResourceLimit", ErrSandbox, false)
	// ErrCommandRejected: the command or call is not allowed for this workspace
	// (e.g. a mutating call on a read-only analysis workspace).
	ErrCommandRejected = newKind("SandboxCommandRejected", ErrSandbox, false)
	// ErrRateLimited: the code host refused the call because a rate limit is
	// exhausted; the message names when it resets. Retryable: the activity
	// that hit it is retried when the limit resets.
	ErrRateLimited = newKind("SandboxRateLimited", ErrSandbox, true)
)

// The workspace family.
var (
	// ErrWorkspaceNotFound: no workspace with that id or key.
	ErrWorkspaceNotFound = newKind("WorkspaceNotFound", ErrWorkspace, false)
	// ErrWorkspaceLocked: the workspace is busy with another mutating call.
	ErrWorkspaceLocked = newKind("WorkspaceLocked", ErrWorkspace, true)
	// ErrWorkspaceDirty: the call needs a clean workspace (or a dirty one cannot be dropped).
	ErrWorkspaceDirty = newKind("WorkspaceDirty", ErrWorkspace, false)
	// ErrWorkspaceUnavailable: the workspace exists but its host cannot serve it now.
	ErrWorkspaceUnavailable = newKind("WorkspaceUnavailable", ErrWorkspace, false)
	// ErrSessionReleased: the session was released a moment ago and its run
	// is ending; the same call sent again resumes the workspace. A sub-kind
	// of ErrWorkspaceUnavailable.
	ErrSessionReleased = newKind("SessionReleased", ErrWorkspaceUnavailable, true)
	// ErrRepoCacheUnavailable: cloning or fetching failed for a reason other than auth.
	ErrRepoCacheUnavailable = newKind("RepoCacheUnavailable", ErrWorkspace, true)
	// ErrRepoNotFound: the remote says the repository does not exist (HTTP 404,
	// "repository not found", not a git repository). Not retryable, unlike
	// ErrRepoCacheUnavailable.
	ErrRepoNotFound = newKind("RepoNotFound", ErrWorkspace, false)
	// ErrRepoAuthFailed: the remote refused the credentials (or none were given).
	ErrRepoAuthFailed = newKind("RepoAuthFailed", ErrWorkspace, false)
	// ErrRepoLocked: a git lock file (index.lock, config.lock …) is held; the
	// message names its path.
	ErrRepoLocked = newKind("RepoLocked", ErrWorkspace, true)
	// ErrInvalidWorkspacePath: a file path escapes the workspace root or is malformed.
	ErrInvalidWorkspacePath = newKind("InvalidWorkspacePath", ErrWorkspace, false)
	// ErrFileNotFound: a workspace path names no file. A sub-kind of
	// ErrInvalidWorkspacePath, so errors.Is(err, ErrInvalidWorkspacePath) also holds.
	ErrFileNotFound = newKind("FileNotFound", ErrInvalidWorkspacePath, false)
	// ErrInvalidArgument: a repo URL, ref, id, pattern, option or payload
	// field is malformed, unknown or hostile.
	ErrInvalidArgument = newKind("InvalidArgument", ErrWorkspace, false)
	// ErrInsufficientDisk: the disk filled up during a clone, fetch or write.
	ErrInsufficientDisk = newKind("InsufficientDisk", ErrWorkspace, false)
	// ErrRefNotFound: the requested branch, tag or commit does not exist in the repository.
	ErrRefNotFound = newKind("RefNotFound", ErrWorkspace, false)
)

// callerMistakes are the kinds that say the caller's request was wrong, not
// that the service failed (Kind.CallerMistake).
var callerMistakes = map[*Kind]bool{
	ErrInvalidArgument: true, ErrInvalidWorkspacePath: true, ErrWorkspaceNotFound: true,
	ErrRefNotFound: true, ErrRepoNotFound: true, ErrCommandRejected: true,
}

// CallerMistake reports whether an error of kind k is the caller's mistake
// rather than the service's failure: InvalidArgument, InvalidWorkspacePath
// (and its sub-kind FileNotFound), WorkspaceNotFound, RefNotFound,
// RepoNotFound and SandboxCommandRejected. Their application errors carry
// Temporal's benign category (NewApplicationError), so workers log them
// once at INFO, never at ERROR, and the SDK's failure metrics leave them
// out (docs/API.md "Errors").
func (k *Kind) CallerMistake() bool {
	for ; k != nil; k = k.parent {
		if callerMistakes[k] {
			return true
		}
	}
	return false
}

// ErrorDetails is the one detail value of every application error a
// sandboxcore update, query or workflow fails with (docs/API.md "Errors"):
// the error's family, its kind (a row of the table), the sub-kind when the
// type is one, and whether sending the same call again may succeed.
type ErrorDetails struct {
	// Family is "sandbox" or "workspace".
	Family string `json:"family"`
	// Kind is the error's kind, e.g. "InvalidWorkspacePath".
	Kind string `json:"kind"`
	// SubKind is set when the error type is a sub-kind, e.g. "FileNotFound"
	// within "InvalidWorkspacePath", "SessionReleased" within "WorkspaceUnavailable".
	SubKind string `json:"sub_kind,omitempty"`
	// Retryable: the same call, sent again unchanged, may succeed.
	Retryable bool `json:"retryable"`
	// Field is the JSON path of the offending field of an InvalidArgument
	// raised while decoding a payload (e.g. "request.mode"), when known.
	Field string `json:"field,omitempty"`
}

// Error is a typed error: a Kind, a message, and optionally the field it
// concerns and the lower-level error that caused it. Its text is
// "<Type>: <message>". Errors made by Errorf, Wrap, FieldError and
// FromTemporal are *Error.
type Error struct {
	// Kind is the error's kind (never nil).
	Kind *Kind
	// Msg is the human text, without the "<Type>: " prefix.
	Msg string
	// Field is the JSON path of the field an InvalidArgument is about ("" = none).
	Field string
	cause error
}

// Error implements error.
func (e *Error) Error() string { return e.Kind.Type + ": " + e.Msg }

// Unwrap returns the kind first, then the cause, so errors.Is finds both.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.cause}
}

// Details returns the ErrorDetails of e.
func (e *Error) Details() ErrorDetails {
	d := e.Kind.Details()
	d.Field = e.Field
	return d
}

// Errorf returns an error wrapping kind whose text is "<Type>: <formatted message>".
// The arguments may themselves wrap errors with %w.
func Errorf(kind *Kind, format string, args ...any) error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Msg: wrapped.Error(), cause: errors.Unwrap(wrapped)}
}

// FieldError returns an ErrInvalidArgument about one payload field (its JSON
// path, e.g. "request.mode"): the text is "InvalidArgument: <message>" and
// ErrorDetails.Field names the field.
func FieldError(field, format string, args ...any) error {
	return &Error{Kind: ErrInvalidArgument, Msg: fmt.Sprintf(format, args...), Field: field}
}

// Wrap returns an error wrapping both kind and cause (errors.Is holds for
// each), whose text is "<Type>: <formatted message>: <cause>". Use it where a
// lower-level error (an errno, a context error, a driver error) must stay
// reachable behind the typed kind.
func Wrap(kind *Kind, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause == nil {
		return &Error{Kind: kind, Msg: msg}
	}
	return &Error{Kind: kind, Msg: msg + ": " + cause.Error(), cause: cause}
}

// Clip returns s cut to at most n bytes, with "…" appended when it was cut;
// for quoting hostile input in error messages.
func Clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Message returns the error's text without the "<Type>: " prefix, or err.Error()
// for an error that is not an *Error.
func Message(err error) string {
	var te *Error
	if errors.As(err, &te) {
		return te.Msg
	}
	return err.Error()
}

// KindOf returns the most specific Kind that err wraps, or nil when err wraps none.
func KindOf(err error) *Kind {
	var te *Error
	if errors.As(err, &te) {
		return te.Kind
	}
	var k *Kind
	if errors.As(err, &k) {
		return k
	}
	return nil
}

// KindByType returns the Kind with the given stable type string (as carried by
// a Temporal application error), or nil when the string is unknown.
func KindByType(typ string) *Kind { return kinds[typ] }

// Kinds returns every registered Kind, sorted by Type, for documentation and tests.
func Kinds() []*Kind {
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// IsRetryable reports whether err is a typed error whose kind is Retryable:
// the same call, sent again unchanged, may succeed.
func IsRetryable(err error) bool {
	k := KindOf(err)
	return k != nil && k.Retryable
}

// Predicates, one per kind: IsX(err) is errors.Is(err, ErrX).

// IsNotFound reports whether err wraps ErrNotFound (SandboxNotFound).
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsUnauthorized reports whether err wraps ErrUnauthorized.
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// IsTimeout reports whether err wraps ErrTimeout.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// IsConflict reports whether err wraps ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsUnavailable reports whether err wraps ErrRuntimeUnavailable (SandboxUnavailable).
func IsUnavailable(err error) bool { return errors.Is(err, ErrRuntimeUnavailable) }

// IsResourceLimit reports whether err wraps ErrResourceLimit.
func IsResourceLimit(err error) bool { return errors.Is(err, ErrResourceLimit) }

// IsCommandRejected reports whether err wraps ErrCommandRejected.
func IsCommandRejected(err error) bool { return errors.Is(err, ErrCommandRejected) }

// IsRateLimited reports whether err wraps ErrRateLimited.
func IsRateLimited(err error) bool { return errors.Is(err, ErrRateLimited) }

// IsWorkspaceNotFound reports whether err wraps ErrWorkspaceNotFound.
func IsWorkspaceNotFound(err error) bool { return errors.Is(err, ErrWorkspaceNotFound) }

// IsWorkspaceLocked reports whether err wraps ErrWorkspaceLocked.
func IsWorkspaceLocked(err error) bool { return errors.Is(err, ErrWorkspaceLocked) }

// IsWorkspaceDirty reports whether err wraps ErrWorkspaceDirty.
func IsWorkspaceDirty(err error) bool { return errors.Is(err, ErrWorkspaceDirty) }

// IsWorkspaceUnavailable reports whether err wraps ErrWorkspaceUnavailable
// (SessionReleased included).
func IsWorkspaceUnavailable(err error) bool { return errors.Is(err, ErrWorkspaceUnavailable) }

// IsSessionReleased reports whether err wraps ErrSessionReleased.
func IsSessionReleased(err error) bool { return errors.Is(err, ErrSessionReleased) }

// IsRepoCacheUnavailable reports whether err wraps ErrRepoCacheUnavailable.
func IsRepoCacheUnavailable(err error) bool { return errors.Is(err, ErrRepoCacheUnavailable) }

// IsRepoNotFound reports whether err wraps ErrRepoNotFound.
func IsRepoNotFound(err error) bool { return errors.Is(err, ErrRepoNotFound) }

// IsRepoAuthFailed reports whether err wraps ErrRepoAuthFailed.
func IsRepoAuthFailed(err error) bool { return errors.Is(err, ErrRepoAuthFailed) }

// IsRepoLocked reports whether err wraps ErrRepoLocked.
func IsRepoLocked(err error) bool { return errors.Is(err, ErrRepoLocked) }

// IsInvalidWorkspacePath reports whether err wraps ErrInvalidWorkspacePath
// (FileNotFound included).
func IsInvalidWorkspacePath(err error) bool { return errors.Is(err, ErrInvalidWorkspacePath) }

// IsFileNotFound reports whether err wraps ErrFileNotFound.
func IsFileNotFound(err error) bool { return errors.Is(err, ErrFileNotFound) }

// IsInvalidArgument reports whether err wraps ErrInvalidArgument.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// IsInsufficientDisk reports whether err wraps ErrInsufficientDisk.
func IsInsufficientDisk(err error) bool { return errors.Is(err, ErrInsufficientDisk) }

// IsRefNotFound reports whether err wraps ErrRefNotFound.
func IsRefNotFound(err error) bool { return errors.Is(err, ErrRefNotFound) }

// NewApplicationError returns the Temporal application error that carries
// err over the wire (docs/API.md "Errors"): its Type is the most specific
// Kind's Type (ErrSandbox's for an untyped error), its one detail is the
// ErrorDetails, and it is non-retryable when nonRetryable is set or the kind
// is not Retryable.
func NewApplicationError(err error, nonRetryable bool) *temporal.ApplicationError {
	var te *Error
	var d ErrorDetails
	kind, msg := KindOf(err), err.Error()
	switch {
	case errors.As(err, &te):
		d, msg = te.Details(), te.Msg
	case kind != nil:
		d = kind.Details()
	default:
		kind = ErrSandbox
		d = kind.Details()
	}
	var app *temporal.ApplicationError
	opts := temporal.ApplicationErrorOptions{NonRetryable: nonRetryable || !kind.Retryable, Details: []any{d}}
	if kind.CallerMistake() {
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	temporalErr := temporal.NewApplicationErrorWithOptions(msg, kind.Type, opts)
	errors.As(temporalErr, &app)
	return app
}

// FromTemporal converts an error from a Temporal client call into a typed
// *Error: an application error's Type selects the Kind (an unknown type is
// ErrSandbox), its ErrorDetails.Field is kept; a missing workflow is
// ErrWorkspaceNotFound; a context's end is ErrTimeout; anything else
// (the service could not be reached) is ErrRuntimeUnavailable. nil stays nil,
// and an error that already wraps a Kind is returned unchanged.
func FromTemporal(err error) error {
	if err == nil {
		return nil
	}
	if KindOf(err) != nil {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		kind := KindByType(app.Type())
		if kind == nil {
			kind = ErrSandbox
		}
		out := &Error{Kind: kind, Msg: app.Message()}
		var d ErrorDetails
		if app.HasDetails() && app.Details(&d) == nil {
			out.Field = d.Field
		}
		return out
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return Errorf(ErrWorkspaceNotFound, "no such workflow (a workspace's session: never acquired, or removed — acquire it with a full request): %s", nf.Message)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Wrap(ErrTimeout, err, "the call's context ended")
	}
	return Wrap(ErrRuntimeUnavailable, err, "temporal")
}
