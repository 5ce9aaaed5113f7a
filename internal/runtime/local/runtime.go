package local

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// errHalted is the cancellation cause given to a command's context when its
// runtime is stopped or destroyed.
var errHalted = errors.New("runtime stopped")

// Runtime is one local runtime (seed "Runtime Port: SandboxRuntime"): a
// workdir on the host in which commands run as subprocesses. States: running (after Create or Start), stopped (after Stop;
// Exec restarts it), missing (after Destroy). It is safe for concurrent use;
// concurrent Execs run in parallel.
type Runtime struct {
	p  *Provider
	id string

	// root is the symlink-free absolute host path of the workdir; immutable.
	root string

	mu        sync.Mutex
	spec      sandbox.RuntimeSpec
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
	if real, err := checkDir(r.root); err != nil || real != r.root {
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.id, r.root)
	}
	r.state = sandbox.RuntimeRunning
	return nil
}

// Stop hibernates the runtime: it becomes stopped and every command still
// running in it is killed (its whole process group); Stop waits for them to
// be reaped, bounded by ctx (an expired ctx returns an error wrapping
// sandbox.ErrTimeout). The workdir is untouched. Stopping a destroyed runtime
// is success.
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
// "Non-negotiables: Exec"; seed "Security Rules" for the environment) runs
// req.Cmd (an argv, no shell) as a subprocess in the workdir
// (or req.Cwd below it) and returns when it has finished, handing each piece
// of output to onChunk (when non-nil) as it arrives; onChunk calls are
// serialized and receive data they may keep. A stopped runtime is started first.
//
// The environment is exactly PATH, HOME (the workdir), LANG=C.UTF-8,
// TERM=dumb, then Options.BaseEnv, RuntimeSpec.Env and req.Env (later wins);
// the worker's own environment is never passed. Stdin is /dev/null unless
// req.Stdin is non-nil. Stdout and stderr are each capped at req.OutputCap()
// bytes (head and tail kept, see output.Capped) with the full counts in
// StdoutBytes/StderrBytes.
//
// Outcomes that are results, not errors: a non-zero exit; 127 when the
// executable is not found (message on stderr); 126 when it cannot be
// executed; 128+n when killed by signal n (137 when Stop or Destroy killed
// it); 124 with TimedOut after req.Timeout() (the process group is killed).
//
// Errors: sandbox.ErrInvalidArgument for a bad request (ValidateExecRequest,
// a cwd that is missing, not a directory or resolves outside the workdir,
// an argv+env too large) — nothing runs then; sandbox.ErrNotFound after
// Destroy; sandbox.ErrRuntimeUnavailable when the workdir is gone or the
// process cannot be started, or when ctx is cancelled (wrapping
// context.Canceled); sandbox.ErrTimeout when ctx's deadline passes first
// (wrapping context.DeadlineExceeded). On ctx expiry the process group is
// killed and the partial result is returned along with the error.
func (r *Runtime) ExecStream(ctx context.Context, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	if err := ValidateExecRequest(req); err != nil {
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
	env := buildEnv(r.root, r.p.baseEnv, r.spec.Env, req.Env)
	r.running[h] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, h)
		r.mu.Unlock()
	}()
	dir, err := resolveCwd(r.root, req.Cwd)
	if err != nil {
		return sandbox.ExecResult{}, err
	}

	res, err := runProcess(killCtx, ctx, proc{dir: dir, argv: req.Cmd, env: env, req: req}, onChunk)
	r.p.log.Debug("exec", "id", r.id, "cmd", req.Cmd[0], "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"duration_ms", res.DurationMS, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "err", err)
	return res, err
}

// resolveCwd returns the symlink-free directory for the workdir-relative cwd,
// refusing one that is missing, not a directory or outside root
// (sandbox.ErrInvalidArgument).
func resolveCwd(root, cwd string) (string, error) {
	clean, err := sandbox.CleanRelPath(cwd)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd: %s", sandbox.Message(err))
	}
	real, err := checkDir(filepath.Join(root, filepath.FromSlash(clean)))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // do not echo the host path
		}
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd %q: %v", clip(cwd), err)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: cwd %q resolves outside the workdir", clip(cwd))
	}
	return real, nil
}
