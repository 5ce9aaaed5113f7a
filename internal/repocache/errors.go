package repocache

import (
	"errors"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// wrapKind returns "<Kind>: <what>: <cause>" wrapping kind and cause.
func wrapKind(kind *sandbox.Kind, what string, cause error) error {
	return sandbox.Wrap(kind, cause, "%s", what)
}

// fsError classifies a filesystem error: ENOSPC/EDQUOT → ErrInsufficientDisk,
// anything else → ErrRepoCacheUnavailable. The cause stays reachable with errors.Is.
func fsError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return wrapKind(sandbox.ErrInsufficientDisk, what, err)
	}
	return wrapKind(sandbox.ErrRepoCacheUnavailable, what, err)
}
