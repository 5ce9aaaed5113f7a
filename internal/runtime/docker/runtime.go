package docker

import (
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Exec timing.
const (
	// DrainGrace bounds how long an exec call waits, once the command has
	// exited, for output still held open by processes it left in the
	// background; then the stream is closed and the call returns.
	DrainGrace = 300 * time.Millisecond
	// KillGrace bounds how long an exec call waits for the command to die
	// after its process tree was killed (timeout or cancellation).
	KillGrace = 5 * time.Second
	// pollMin and pollMax bound the interval between exec inspections while
	// a command runs (doubling from min to max).
	pollMin = 10 * time.Millisecond
	pollMax = 250 * time.Millisecond
	// controlTimeout bounds daemon calls made after the caller's context ended.
	controlTimeout = 10 * time.Second
)

// execWrapper runs as "/bin/sh -c execWrapper sandboxcore argv...": it
// reports its own pid (the exec process is a session and process-group
// leader, so this is the group to kill) as the first line of stderr, which
// the runtime strips, then becomes the command (without the PWD variable sh
// exports, so the environment is exactly the runtime's). sh gives the usual exit codes
// for a missing (127) or non-executable (126) command.
const execWrapper = `printf '%d\n' "$$" >&2; unset PWD; exec "$@"`

// killScript kills, inside the container, the process group and the session
// of the pid given as $1: everything the command started, including
// background children, but not processes that left its session (setsid).
const killScript = `p=$1; kill -9 -"$p"; for d in /proc/[0-9]*; do read -r s < "$d/stat" || continue; s=${s##*) }; set -- $s; [ "$4" = "$p" ] && kill -9 "${d#/proc/}"; done 2>/dev/null; exit 0`

// Runtime is one Docker runtime: a handle on the container
// ContainerName(ID()). Handles keep no state of their own, so several
// handles on one runtime (from Create and Get, or from two Providers) behave
// as one. It is safe for concurrent use; concurrent Execs run in parallel.
type Runtime struct {
	p    *Provider
	id   string
	name string
	// root is the symlink-free host path of the workdir mount ("" when
	// unknown); workdir is the container path it is mounted at.
	root    string
	workdir string
	// spec is the runtime's spec (from Create, or the container's
	// LabelSpec); nil for a container that does not carry it (built by an
	// earlier version): it then has no container of another network mode.
	spec *sandbox.RuntimeSpec
}

// policy is the runtime's network policy (its own container's mode).
func (r *Runtime) policy() sandboxapi.Network {
	if r.spec == nil {
		return ""
	}
	return procexec.RuntimeNetwork(*r.spec)
}

// container returns the name of the container that runs commands of
// network mode ("" = the runtime's own), creating it (from the spec) when
// create and it is missing or was built from another spec; the caller
// starts it. Errors: sandboxapi.ErrCommandRejected for a mode above the
// runtime's network, the daemon's errors.
func (r *Runtime) container(ctx context.Context, mode sandboxapi.Network, create bool) (string, error) {
	policy := r.policy()
	if mode == "" || mode == policy || r.spec == nil {
		if r.spec == nil && mode != "" {
			return "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "runtime %s was built by an earlier version: it runs every command with its own network; recreate it to choose one per command", r.id)
		}
		return r.name, nil
	}
	b, err := r.p.build(*r.spec, mode)
	if err != nil {
		return "", err
	}
	if !create {
		return b.name, nil
	}
	r.p.modeMu.Lock()
	defer r.p.modeMu.Unlock()
	info, err := r.p.cli.ContainerInspect(ctx, b.name)
	switch {
	case err == nil && ours(info.Config, r.id) == nil && info.Config.Labels[LabelSpecHash] == b.hash:
		return b.name, nil
	case err == nil:
		if ours(info.Config, r.id) != nil {
			return "", ours(info.Config, r.id)
		}
		r.stopProcesses(ctx, b.name, false)
		if err := r.p.cli.ContainerRemove(ctx, b.name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return "", r.p.mapErr(err, "replace container %s", b.name)
		}
	case !cerrdefs.IsNotFound(err):
		return "", r.p.mapErr(err, "inspect container %s", b.name)
	}
	if _, err := r.p.cli.ContainerCreate(ctx, b.config, b.host, nil, nil, b.name); err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", r.p.imageError(b.config.Image, err)
		}
		return "", r.p.mapErr(err, "create container %s", b.name)
	}
	r.p.log.Debug("runtime container created", "id", r.id, "container", b.name, "network", mode)
	return b.name, nil
}

