package local

import (
	"context"

	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Runtime is one local runtime (docs/DESIGN.md "Ports"): a
// workdir on the host in which commands run as subprocesses. States: running (after Create or Start), stopped (after Stop;
// Exec restarts it), missing (after Destroy). It is safe for concurrent use;
// concurrent Execs run in parallel.
type Runtime struct {
	p *Provider
	// life holds the state, the spec and the running commands; its Root is
	// the symlink-free absolute host path of the workdir.
	life *procexec.Lifecycle[struct{}]
	ps   procState
	// Processes (sandbox.ProcessRuntime): background processes kept by a
	// supervisor process on the host, outside the worker's process tree
	// (durable across a worker restart; not isolated).
	supervisor.Processes
}

var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.ProcessRuntime = (*Runtime)(nil)
)

// ID returns the runtime id (RuntimeSpec.ID).
func (r *Runtime) ID() string { return r.life.ID() }

// State returns running or stopped, or sandbox.RuntimeMissing once destroyed.
// It never fails.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	return r.life.State(), nil
}

// Start marks the runtime running. Errors wrap sandboxapi.ErrNotFound once the
// runtime is destroyed, and sandboxapi.ErrRuntimeUnavailable when the workdir
// no longer exists (e.g. the workspace was evicted).
func (r *Runtime) Start(ctx context.Context) error {
	return r.life.Start(r.ready)
}

// ready is the local part of starting: the workdir is still where it was.
func (r *Runtime) ready(struct{}) error {
	root := r.life.Root()
	if real, err := runspec.ResolveDir(root); err != nil || real != root {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.ID(), root)
	}
	return nil
}

// Stop hibernates the runtime: it becomes stopped and every command still
// running in it is killed (its whole process group), and so is every
// background process (exit reason runtime_stopped; they stay readable);
// Stop waits for them to be reaped, bounded by ctx (an expired ctx returns an error wrapping
// sandboxapi.ErrTimeout). The workdir is untouched. Stopping a destroyed runtime
// is success.
func (r *Runtime) Stop(ctx context.Context) error {
	err := r.life.Stop(ctx)
	r.stopProcesses(ctx, false)
	return err
}

// Exec runs one command and returns its result (see ExecStream).
func (r *Runtime) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// ExecStream (docs/DESIGN.md "Ports": exec / exec_stream; DESIGN.md
// "Non-negotiables: Exec"; docs/DESIGN.md "Rules" for the environment) runs
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
// Errors: sandboxapi.ErrInvalidArgument for a bad request (runspec.ValidateExec,
// a cwd that is missing, not a directory or resolves outside the workdir,
// an argv+env too large) — nothing runs then; sandboxapi.ErrNotFound after
// Destroy; sandboxapi.ErrRuntimeUnavailable when the workdir is gone or the
// process cannot be started, or when ctx is cancelled (wrapping
// context.Canceled); sandboxapi.ErrTimeout when ctx's deadline passes first
// (wrapping context.DeadlineExceeded). On ctx expiry the process group is
// killed and the partial result is returned along with the error.
func (r *Runtime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	if err := runspec.ValidateExec(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	return r.life.Exec(ctx, r.ready, func(killCtx context.Context, spec sandbox.RuntimeSpec, _ struct{}) (sandboxapi.ExecResult, error) {
		if _, err := procexec.CommandNetwork("exec", procexec.RuntimeNetwork(spec), req.Network); err != nil {
			return sandboxapi.ExecResult{}, err
		}
		root := r.life.Root()
		env := procexec.EnvList(procexec.BaseEnv(root), r.p.baseEnv, spec.Env, req.Env)
		dir, _, err := procexec.ResolveCwd(root, req.Cwd)
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		res, err := runProcess(killCtx, ctx, proc{dir: dir, argv: req.Cmd, env: env, req: req}, onChunk)
		r.p.log.Debug("exec", "id", r.ID(), "cmd", req.Cmd[0], "exit_code", res.ExitCode, "timed_out", res.TimedOut,
			"duration_ms", res.DurationMS, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "err", err)
		return res, err
	})
}
