package bwrap

import (
	"context"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/diskquota"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Runtime is one bubblewrap runtime (docs/DESIGN.md "The three things"):
// long-lived sandboxes over a workspace, one per network mode its commands
// use (built when a command first asks for it), whose supervisors spawn
// every command (see the package documentation). States: running (after
// Create or Start), stopped (after Stop; Exec restarts it), missing (after
// Destroy). It is safe for concurrent use; concurrent Execs run in
// parallel. It implements sandbox.ProcessRuntime (durable background
// processes).
type Runtime struct {
	p *Provider
	// life holds the state, the spec with its sandbox layout, and the
	// running commands.
	life *procexec.Lifecycle[sandboxConfig]

	mu      sync.Mutex                          // guards sbs, disk, diskStop; taken after life's lock, never before
	sbs     map[sandboxapi.Network]*sandboxProc // the running sandboxes by network mode
	archive *supervisor.Archive
	// disk measures the runtime's disk use while a sandbox runs (quota.go);
	// diskStop ends it; diskKills counts the times the quota killed the
	// commands.
	disk      *diskquota.Watcher
	diskStop  context.CancelFunc
	diskKills atomic.Int64
	// notes: each exec process's start, for its notice (ExecNotice).
	notes procexec.Notes[execNote]
	supervisor.Processes
}

var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.ProcessRuntime = (*Runtime)(nil)
	_ sandbox.ExecNotices    = (*Runtime)(nil)
)

func newRuntime(p *Provider, life *procexec.Lifecycle[sandboxConfig]) *Runtime {
	r := &Runtime{p: p, life: life, archive: supervisor.LoadArchive(p.ctlPath(life.ID(), ".archive")), sbs: map[sandboxapi.Network]*sandboxProc{}}
	r.Processes = supervisor.Processes{
		Support:  sandboxapi.ProcessSupport{Durable: true, PTY: true, MaxProcesses: sandboxapi.MaxProcesses, BufferBytes: sandboxapi.ProcessBufferBytes},
		Client:   r.client,
		Prepare:  r.prepare,
		Networks: sandboxapi.NetworkModes,
		Archive:  r.archive,
	}
	return r
}

// ID returns the runtime id (RuntimeSpec.ID).
func (r *Runtime) ID() string { return r.life.ID() }

// State returns running or stopped, or sandbox.RuntimeMissing once destroyed.
// It never fails.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	return r.life.State(), nil
}

// Start marks the runtime running and builds its sandbox. Errors wrap
// sandboxapi.ErrNotFound once the runtime is destroyed, and
// sandboxapi.ErrRuntimeUnavailable when the workdir no longer exists (e.g. the
// workspace was evicted) or the sandbox cannot be built.
func (r *Runtime) Start(ctx context.Context) error {
	return r.life.Start(r.ready)
}

// ready is the bubblewrap part of starting (run with the runtime's state
// locked): the workdir is still where it was, the scratch /tmp exists, and
// the sandbox of the runtime's own network runs with the current layout.
func (r *Runtime) ready(cfg sandboxConfig) error {
	if real, err := filepath.EvalSymlinks(cfg.root); err != nil || real != cfg.root {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.ID(), cfg.root)
	}
	if err := r.p.makeScratch(context.Background(), cfg); err != nil {
		return err
	}
	_, err := r.ensure(context.Background(), cfg, cfg.network)
	return err
}

// ensure returns the running sandbox of network mode for cfg's layout,
// building it when needed. Sandboxes of another base layout are all ended
// first (they are rebuilt as used), and so are those of a mode above cfg's
// network (the policy was narrowed).
func (r *Runtime) ensure(ctx context.Context, cfg sandboxConfig, mode sandboxapi.Network) (*sandboxProc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trimLocked(ctx, cfg)
	if !mode.Within(cfg.network) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "runtime %s: network %s is above its network policy (%s)", r.ID(), mode, cfg.network)
	}
	layout := r.p.layoutOf(cfg, mode)
	if sb := r.sbs[mode]; sb != nil {
		if sb.layout == layout && sb.alive() {
			return sb, nil
		}
		r.p.shutdown(ctx, r.ID(), mode, sb, r.archive)
		delete(r.sbs, mode)
	}
	var shared *cgroup
	for _, sb := range r.sbs {
		if sb.cg != nil {
			shared = sb.cg
		}
	}
	if shared == nil && len(r.sbs) > 0 {
		shared = r.p.cgroups.existing(r.ID()) // another sandbox lives in it
	}
	sb, err := r.p.startSandbox(ctx, r.ID(), cfg, mode, shared)
	if err != nil {
		r.unwatchDiskLocked()
		return nil, err
	}
	r.sbs[mode] = sb
	r.watchDiskLocked(cfg)
	return sb, nil
}