// trim removes the runtime's containers its policy no longer allows (a
// mode above it, or the one its own container now runs).
func (r *Runtime) trim(ctx context.Context) {
	policy := r.policy()
	if policy == "" {
		return
	}
	err := r.p.removeModes(ctx, r.id, func(name string) bool {
		mode := sandboxapi.Network(strings.TrimPrefix(name, r.name+"."))
		return !mode.Within(policy) || mode == policy
	})
	if err != nil {
		r.p.log.Warn("runtime containers of other networks not removed", "id", r.id, "error", err)
	}
}

var (
	_ sandbox.Runtime        = (*Runtime)(nil)
	_ sandbox.ProcessRuntime = (*Runtime)(nil)
	_ sandbox.ExecNotices    = (*Runtime)(nil)
)

// ID returns the runtime id (RuntimeSpec.ID).
func (r *Runtime) ID() string { return r.id }

// State returns the runtime's state: running when its own container or one
// of another network mode runs, else its own container's: stopped (created,
// exited or paused), starting (restarting), error (removing, dead), or
// sandbox.RuntimeMissing when it does not exist. Errors wrap
// sandboxapi.ErrRuntimeUnavailable when the daemon fails.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	st, err := r.containerState(ctx, r.name)
	if err != nil || st == sandbox.RuntimeMissing || st == sandbox.RuntimeRunning || r.spec == nil {
		return st, err
	}
	names, err := r.p.modeContainers(ctx, r.id)
	if err != nil {
		return sandbox.RuntimeError, err
	}
	for name := range names {
		if s, err := r.containerState(ctx, name); err == nil && s == sandbox.RuntimeRunning {
			return s, nil
		}
	}
	return st, nil
}

// containerState is one of the runtime's containers' state.
func (r *Runtime) containerState(ctx context.Context, name string) (sandbox.RuntimeState, error) {
	info, err := r.p.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return sandbox.RuntimeMissing, nil
	}
	if err != nil {
		return sandbox.RuntimeError, r.p.mapErr(err, "inspect container %s", name)
	}
	if ours(info.Config, r.id) != nil || info.State == nil {
		return sandbox.RuntimeMissing, nil
	}
	return stateOf(string(info.State.Status)), nil
}

// Start starts the runtime's own container (a running one is left alone;
// those of other network modes start when a command needs them). Errors
// wrap sandboxapi.ErrNotFound when the container does not exist (destroyed),
// and sandboxapi.ErrRuntimeUnavailable when the workdir is gone or the daemon
// fails.
func (r *Runtime) Start(ctx context.Context) error { return r.start(ctx, r.name) }

// start starts one of the runtime's containers.
func (r *Runtime) start(ctx context.Context, name string) error {
	if r.root != "" {
		if _, err := os.Stat(r.root); err != nil {
			return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.id, r.root)
		}
	}
	err := r.p.cli.ContainerStart(ctx, name, container.StartOptions{})
	if cerrdefs.IsNotFound(err) {
		return sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s does not exist (destroyed?)", r.id)
	}
	if err != nil {
		return r.p.mapErr(err, "start container %s", name)
	}
	return nil
}

// Stop hibernates the runtime: its supervisor ends every background
// process (exit reason runtime_stopped; they stay readable) and the
// container is stopped (SIGTERM, then SIGKILL after Options.StopTimeout), so
// every command still running in it dies; the workspace is untouched and the next command starts the container
// again. Stopping a stopped or destroyed runtime is success. Errors wrap
// sandboxapi.ErrRuntimeUnavailable (daemon failure) or sandboxapi.ErrTimeout (ctx).
func (r *Runtime) Stop(ctx context.Context) error {
	names := []string{r.name}
	if others, err := r.p.modeContainers(ctx, r.id); err == nil {
		for n := range others {
			names = append(names, n)
		}
	}
	r.p.closePreviews(r.id) // nothing listens in a stopped container
	secs := int((r.p.stopTimeout + time.Second - 1) / time.Second)
	for _, name := range names {
		r.stopProcesses(ctx, name, false)
		err := r.p.cli.ContainerStop(ctx, name, container.StopOptions{Timeout: &secs})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return r.p.mapErr(err, "stop container %s", name)
		}
	}
	return nil
}

