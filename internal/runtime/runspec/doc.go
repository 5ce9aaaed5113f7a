// Package runspec holds the checks every runtime adapter applies to what it
// is given, before anything runs (docs/DESIGN.md "Rules" 3 and 7): an
// ExecRequest (argv, cwd, environment, timeout, output cap, stdin, network),
// the environment of a RuntimeSpec, and the mounts of a RuntimeSpec resolved
// on the host (absolute sources, no two mounts on one target, exactly one
// mount on the workdir, symlink-free sources). The rules are the
// backend-independent half of an adapter's validation; each adapter adds its
// own (its mount targets, its images, its resource limits).
//
// Every error wraps sandboxapi.ErrInvalidArgument (docs/API.md "Errors") and
// never echoes a host path's lookup error beyond its cause.
package runspec