// trimLocked ends the sandboxes cfg no longer allows: another base layout,
// a mode above its network, or dead.
func (r *Runtime) trimLocked(ctx context.Context, cfg sandboxConfig) {
	for m, sb := range r.sbs {
		if sb.base != cfg.base || !m.Within(cfg.network) {
			r.p.log.Info("ending a runtime sandbox its spec no longer allows", "id", r.ID(), "network", m)
			r.p.shutdown(ctx, r.ID(), m, sb, r.archive)
			delete(r.sbs, m)
		} else if !sb.alive() {
			sb.client.Close()
			delete(r.sbs, m)
		}
	}
	r.unwatchDiskLocked()
}

// discard forgets sb when it is still the current sandbox of its mode (it died).
func (r *Runtime) discard(sb *sandboxProc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sbs[sb.mode] == sb {
		sb.client.Close()
		delete(r.sbs, sb.mode)
	}
	r.unwatchDiskLocked()
}

// warm (Create) ends the sandboxes the spec no longer allows, serves the
// egress endpoint of a runtime allowed the limited network (so that a
// limited sandbox left by an earlier worker reaches the proxy again, with
// the current allow-list), and builds the sandbox of the runtime's own
// network when it runs and has none; failures are logged, the next command
// reports them.
func (r *Runtime) warm(ctx context.Context) {
	cfg := r.life.Conf()
	r.mu.Lock()
	r.trimLocked(ctx, cfg)
	r.watchDiskLocked(cfg) // sandboxes an earlier worker left
	r.mu.Unlock()
	if r.p.egress != nil {
		if sandboxapi.NetworkLimited.Within(cfg.network) {
			// The endpoints of every mode the policy allows (limited, and
			// default's when allowed), the others' stopped.
			r.p.detachEgress(r.ID(), cfg.network)
			for _, m := range []sandboxapi.Network{sandboxapi.NetworkLimited, sandboxapi.NetworkDefault} {
				if m.Within(cfg.network) {
					if err := r.p.attachEgress(r.ID(), cfg, m); err != nil {
						r.p.log.Warn("runtime egress endpoint not served", "id", r.ID(), "network", m, "error", err)
					}
				}
			}
		} else {
			r.p.detachEgress(r.ID(), "")
		}
	}
	if r.life.State() != sandbox.RuntimeRunning {
		return
	}
	if _, err := r.ensure(ctx, cfg, cfg.network); err != nil {
		r.p.log.Warn("runtime sandbox not built yet", "id", r.ID(), "error", err)
	}
}

