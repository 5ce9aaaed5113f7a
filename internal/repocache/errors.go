package repocache

import (
	"errors"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// kindError is a sandbox typed error that also unwraps to its cause, so both
// errors.Is(err, kind) and errors.Is(err, cause) hold (e.g. ErrRepoLocked and
// context.DeadlineExceeded). sandbox.Errorf is a printf wrapper that go vet
// checks against fmt.Sprintf, which rejects %w; this keeps vet clean.
type kindError struct {
	typed error // made by sandbox.Errorf; its text already includes the cause
	cause error
}

func (e *kindError) Error() string   { return e.typed.Error() }
func (e *kindError) Unwrap() []error { return []error{e.typed, e.cause} }

// wrapKind returns "<Kind>: <what>: <cause>" wrapping kind and cause.
func wrapKind(kind *sandbox.Kind, what string, cause error) error {
	return &kindError{typed: sandbox.Errorf(kind, "%s: %v", what, cause), cause: cause}
}

// fsError classifies a filesystem error: ENOSPC/EDQUOT → ErrInsufficientDisk,
// anything else → ErrRepoCacheUnavailable. The cause stays reachable with errors.Is.
func fsError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return wrapKind(sandbox.ErrInsufficientDisk, what, err)
	}
	return wrapKind(sandbox.ErrRepoCacheUnavailable, what, err)
}