// Exec runs one command and returns its result (see ExecStream).
func (r *Runtime) Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	return r.ExecStream(ctx, req, nil)
}

// ExecStream (docs/DESIGN.md "Ports": exec / exec_stream; DESIGN.md
// "Non-negotiables: Exec") runs req.Cmd (an argv, no shell implied)
// in the container with `docker exec`, in the workdir or req.Cwd below it,
// and returns when it has finished, handing each piece of output to onChunk
// (when non-nil) as it arrives; onChunk calls are serialized and receive data
// they may keep. A stopped container is started first.
//
// The command runs in the runtime's container of req.Network ("" =
// RuntimeSpec.Network, created from the spec when first needed; a mode
// above it is sandboxapi.ErrCommandRejected). Its environment is that
// container's (see the package documentation; the limited one's holds the
// proxy variables) plus req.Env (which wins). Stdin is empty unless req.Stdin
// is non-nil. Stdout and stderr are demultiplexed and each capped at
// req.OutputCap() bytes (head and tail kept, see output.Capped) with the
// full counts in StdoutBytes/StderrBytes.
//
// The exit is read from exec inspect, polled, so the call returns at most
// DrainGrace after the command exits even when a background process it
// started still holds its output open (such a process keeps running in the
// container until it ends, the runtime stops, or it is destroyed). On timeout
// or cancellation of ctx the command's process group and session are killed
// inside the container (a second exec), so its whole tree dies.
//
// Outcomes that are results, not errors: a non-zero exit; 127 when the
// executable is not found and 126 when it cannot be executed (sh's message on
// stderr); 128+n when killed by signal n (137 also when the runtime was
// stopped or destroyed under it); 124 with TimedOut after req.Timeout().
//
// Errors: sandboxapi.ErrCommandRejected for a network above the runtime's;
// sandboxapi.ErrInvalidArgument for a bad request (runspec.ValidateExec;
// a cwd that is missing, not a directory or resolves outside the workdir) —
// nothing runs then; sandboxapi.ErrNotFound when the container does not exist;
// sandboxapi.ErrRuntimeUnavailable when the workdir is gone, the daemon fails,
// or ctx is cancelled (wrapping context.Canceled); sandboxapi.ErrTimeout when
// ctx's deadline passes first (wrapping context.DeadlineExceeded). On ctx
// expiry the partial result is returned along with the error.
func (r *Runtime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	if err := runspec.ValidateExec(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	mode := req.Network
	if policy := r.policy(); policy != "" {
		m, err := procexec.CommandNetwork("exec", policy, req.Network)
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		mode = m
	}
	name, err := r.container(ctx, mode, true)
	if err != nil {
		return sandboxapi.ExecResult{}, err
	}
	cwd, err := r.cwd(req.Cwd)
	if err != nil {
		return sandboxapi.ExecResult{}, err
	}
	out := procexec.NewOutput(req.OutputCap(), onChunk)
	if r.p.egress != nil && r.spec != nil {
		// What the network policy refused while it ran (the agent's tool may
		// have printed only "response 403").
		ws, since := r.spec.WorkspaceID, time.Now()
		out.Epilogue = func() string { return r.p.egress.RefusalNotice(ws, since) }
	}
	if strings.HasPrefix(req.Cmd[0], "-") {
		// sh's exec would take it for an option.
		return out.Notice(127, req.Cmd[0], "command not found"), nil
	}
	execID, err := r.createExec(ctx, name, container.ExecOptions{
		AttachStdout: true,
		AttachStderr: true,
		AttachStdin:  req.Stdin != nil,
		Env:          procexec.EnvList(req.Env),
		WorkingDir:   cwd,
		Cmd:          append([]string{"/bin/sh", "-c", execWrapper, "sandboxcore"}, req.Cmd...),
	})
	if err != nil {
		return sandboxapi.ExecResult{}, err
	}
	hj, err := r.p.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
	if err != nil {
		return sandboxapi.ExecResult{}, r.p.mapErr(err, "start exec in %s", name)
	}
	res, err := r.wait(ctx, name, req, execID, hj, out)
	r.p.log.Debug("exec", "id", r.id, "cmd", req.Cmd[0], "network", mode, "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"duration_ms", res.DurationMS, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "err", err)
	return res, err
}

// createExec creates the exec in container name, starting it first when
// it is not running.
func (r *Runtime) createExec(ctx context.Context, name string, opts container.ExecOptions) (string, error) {
	for attempt := 0; ; attempt++ {
		resp, err := r.p.cli.ContainerExecCreate(ctx, name, opts)
		switch {
		case err == nil:
			return resp.ID, nil
		case cerrdefs.IsNotFound(err):
			return "", sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s does not exist (destroyed?)", r.id)
		case cerrdefs.IsConflict(err) && attempt == 0:
			// Not running (stopped, hibernated): resume it.
			if err := r.start(ctx, name); err != nil {
				return "", err
			}
			continue
		}
		return "", r.p.mapErr(err, "create exec in %s", name)
	}
}

// wait pumps the exec's output until the command has exited (or was killed)
// and classifies the outcome: it polls the exec (backing off from pollMin
// to pollMax) and, on the timeout or ctx's end, kills the command's tree
// and allows it KillGrace to die.
func (r *Runtime) wait(ctx context.Context, name string, req sandboxapi.ExecRequest, execID string, hj types.HijackedResponse, out *procexec.Output) (sandboxapi.ExecResult, error) {
	closeConn := sync.OnceFunc(hj.Close)
	defer closeConn()
	sniff, copyDone := pumpExec(hj, out, req.Stdin)
	end := &execEnd{ctx: ctx, out: out, cmd: req.Cmd[0], copyDone: copyDone, closeConn: closeConn}

	timeout := time.NewTimer(req.Timeout())
	defer timeout.Stop()
	delay := pollMin
	poll := time.NewTimer(delay)
	defer poll.Stop()
	var (
		streamDone              = copyDone
		ctxDone                 = ctx.Done()
		killDeadline            <-chan time.Time
		killWanted, killStarted bool
	)
	for {
		check := false
		select {
		case <-streamDone:
			streamDone, end.streamClosed, check = nil, true, true
		case <-poll.C:
			check = true
		case <-timeout.C:
			end.timedOut, killWanted = true, true
			killDeadline = time.After(KillGrace)
		case <-ctxDone:
			ctxDone, end.cancelled, killWanted = nil, true, true
			killDeadline = time.After(KillGrace)
		case <-killDeadline:
			r.p.log.Warn("exec did not die after its process tree was killed", "id", r.id, "cmd", req.Cmd[0])
			_, _ = out.Stderr().Write([]byte("\nsandbox: the command did not die after it was killed\n"))
			return end.finish(137)
		}
		if killWanted && !killStarted {
			if pid := sniff.pid.Load(); pid > 0 {
				killStarted = true
				r.killTree(name, pid)
			}
		}
		if !check {
			continue
		}
		ictx, cancel := context.WithTimeout(context.Background(), controlTimeout)
		ins, err := r.p.cli.ContainerExecInspect(ictx, execID)
		cancel()
		switch {
		case cerrdefs.IsNotFound(err):
			// The container stopped or was removed under the command.
			return end.finish(137)
		case err != nil:
			closeConn()
			<-copyDone
			return out.Result(-1), r.p.mapErr(err, "inspect exec in %s", name)
		case !ins.Running && (sniff.pid.Load() > 0 || end.streamClosed || ins.Pid != 0):
			return end.finish(ins.ExitCode)
		}
		delay = min(delay*2, pollMax)
		poll.Reset(delay)
	}
}

// pumpExec copies the exec's multiplexed output into out (stderr through a
// pidSniffer, which takes the command's pid from the wrapper's first line)
// and writes stdin (when non-nil), then closes the exec's input. copyDone
// is closed once the output stream ended.
func pumpExec(hj types.HijackedResponse, out *procexec.Output, stdin []byte) (*pidSniffer, <-chan struct{}) {
	sniff := &pidSniffer{next: out.Stderr()}
	copyDone := make(chan struct{})
	go func() {
		defer close(copyDone)
		_, _ = stdcopy.StdCopy(out.Stdout(), sniff, hj.Reader)
	}()
	if stdin != nil {
		go func() {
			_, _ = hj.Conn.Write(stdin) // fails once the command is gone without reading it all
			_ = hj.CloseWrite()
		}()
	}
	return sniff, copyDone
}

// execEnd is how an exec ended, as wait saw it, and the output to classify.
type execEnd struct {
	ctx                               context.Context
	out                               *procexec.Output
	cmd                               string // Cmd[0], for the interrupted result
	copyDone                          <-chan struct{}
	closeConn                         func()
	streamClosed, timedOut, cancelled bool
}

// finish drains the output (up to DrainGrace more when the stream is
// still open), closes the connection and classifies: Interrupted when ctx
// ended, TimedOut after the exec's timeout, otherwise Result(code).
func (e *execEnd) finish(code int) (sandboxapi.ExecResult, error) {
	if !e.streamClosed {
		select {
		case <-e.copyDone:
		case <-time.After(DrainGrace):
		}
	}
	e.closeConn()
	<-e.copyDone
	switch {
	case e.cancelled:
		return e.out.Interrupted(code, e.cmd, e.ctx.Err())
	case e.timedOut:
		return e.out.TimedOut(), nil
	}
	return e.out.Result(code), nil
}

// killTree kills, from a second exec in container name, the process group
// and session whose leader is pid (a container pid). Errors are logged: the
// caller's wait for the exit is bounded by KillGrace anyway.
func (r *Runtime) killTree(name string, pid int64) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	resp, err := r.p.cli.ContainerExecCreate(ctx, name, container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", killScript, "sandboxcore-kill", strconv.FormatInt(pid, 10)},
	})
	if err == nil {
		err = r.p.cli.ContainerExecStart(ctx, resp.ID, container.ExecStartOptions{Detach: true})
	}
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		r.p.log.Warn("kill process tree", "id", r.id, "pid", pid, "error", err)
	}
}

