package procexec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ResolveCwd resolves an ExecRequest's workdir-relative cwd against root, the
// symlink-free host path of the workdir: dir is the symlink-free host
// directory and rel its path below root, slash-separated ("." for root
// itself), for a backend that maps it into its own file system. A cwd that
// is malformed, missing, not a directory, goes through an absolute symlink
// (even one pointing back inside: os.Root refuses them), or resolves (through symlinks,
// checked inside an os.Root first, so nothing outside root is looked at)
// outside root is an error wrapping sandboxapi.ErrInvalidArgument whose message
// never contains a host path nor tells what lies outside; a root that cannot
// be opened is sandboxapi.ErrRuntimeUnavailable.
func ResolveCwd(root, cwd string) (dir, rel string, err error) {
	clean, err := sandboxapi.CleanRelPath(cwd)
	if err != nil {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd: %s", sandboxapi.Message(err))
	}
	// First inside an os.Root, which refuses to follow a link out of root
	// without touching what lies outside: whether an outside path exists or
	// is a directory must not be observable (the sandbox hides it).
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "exec: workdir: %v", errors.Unwrap(err))
	}
	fi, err := r.Stat(clean)
	_ = r.Close()
	if err != nil {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd %q cannot be resolved inside the workdir (missing, or through a link that leaves it or is absolute)", clip(cwd))
	}
	if !fi.IsDir() {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd %q: not a directory", clip(cwd))
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(clean)))
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(real); err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // do not echo the host path
		}
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd %q: %v", clip(cwd), err)
	}
	relp, err := filepath.Rel(root, real)
	if err != nil || relp == ".." || strings.HasPrefix(relp, ".."+string(filepath.Separator)) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd %q resolves outside the workdir", clip(cwd))
	}
	return real, filepath.ToSlash(relp), nil
}
