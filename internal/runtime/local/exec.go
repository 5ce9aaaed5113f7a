package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BasePath is the PATH every command starts with (RuntimeSpec.Env or
// ExecRequest.Env may replace it).
const BasePath = procexec.BasePath

// DrainGrace bounds how long an exec call waits, after its process group has
// been killed, for output pipes still held by processes that left the group;
// then the pipes are closed and the call returns. It is also the exec.Cmd
// WaitDelay.
const DrainGrace = procexec.DrainGrace

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath resolves argv[0] like execvp against the command's own PATH (never
// the worker's): a name containing '/' is taken relative to dir; otherwise the
// first regular file with an execute bit in a PATH entry (relative entries
// are relative to dir). ok is false when nothing was found.
func lookPath(name, pathEnv, dir string) (string, bool) {
	if strings.Contains(name, "/") {
		if filepath.IsAbs(name) {
			return name, true
		}
		return filepath.Join(dir, name), true
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// proc is one validated command ready to run.
type proc struct {
	dir  string // symlink-free working directory
	argv []string
	env  []string
	req  sandboxapi.ExecRequest
}

// runProcess runs pr under killCtx (from procexec.Lifecycle.Exec, derived
// from callerCtx) and classifies the outcome (see procexec.Run); argv[0] is
// looked up in the command's own PATH, and a failure to execute it is a 127
// or 126 result with a message on stderr.
func runProcess(killCtx, callerCtx context.Context, pr proc, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	out := procexec.NewOutput(pr.req.OutputCap(), onChunk)
	name := pr.argv[0]
	path, ok := lookPath(name, envValue(pr.env, "PATH"), pr.dir)
	if !ok {
		return out.Notice(127, name, "command not found"), nil
	}
	return procexec.Run(killCtx, callerCtx, out, procexec.Command{
		Name:                  name,
		Path:                  path,
		Args:                  pr.argv,
		Dir:                   pr.dir,
		Env:                   pr.env,
		Stdin:                 pr.req.Stdin,
		Timeout:               pr.req.Timeout(),
		NoticeHaltBeforeStart: true,
		StartFailed: func(err error) (sandboxapi.ExecResult, error) {
			switch {
			case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
				return out.Notice(127, name, "no such file or directory"), nil
			case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
				return out.Notice(126, name, "cannot execute: "+errnoText(err)), nil
			case errors.Is(err, syscall.E2BIG):
				return sandboxapi.ExecResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: argument list and environment too long")
			}
			return sandboxapi.ExecResult{}, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "exec %s: start", name)
		},
	})
}

func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
