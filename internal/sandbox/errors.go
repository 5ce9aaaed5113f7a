package sandbox

import (
	"errors"
	"fmt"
	"sort"
)

// Kind is a typed-error sentinel. Every error the service returns wraps exactly
// one Kind, checked with errors.Is. Each Kind belongs to one of the seed's two
// families ("Typed Errors": SandboxError for runtimes/backends, WorkspaceError
// for repo caches and workspaces) and errors.Is(err, ErrSandbox) or
// errors.Is(err, ErrWorkspace) tells the family.
//
// Type is the stable string used as the Temporal application error type
// (docs/API.md); clients in any language branch on it.
type Kind struct {
	// Type is the stable wire name, e.g. "WorkspaceNotFound".
	Type string
	// Retryable says whether Temporal may retry an activity that failed with it.
	Retryable bool
	family    *Kind
}

// Error implements error.
func (k *Kind) Error() string { return k.Type }

// Unwrap returns the family sentinel (nil for the family roots), so that
// errors.Is(ErrWorkspaceNotFound, ErrWorkspace) is true.
func (k *Kind) Unwrap() error {
	if k.family == nil {
		return nil
	}
	return k.family
}

var kinds = map[string]*Kind{}

func newKind(typ string, family *Kind, retryable bool) *Kind {
	k := &Kind{Type: typ, family: family, Retryable: retryable}
	kinds[typ] = k
	return k
}

// The two family roots of the seed's "Typed Errors".
var (
	// ErrSandbox is the root of the runtime/backend family (seed: SandboxError,
	// RuntimeErrorBase).
	ErrSandbox = newKind("SandboxError", nil, false)
	// ErrWorkspace is the root of the repo-cache/workspace family (seed: WorkspaceError).
	ErrWorkspace = newKind("WorkspaceError", nil, false)
)

// The runtime/backend family (seed "Typed Errors": SandboxNotFound … SandboxCommandRejected).
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
	// ErrRuntimeUnavailable: the runtime backend cannot be reached or is not
	// installed (seed: SandboxUnavailable, RuntimeUnavailable).
	ErrRuntimeUnavailable = newKind("SandboxUnavailable", ErrSandbox, true)
	// ErrResourceLimit: a quota, size or disk limit was hit.
	ErrResourceLimit = newKind("SandboxResourceLimit", ErrSandbox, false)
	// ErrCommandRejected: the command or call is not allowed for this workspace
	// (e.g. a mutating call on a read-only analysis workspace).
	ErrCommandRejected = newKind("SandboxCommandRejected", ErrSandbox, false)
)

// The workspace family (seed "Typed Errors": WorkspaceNotFound … RepoAuthFailed,
// plus the kinds this service adds).
var (
	// ErrWorkspaceNotFound: no workspace with that id or key.
	ErrWorkspaceNotFound = newKind("WorkspaceNotFound", ErrWorkspace, false)
	// ErrWorkspaceLocked: the workspace is busy with another mutating call.
	ErrWorkspaceLocked = newKind("WorkspaceLocked", ErrWorkspace, true)
	// ErrWorkspaceDirty: the call needs a clean workspace (or a dirty one cannot be dropped).
	ErrWorkspaceDirty = newKind("WorkspaceDirty", ErrWorkspace, false)
	// ErrWorkspaceUnavailable: the workspace exists but its host cannot serve it now.
	ErrWorkspaceUnavailable = newKind("WorkspaceUnavailable", ErrWorkspace, false)
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
	// ErrFileNotFound: a workspace path names no file. It wraps
	// ErrInvalidWorkspacePath, so errors.Is(err, ErrInvalidWorkspacePath) also holds.
	ErrFileNotFound = newKind("FileNotFound", ErrInvalidWorkspacePath, false)
	// ErrInvalidArgument: a repo URL, ref, id, pattern or option is malformed or hostile.
	ErrInvalidArgument = newKind("InvalidArgument", ErrWorkspace, false)
	// ErrInsufficientDisk: the disk filled up during a clone, fetch or write.
	ErrInsufficientDisk = newKind("InsufficientDisk", ErrWorkspace, false)
	// ErrRefNotFound: the requested branch, tag or commit does not exist in the repository.
	ErrRefNotFound = newKind("RefNotFound", ErrWorkspace, false)
)

// Errorf returns an error wrapping kind whose text is "<Type>: <formatted message>".
// The arguments may themselves wrap errors with %w.
func Errorf(kind *Kind, format string, args ...any) error {
	wrapped := fmt.Errorf(format, args...)
	return &typedError{kind: kind, msg: wrapped.Error(), cause: errors.Unwrap(wrapped)}
}

// Wrap returns an error wrapping both kind and cause (errors.Is holds for
// each), whose text is "<Type>: <formatted message>: <cause>". Use it where a
// lower-level error (an errno, a context error, a driver error) must stay
// reachable behind the typed kind.
func Wrap(kind *Kind, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause == nil {
		return &typedError{kind: kind, msg: msg}
	}
	return &typedError{kind: kind, msg: msg + ": " + cause.Error(), cause: cause}
}

// Clip returns s cut to at most n bytes, with "…" appended when it was cut;
// for quoting hostile input in error messages.
func Clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

type typedError struct {
	kind  *Kind
	msg   string
	cause error
}

func (e *typedError) Error() string { return e.kind.Type + ": " + e.msg }

// Unwrap returns the kind first, then the cause, so errors.Is finds both.
func (e *typedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// Message returns the error's text without the "<Type>: " prefix, or err.Error()
// for an error that was not made by Errorf.
func Message(err error) string {
	var te *typedError
	if errors.As(err, &te) {
		return te.msg
	}
	return err.Error()
}

// KindOf returns the most specific Kind that err wraps, or nil when err wraps none.
func KindOf(err error) *Kind {
	var te *typedError
	if errors.As(err, &te) {
		return te.kind
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

// Kinds returns every registered Kind, for documentation and tests.
func Kinds() []*Kind {
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
