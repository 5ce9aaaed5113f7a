package repocache

import (
	"errors"
	"syscall"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// wrapKind returns "<Kind>: <what>: <cause>" wrapping kind and cause.
func wrapKind(kind *sandboxapi.Kind, what string, cause error) error {
	return sandboxapi.Wrap(kind, cause, "%s", what)
}

// fsError classifies a filesystem error: ENOSPC/EDQUOT → ErrInsufficientDisk,
// anything else → ErrRepoCacheUnavailable. The cause stays reachable with errors.Is.
func fsError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return wrapKind(sandboxapi.ErrInsufficientDisk, what, err)
	}
	return wrapKind(sandboxapi.ErrRepoCacheUnavailable, what, err)
}
