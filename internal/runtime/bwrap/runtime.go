package bwrap

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// errHalted is the cancellation cause given to a command's context when its
// runtime is stopped or destroyed.
var errHalted = errors.New("runtime stopped")

// Runtime is one bubblewrap runtime (seed "Runtime Port: SandboxRuntime"): a
// sandbox layout over a workspace in which every command gets a fresh
// sandbox. States: running (after Create or Start), stopped (after Stop; Exec
// restarts it), missing (after Destroy). It is safe for concurrent use;
// concurrent Execs run in parallel.
type Runtime struct {
	p  *Provider
	id string

	mu        sync.Mutex
	spec      sandbox.RuntimeSpec
	cfg       sandboxConfig
	state     sandbox.RuntimeState
	destroyed bool
	running   map[*execHandle]struct{}
}

var _ sandbox.Runtime = (*Runtime)(nil)

// execHandle lets Stop and Destroy kill a running command and wait for it.
type execHandle struct {
	kill func(cause error)
	done chan struct{}
}

// ID returns the runtime id (RuntimeSpec.ID).
func (r *Runtime) ID() string { return r.id }

// State returns running or stopped, or sandbox.RuntimeMissing once destroyed.
// It never fails.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.destroyed {
		return sandbox.RuntimeMissing, nil
	}
	return r.state, nil
}

// Start marks the runtime running. Errors wrap sandbox.ErrNotFound once the
// runtime is destroyed, and sandbox.ErrRuntimeUnavailable when the workdir
// no longer exists (e.g. the workspace was evicted).
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startLocked()
}

func (r *Runtime) startLocked() error {
	if r.destroyed {
		return sandbox.Errorf(sandbox.ErrNotFound, "runtime %s was destroyed", r.id)
	}
	if real, err := filepath.EvalSymlinks(r.cfg.root); err != nil || real != r.cfg.root {
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.id, r.cfg.root)
	}
	if err := r.p.makeScratch(r.cfg); err != nil {
		return err
	}
	r.state = sandbox.RuntimeRunning
	return nil
}

// Stop hibernates the runtime: it becomes stopped and every command still
// running in it is killed (its whole sandbox); Stop waits for them, bounded
// by ctx (an expired ctx returns an error wrapping sandbox.ErrTimeout). The
// workdir and the scratch /tmp are untouched. Stopping a destroyed runtime is
// success.
func (r *Runtime) Stop(ctx context.Context) error {
	return r.halt(ctx, false)
}

func (r *Runtime) halt(ctx context.Context, destroy bool) error {
	r.mu.Lock()
	if destroy {
		r.destroyed = true
	}
	r.state = sandbox.RuntimeStopped
	handles := make([]*execHandle, 0, len(r.running))
	for h := range r.running {
		handles = append(handles, h)
	}
	r.mu.Unlock()
	for _, h := range handles {
		h.kill(errHalted)
	}
	for _, h := range handles {
		select {
		case <-h.done:
		case <-ctx.Done():
			return wrapErr(sandbox.ErrTimeout, ctx.Err(), "runtime %s: waiting for commands to die", r.id)
		}
	}
	return nil
}

// Exec runs one command and returns its result (see ExecStream).
func (r *Runtime) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// ExecStream (seed "Runtime Port": exec / exec_stream; DESIGN.md
// "Non-negotiables: Exec"; seed "Security Rules") runs req.Cmd (an argv, no
// shell implied) in a fresh sandbox (see the package documentation), in the
// workdir or req.Cwd below it, and returns when it has finished, handing
// each piece of output to onChunk (when non-nil) as it arrives; onChunk calls
// are serialized and receive data they may keep. A stopped runtime is
// started first.
//
// The environment is exactly PATH=BasePath, HOME=Home, LANG=C.UTF-8,
// TERM=dumb, then Options.BaseEnv, RuntimeSpec.Env and req.Env (later wins).
// Stdin is /dev/null unless req.Stdin is non-nil. Stdout and stderr are each
// capped at req.OutputCap() bytes (head and tail kept, see output.Capped)
// with the full counts in StdoutBytes/StderrBytes.
//
// Outcomes that are results, not errors: a non-zero exit; 127 when the
// executable is not found and 126 when it cannot be executed (sh's message on
// stderr); 128+n when killed by signal n (137 when Stop or Destroy killed
// it); 124 with TimedOut after req.Timeout(). The sandbox, and so every
// process the command started, dies when the command exits, times out or is
// killed.
//
// Errors: sandbox.ErrInvalidArgument for a bad request
// (local.ValidateExecRequest; a cwd that is missing, not a directory or
// resolves outside the workdir) — nothing runs then; sandbox.ErrNotFound after
// Destroy; sandbox.ErrRuntimeUnavailable when the workdir is gone, bwrap
// cannot build the sandbox (its message included), or ctx is cancelled
// (wrapping context.Canceled); sandbox.ErrTimeout when ctx's deadline passes
// first (wrapping context.DeadlineExceeded). On ctx expiry the sandbox is
// killed and the partial result is returned along with the error.
func (r *Runtime) ExecStream(ctx context.Context, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	if err := local.ValidateExecRequest(req); err != nil {
		return sandbox.ExecResult{}, err
	}
	killCtx, kill := context.WithCancelCause(ctx)
	defer kill(nil)
	h := &execHandle{kill: kill, done: make(chan struct{})}
	defer close(h.done)
	r.mu.Lock()
	if err := r.startLocked(); err != nil {
		r.mu.Unlock()
		return sandbox.ExecResult{}, err
	}
	cfg, spec := r.cfg, r.spec
	r.running[h] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, h)
		r.mu.Unlock()
	}()
	cwd, err := resolveCwd(cfg, req.Cwd)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	cfg.cwd = cwd
	env := envList(map[string]string{"PATH": BasePath, "HOME": Home, "LANG": "C.UTF-8", "TERM": "dumb"}, r.p.baseEnv, spec.Env, req.Env)
	res, err := r.p.run(killCtx, ctx, cfg, env, req, onChunk)
	r.p.log.Debug("exec", "id", r.id, "cmd", req.Cmd[0], "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"duration_ms", res.DurationMS, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "err", err)
	return res, err
}

// resolveCwd maps a workdir-relative cwd onto the sandbox path, refusing one
// that is missing, not a directory or resolves (through symlinks, checked on
// the host) outside the workdir: sandbox.ErrInvalidArgument.
func resolveCwd(cfg sandboxConfig, rel string) (string, error) {
	clean, err := sandbox.CleanRelPath(rel)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd: %s", sandbox.Message(err))
	}
	real, err := filepath.EvalSymlinks(filepath.Join(cfg.root, filepath.FromSlash(clean)))
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
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd %q: %v", clip(rel), err)
	}
	relp, err := filepath.Rel(cfg.root, real)
	if err != nil || relp == ".." || strings.HasPrefix(relp, ".."+string(filepath.Separator)) {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd %q resolves outside the workdir", clip(rel))
	}
	return path.Join(cfg.workdir, filepath.ToSlash(relp)), nil
}
