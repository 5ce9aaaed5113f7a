package runspec

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TargetRule is what a runtime accepts as a path inside its sandbox
// (RuntimeSpec.Workdir and every Mount.Target): Allowed decides, Want says
// it in an error message ("an absolute clean path other than /").
type TargetRule struct {
	Allowed func(target string) bool
	Want    string
}

// BelowRoot accepts an absolute clean path other than "/" (Docker: any
// directory of the container's file system but its root).
var BelowRoot = TargetRule{
	Allowed: func(t string) bool { return AbsClean(t) && t != "/" },
	Want:    "an absolute clean path below /",
}

// OutsideSystem accepts an absolute clean path other than "/", "/tmp" and
// anything at or below /proc and /dev (bubblewrap: those are the sandbox's
// own private mounts, docs/SECURITY.md "What each runtime isolates").
var OutsideSystem = TargetRule{
	Allowed: func(t string) bool {
		if !AbsClean(t) {
			return false
		}
		switch t {
		case "/", "/tmp", "/proc", "/dev":
			return false
		}
		return !strings.HasPrefix(t, "/proc/") && !strings.HasPrefix(t, "/dev/")
	},
	Want: "an absolute clean path outside /, /tmp, /proc and /dev",
}

// AbsClean reports whether p is an absolute slash-separated path equal to
// its path.Clean form (no "..", ".", doubled or trailing slashes).
func AbsClean(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// Bind is one mount of a RuntimeSpec resolved on the host.
type Bind struct {
	// Source is the symlink-free host path of Mount.Source.
	Source string
	// Target is Mount.Target, except that a mount whose target is its own
	// (cleaned) source keeps the host's layout: the target is then Source
	// too, so paths a tool recorded on the host resolve inside as well.
	Target   string
	Writable bool
	// Shared is Mount.Shared.
	Shared bool
}

// Mounts is a RuntimeSpec's resolved mount set.
type Mounts struct {
	// Root is the symlink-free host path of the workdir mount's source.
	Root string
	// Owner is Root's owner, nil when the file system does not say.
	Owner *syscall.Stat_t
	// Binds are every mount, in the spec's order.
	Binds []Bind
}

// CheckWorkdir checks spec.Workdir against rule. The error wraps
// sandboxapi.ErrInvalidArgument: "runtime <id>: workdir "<w>" is not <rule.Want>".
func CheckWorkdir(spec sandbox.RuntimeSpec, rule TargetRule) error {
	if !rule.Allowed(spec.Workdir) {
		return specError(spec, "workdir %q is not %s", spec.Workdir, rule.Want)
	}
	return nil
}

// ResolveMounts resolves every mount of spec for a runtime that binds them
// (bwrap, Docker): each source absolute, existing, its symlinks resolved;
// each target allowed by rule and used once; exactly one mount on
// spec.Workdir, whose source is a directory. spec.Workdir itself is checked
// by CheckWorkdir. Errors wrap sandboxapi.ErrInvalidArgument and name the
// runtime and the mount, with a lookup failure's cause but not its host path.
func ResolveMounts(spec sandbox.RuntimeSpec, rule TargetRule) (Mounts, error) {
	var out Mounts
	targets := map[string]bool{}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !rule.Allowed(m.Target) {
			return Mounts{}, specError(spec, "mount %q → %q: the source must be absolute and the target %s", m.Source, m.Target, rule.Want)
		}
		if targets[m.Target] {
			return Mounts{}, specError(spec, "two mounts on %q", m.Target)
		}
		targets[m.Target] = true
		real, fi, err := resolveSource(m.Source)
		if err != nil {
			return Mounts{}, specError(spec, "mount source %q: %v", m.Source, ErrText(err))
		}
		target := m.Target
		if m.Target == filepath.Clean(m.Source) {
			target = real
		}
		if m.Target == spec.Workdir {
			if !fi.IsDir() {
				return Mounts{}, specError(spec, "workdir mount source %q is not a directory", m.Source)
			}
			out.Root = real
			out.Owner, _ = fi.Sys().(*syscall.Stat_t)
		}
		out.Binds = append(out.Binds, Bind{Source: real, Target: target, Writable: m.Writable, Shared: m.Shared})
	}
	if out.Root == "" {
		return Mounts{}, specError(spec, "need exactly one mount with target %q (the workdir)", spec.Workdir)
	}
	return out, nil
}

// ResolveWorkdir finds the workdir mount of spec for a runtime that binds
// nothing (local: commands run in the host directory itself, other mounts
// are ignored): spec.Workdir non-empty, exactly one mount on it, its source
// an absolute path to an existing directory. It returns the source's
// symlink-free path and the mount. Errors wrap sandboxapi.ErrInvalidArgument.
func ResolveWorkdir(spec sandbox.RuntimeSpec) (string, sandbox.Mount, error) {
	if spec.Workdir == "" {
		return "", sandbox.Mount{}, specError(spec, "workdir is empty")
	}
	var found []sandbox.Mount
	for _, m := range spec.Mounts {
		if m.Target == spec.Workdir {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return "", sandbox.Mount{}, specError(spec, "need exactly one mount with target %q, found %d", spec.Workdir, len(found))
	}
	m := found[0]
	if !filepath.IsAbs(m.Source) {
		return "", sandbox.Mount{}, specError(spec, "workdir mount source %q is not absolute", m.Source)
	}
	real, err := ResolveDir(m.Source)
	if err != nil {
		return "", sandbox.Mount{}, specError(spec, "workdir mount source: %v", err)
	}
	return real, m, nil
}

// resolveSource returns the symlink-free path of a mount source and what it is.
func resolveSource(src string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	return real, fi, nil
}

// ResolveDir returns the symlink-free path of dir, failing with a
// *fs.PathError when it is missing or not a directory (a runtime's Start
// compares it with the root it resolved at Create: a moved or vanished
// workdir is no longer that runtime's).
func ResolveDir(dir string) (string, error) {
	real, fi, err := resolveSource(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &fs.PathError{Op: "stat", Path: dir, Err: errors.New("not a directory")}
	}
	return real, nil
}

// ErrText is err's text without the host path of a *fs.PathError (its
// cause only: "no such file or directory").
func ErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// specError is an ErrInvalidArgument naming the runtime of spec.
func specError(spec sandbox.RuntimeSpec, format string, args ...any) error {
	return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "runtime %s: "+format, append([]any{clip(spec.ID)}, args...)...)
}