// cwd maps a workdir-relative cwd onto the container path, refusing one that
// is missing, not a directory or resolves (through symlinks, checked on the
// host side of the bind mount) outside the workdir: sandboxapi.ErrInvalidArgument.
// A vanished workdir is sandboxapi.ErrRuntimeUnavailable.
func (r *Runtime) cwd(rel string) (string, error) {
	clean, err := sandboxapi.CleanRelPath(rel)
	if err != nil {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: cwd: %s", sandboxapi.Message(err))
	}
	if r.root == "" {
		return path.Join(r.workdir, clean), nil
	}
	if fi, err := os.Stat(r.root); err != nil || !fi.IsDir() {
		return "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "runtime %s: workdir %s is gone or moved", r.id, r.root)
	}
	_, relp, err := procexec.ResolveCwd(r.root, rel)
	if err != nil {
		return "", err
	}
	return path.Join(r.workdir, relp), nil
}

// pidSniffer takes execWrapper's first stderr line (the command's pid) out of
// the stream and passes everything else on. Writes come from one goroutine.
type pidSniffer struct {
	next io.Writer
	buf  []byte
	done bool
	pid  atomic.Int64
}

// maxPidLine bounds the pid line; anything longer is not the wrapper's.
const maxPidLine = 24

// Write strips the pid line from the start of the stream and passes the rest
// on; it never fails.
func (w *pidSniffer) Write(p []byte) (int, error) {
	n := len(p)
	if !w.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) > maxPidLine {
				w.done = true
				_, _ = w.next.Write(w.buf)
			}
			return n, nil
		}
		w.buf = append(w.buf, p[:i]...)
		p = p[i+1:]
		w.done = true
		if v, err := strconv.ParseInt(string(w.buf), 10, 64); err == nil && v > 0 {
			w.pid.Store(v)
		} else {
			_, _ = w.next.Write(append(w.buf, '\n'))
		}
	}
	if len(p) > 0 {
		_, _ = w.next.Write(p)
	}
	return n, nil
}