// Stop hibernates the runtime: it becomes stopped, every command still
// running in it and every background process is killed (background
// processes end with exit reason runtime_stopped and stay readable), and
// the sandbox ends; Stop waits for them, bounded by ctx (an expired ctx
// returns an error wrapping sandboxapi.ErrTimeout). The workdir and the
// scratch /tmp are untouched. Stopping a destroyed runtime is success.
func (r *Runtime) Stop(ctx context.Context) error {
	err := r.life.Stop(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	for m, sb := range r.sbs {
		r.p.shutdown(ctx, r.ID(), m, sb, r.archive)
		delete(r.sbs, m)
	}
	r.unwatchDiskLocked()
	return err
}

// destroySandbox ends the sandboxes without archiving (Destroy).
func (r *Runtime) destroySandbox(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m, sb := range r.sbs {
		r.p.shutdown(ctx, r.ID(), m, sb, nil)
		delete(r.sbs, m)
	}
	r.unwatchDiskLocked()
	if cg := r.p.cgroups.existing(r.ID()); cg != nil {
		_ = cg.remove()
	}
	r.archive.Clear()
}

// client is supervisor.Processes.Client: the client of the running sandbox
// of network mode ("": the runtime's own), starting the runtime and
// building that sandbox first when start.
func (r *Runtime) client(ctx context.Context, start bool, mode sandboxapi.Network) (*supervisor.Client, error) {
	if start {
		if err := r.life.Start(r.ready); err != nil {
			return nil, err
		}
	} else if st := r.life.State(); st == sandbox.RuntimeMissing {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s was destroyed", r.ID())
	}
	cfg := r.life.Conf()
	if mode == "" {
		mode = cfg.network
	}
	r.mu.Lock()
	sb := r.sbs[mode]
	r.mu.Unlock()
	if start && (sb == nil || !sb.alive()) {
		return r.clientOf(r.ensure(ctx, cfg, mode))
	}
	if sb == nil || !sb.alive() {
		return nil, nil
	}
	if start && sb.done == nil {
		// A reattached sandbox may have ended since (idle, killed): check
		// before starting a process there, and build a new one if so.
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := sb.client.Hello(hctx)
		cancel()
		if supervisor.IsUnreachable(err) {
			r.discard(sb)
			return r.clientOf(r.ensure(ctx, cfg, mode))
		}
	}
	return sb.client, nil
}

func (r *Runtime) clientOf(sb *sandboxProc, err error) (*supervisor.Client, error) {
	if err != nil {
		return nil, err
	}
	return sb.client, nil
}

// prepare is supervisor.Processes.Prepare: the environment, cwd and network
// of a background process, as for a command.
func (r *Runtime) prepare(spec sandbox.ProcessSpec) (supervisor.Spec, sandboxapi.Network, error) {
	cfg := r.life.Conf()
	mode, err := procexec.CommandNetwork("process_start", cfg.network, spec.Network)
	if err != nil {
		return supervisor.Spec{}, "", err
	}
	_, rel, err := procexec.ResolveCwd(cfg.root, spec.Cwd)
	if err != nil {
		return supervisor.Spec{}, "", err
	}
	extra := map[string]string{}
	if spec.PTY != nil {
		extra["TERM"] = "xterm-256color"
	}
	s := supervisor.Spec{
		Argv: spec.Cmd, Env: procexec.EnvList(procexec.BaseEnv(Home), r.networkEnv(cfg, mode), r.p.baseEnv, r.spec().Env, extra, spec.Env),
		Dir: path.Join(cfg.workdir, rel), Tag: spec.Tag, OpenStdin: spec.Stdin,
	}
	if spec.PTY != nil {
		s.PTY, s.Rows, s.Cols = true, uint16(spec.PTY.Rows), uint16(spec.PTY.Cols)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.NoFileGrowth = r.fileGrowthBlocked(ctx, cfg)
	if spec.Exec && spec.ID != "" {
		r.notes.Put(spec.ID, r.startNote(cfg, mode, s.NoFileGrowth))
	}
	return s, mode, nil
}

// networkEnv is what a command of network mode gets in its environment:
// in the limited and default networks, the proxy variables ordinary tools
// read (ProxyEnv); nothing otherwise.
func (r *Runtime) networkEnv(cfg sandboxConfig, mode sandboxapi.Network) map[string]string {
	if cfg.egressDirOf(mode) != "" {
		return procexec.ProxyEnv(supervisor.EgressListen)
	}
	return nil
}

// spec returns the runtime's current spec.
func (r *Runtime) spec() sandbox.RuntimeSpec { return r.life.Spec() }

// Exec runs one command and returns its result (see ExecStream).
func (r *Runtime) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// ExecStream (docs/DESIGN.md "Ports": exec / exec_stream; DESIGN.md
// "Non-negotiables: Exec"; docs/DESIGN.md "Rules") runs req.Cmd (an argv, no
// shell implied) in the runtime's sandbox, spawned by its supervisor (see
// the package documentation), in the workdir or req.Cwd below it, and
// returns when it has finished, handing each piece of output to onChunk
// (when non-nil) as it arrives: every byte exactly once and in order (the
// command waits when onChunk is slower than it writes); onChunk calls are
// serialized and receive data they may keep. A stopped runtime is started
// first.
//
// The command runs in the runtime's sandbox of req.Network ("" =
// RuntimeSpec.Network; a mode above it is sandboxapi.ErrCommandRejected). The
// environment is exactly PATH=BasePath, HOME=Home, LANG=C.UTF-8, TERM=dumb,
// in the limited network the proxy variables (procexec.ProxyEnv), then
// Options.BaseEnv, RuntimeSpec.Env and req.Env (later wins).
// Stdin is /dev/null unless req.Stdin is non-nil. Stdout and stderr are each
// capped at req.OutputCap() bytes (head and tail kept, see output.Capped)
// with the full counts in StdoutBytes/StderrBytes.
//
// Outcomes that are results, not errors: a non-zero exit; 127 when the
// executable is not found and 126 when it cannot be executed (a
// "sandbox: …" notice on stderr); 128+n when killed by signal n (137 when
// Stop or Destroy killed it); 124 with TimedOut after req.Timeout(). Every
// process the command started dies when it exits, times out or is killed,
// however it daemonized (setsid, double fork): only background processes
// (StartProcess) outlive their command.
//
// Errors: sandboxapi.ErrInvalidArgument for a bad request
// (runspec.ValidateExec; a cwd that is missing, not a directory or
// resolves outside the workdir) — nothing runs then; sandboxapi.ErrNotFound after
// Destroy; sandboxapi.ErrRuntimeUnavailable when the workdir is gone, bwrap
// cannot build the sandbox (its message included), or ctx is cancelled
// (wrapping context.Canceled); sandboxapi.ErrTimeout when ctx's deadline passes
// first (wrapping context.DeadlineExceeded). On ctx expiry the command's
// whole tree is killed at once and the partial result is returned along
// with the error.
func (r *Runtime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	if err := runspec.ValidateExec(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	return r.life.Exec(ctx, r.ready, func(killCtx context.Context, spec sandbox.RuntimeSpec, cfg sandboxConfig) (sandboxapi.ExecResult, error) {
		mode, err := procexec.CommandNetwork("exec", cfg.network, req.Network)
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		_, rel, err := procexec.ResolveCwd(cfg.root, req.Cwd)
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		env := procexec.EnvList(procexec.BaseEnv(Home), r.networkEnv(cfg, mode), r.p.baseEnv, spec.Env, req.Env)
		res, err := r.run(killCtx, ctx, cfg, mode, supervisor.Spec{
			Argv: req.Cmd, Env: env, Dir: path.Join(cfg.workdir, rel), Stdin: req.Stdin,
			TimeoutMS: req.Timeout().Milliseconds(),
		}, req, onChunk)
		r.p.log.Debug("exec", "id", r.ID(), "cmd", req.Cmd[0], "network", mode, "exit_code", res.ExitCode, "timed_out", res.TimedOut,
			"duration_ms", res.DurationMS, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "err", err)
		return res, err
	})
}

// run runs spec as a foreground process of the sandbox and classifies the
// outcome (see ExecStream).
func (r *Runtime) run(killCtx, callerCtx context.Context, cfg sandboxConfig, mode sandboxapi.Network, spec supervisor.Spec, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	out := procexec.NewOutput(req.OutputCap(), onChunk)
	var note execNote
	code := -1
	out.Epilogue = func() string { return r.endNotice(cfg, note, code) }
	streams := [2]func([]byte){
		func(b []byte) { _, _ = out.Stdout().Write(b) },
		func(b []byte) { _, _ = out.Stderr().Write(b) },
	}
	for attempt := 0; ; attempt++ {
		sb, err := r.ensure(killCtx, cfg, mode)
		if err != nil {
			if killCtx.Err() != nil {
				return r.interrupted(out, killCtx, callerCtx, req)
			}
			return sandboxapi.ExecResult{}, err
		}
		spec.NoFileGrowth = r.fileGrowthBlocked(killCtx, cfg)
		note = r.startNote(cfg, mode, spec.NoFileGrowth)
		info, err := sb.client.Run(killCtx, spec, func(i int, b []byte) { streams[i](b) })
		switch {
		case err == nil:
			if info.Reason == supervisor.ReasonTimeout {
				return out.TimedOut(), nil
			}
			code = info.ExitCode
			return out.Result(info.ExitCode), nil
		case killCtx.Err() != nil:
			return r.interrupted(out, killCtx, callerCtx, req)
		case supervisor.IsUnreachable(err) && attempt == 0:
			// The sandbox is gone (killed, or the machine restarted): the
			// command never started; build a new one.
			r.discard(sb)
			continue
		}
		r.discard(sb)
		return out.Result(-1), sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "exec %s: the runtime's sandbox failed", req.Cmd[0])
	}
}

// interrupted is the outcome of a command whose context ended first.
func (r *Runtime) interrupted(out *procexec.Output, killCtx, callerCtx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	if callerCtx.Err() != nil {
		return out.Interrupted(137, req.Cmd[0], callerCtx.Err())
	}
	if procexec.Halted(killCtx) {
		return out.Result(137), nil
	}
	return out.Interrupted(137, req.Cmd[0], killCtx.Err())
}
