package procexec

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DrainGrace bounds how long Run waits, after the process group has exited
// or been killed, for output pipes still held by processes that left the
// group (and for Command.Status); then the pipes are closed and Run returns.
// It is also the exec.Cmd WaitDelay.
const DrainGrace = 500 * time.Millisecond

// readChunk is the size of one read from an output pipe (and so the largest
// ExecChunk.Data handed to onChunk).
const readChunk = 32 << 10

// maxStatus bounds what Run reads from the status pipe (Command.Status).
const maxStatus = 64 << 10

// Command is one host process for Run.
type Command struct {
	// Name is the command as the request names it (ExecRequest.Cmd[0]), for
	// notices and error messages.
	Name string
	// Path is the executable to start and Args its whole argv, Args[0]
	// included (exec.Cmd.Path and Args).
	Path string
	Args []string
	// Dir is the working directory (exec.Cmd.Dir).
	Dir string
	// Env is the process's entire environment; nil means an empty one (never
	// the worker's).
	Env []string
	// Credential, when non-nil, runs the process as that user, and Pdeathsig,
	// when non-zero, is sent to it when the thread that started it dies
	// (syscall.SysProcAttr).
	Credential *syscall.Credential
	Pdeathsig  syscall.Signal
	// Stdin is written to the process's standard input, which is /dev/null
	// when Stdin is nil.
	Stdin []byte
	// Timeout is the command's own timeout (ExecRequest.Timeout()): then the
	// group is killed and the result is Output.TimedOut.
	Timeout time.Duration
	// StartFailed maps an error of starting the process (one not caused by
	// the end of its context) to the call's outcome; nil returns the error
	// wrapped in sandboxapi.ErrRuntimeUnavailable.
	StartFailed func(err error) (sandboxapi.ExecResult, error)
	// NoticeHaltBeforeStart, when set, writes the notice "killed before it
	// started: the runtime was stopped" on stderr when Stop or Destroy ended
	// the command's context before the process existed (exit 137 either way).
	NoticeHaltBeforeStart bool
	// Status, when non-nil, gives the process a status pipe as descriptor 3
	// (its only ExtraFiles entry). When the process has exited on its own
	// (not killed), Status receives what was written there (at most 64 KiB,
	// read until the output pipes are drained, then for at most DrainGrace)
	// and the result; an error it returns is the call's error, returned along
	// with the result.
	Status func(status []byte, res sandboxapi.ExecResult) error
}

// Run runs c as the leader of its own process group under killCtx, which
// must be the context Lifecycle.Exec hands its run function (derived from
// callerCtx, and cancelled when the runtime is stopped or destroyed),
// capturing its output into out, and classifies the outcome:
//
//   - an exit on its own: Result(exit status), or 128+n when a signal n
//     killed it;
//   - Command.Timeout passed: the group is killed; TimedOut() (124);
//   - Stop or Destroy: the group is killed; Result(137) (128+SIGKILL);
//   - callerCtx ended: the group is killed; Interrupted (the partial result
//     with an error wrapping sandboxapi.ErrTimeout or
//     sandboxapi.ErrRuntimeUnavailable);
//   - the process could not be started: see Command.StartFailed;
//   - a pipe could not be made: an error wrapping sandboxapi.ErrRuntimeUnavailable.
//
// The group is also killed as soon as the leader exits, so a command leaves
// no background process behind; one that left the group (setsid, setpgid)
// escapes that kill, and its hold on the output pipes is cut after
// DrainGrace so that Run still returns.
func Run(killCtx, callerCtx context.Context, out *Output, c Command) (sandboxapi.ExecResult, error) {
	runCtx, cancel := context.WithTimeout(killCtx, c.Timeout)
	defer cancel()
	o := outcome{out: out, name: c.Name, killCtx: killCtx, callerCtx: callerCtx, runCtx: runCtx}
	var g group
	cmd := newCmd(runCtx, c, &g)
	var p pipes
	defer p.closeAll()
	if err := p.attach(cmd, c.Status != nil, c.Stdin != nil); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	err := cmd.Start()
	p.closeChildEnds()
	if err != nil {
		return o.startFailed(c, err)
	}
	drained, status := p.transfer(out, c.Stdin)
	waitErr := reap(cmd, &g)
	if p.stdin != nil {
		_ = p.stdin.Close() // unblocks a writer stuck on a process that left the group
	}
	st := p.drain(drained, status)

	if cmd.ProcessState == nil {
		return out.Result(-1), sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, waitErr, "exec %s: wait", c.Name)
	}
	code := exitCode(cmd.ProcessState)
	if g.wasCanceled() {
		return o.classify(code, true)
	}
	res := out.Result(code)
	if c.Status != nil {
		if err := c.Status(st, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// outcome is what decides a command's result once it ended or failed to
// start: the contexts it ran under (Run's killCtx and callerCtx, and runCtx,
// killCtx bounded by Command.Timeout) and its output.
type outcome struct {
	out                        *Output
	name                       string
	killCtx, callerCtx, runCtx context.Context
}

// classify turns a finished (or never started) command into its result.
// A command killed because a context ended is, in this order: Interrupted
// when callerCtx ended (the caller gave up: the partial result and an
// error), the plain Result(code) when the runtime was stopped or destroyed
// (killCtx's cause is errHalted), TimedOut when Command.Timeout passed;
// anything else, and a command not killed, is Result(code).
func (o outcome) classify(code int, killed bool) (sandboxapi.ExecResult, error) {
	if killed {
		switch {
		case o.callerCtx.Err() != nil:
			return o.out.Interrupted(code, o.name, o.callerCtx.Err())
		case errors.Is(context.Cause(o.killCtx), errHalted):
			return o.out.Result(code), nil
		case errors.Is(o.runCtx.Err(), context.DeadlineExceeded):
			return o.out.TimedOut(), nil
		}
	}
	return o.out.Result(code), nil
}

// startFailed is the outcome of a command whose process could not be
// started (err from exec.Cmd.Start): when runCtx had ended it never ran
// (137 classified as killed; with Command.NoticeHaltBeforeStart a stop
// before the start says so on stderr), otherwise Command.StartFailed
// decides, or the error wraps sandboxapi.ErrRuntimeUnavailable.
func (o outcome) startFailed(c Command, err error) (sandboxapi.ExecResult, error) {
	if o.runCtx.Err() != nil {
		// Stopped, cancelled or timed out before the process existed.
		if c.NoticeHaltBeforeStart && errors.Is(context.Cause(o.killCtx), errHalted) && o.callerCtx.Err() == nil {
			return o.out.Notice(137, c.Name, "killed before it started: the runtime was stopped"), nil
		}
		return o.classify(137, true)
	}
	if c.StartFailed != nil {
		return c.StartFailed(err)
	}
	return sandboxapi.ExecResult{}, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "exec %s: start", c.Name)
}

// newCmd builds the exec.Cmd of c under runCtx: the leader of a new process
// group (Setpgid) whose whole group g kills when runCtx ends, with c's argv,
// directory, credential and parent-death signal, an environment that is
// exactly c.Env (empty when nil, never the worker's), and DrainGrace as its
// WaitDelay.
func newCmd(runCtx context.Context, c Command, g *group) *exec.Cmd {
	env := c.Env
	if env == nil {
		env = []string{}
	}
	cmd := exec.CommandContext(runCtx, c.Path)
	cmd.Args = slices.Clone(c.Args)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.Credential, Pdeathsig: c.Pdeathsig}
	cmd.Cancel = func() error { return g.cancel(cmd.Process.Pid) }
	cmd.WaitDelay = DrainGrace
	return cmd
}

// pipes are a command's pipes: the ends Run reads and writes, and the ends
// the child gets its own copies of (closed here once it started).
type pipes struct {
	all            []*os.File // every end, closed by closeAll
	child          []*os.File
	stdout, stderr *os.File // read ends
	status         *os.File // read end of descriptor 3; nil without Command.Status
	stdin          *os.File // write end; nil without Command.Stdin
}

// pipe makes one pipe whose ends closeAll closes. Errors wrap
// sandboxapi.ErrRuntimeUnavailable (out of descriptors).
func (p *pipes) pipe() (*os.File, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	p.all = append(p.all, r, w)
	return r, w, nil
}

// attach gives cmd its stdout and stderr pipes, with status a status pipe as
// descriptor 3 (its only ExtraFiles entry), with stdin a stdin pipe (else
// cmd's stdin stays /dev/null). Errors are pipe's.
func (p *pipes) attach(cmd *exec.Cmd, status, stdin bool) error {
	outR, outW, err := p.pipe()
	if err != nil {
		return err
	}
	errR, errW, err := p.pipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	p.stdout, p.stderr = outR, errR
	p.child = []*os.File{outW, errW}
	if status {
		stR, stW, err := p.pipe()
		if err != nil {
			return err
		}
		cmd.ExtraFiles = []*os.File{stW} // descriptor 3
		p.child = append(p.child, stW)
		p.status = stR
	}
	if stdin {
		inR, inW, err := p.pipe()
		if err != nil {
			return err
		}
		cmd.Stdin = inR
		p.child = append(p.child, inR)
		p.stdin = inW
	}
	return nil
}

// closeChildEnds closes the child's ends (it holds its own copies), so the
// read ends see EOF once every process holding them is gone.
func (p *pipes) closeChildEnds() {
	for _, f := range p.child {
		_ = f.Close()
	}
}

// closeAll closes every end (again for those already closed); it unblocks
// the pumps and the status reader.
func (p *pipes) closeAll() {
	for _, f := range p.all {
		_ = f.Close()
	}
	p.all = nil
}

// transfer starts copying the command's stdout and stderr into out (drained
// is closed when both reached EOF or were closed), reading its status pipe
// (status receives at most maxStatus bytes once, when there is one) and
// writing stdin to it.
func (p *pipes) transfer(out *Output, stdin []byte) (drained <-chan struct{}, status <-chan []byte) {
	var wg sync.WaitGroup
	wg.Add(2)
	go pump(out.Stdout(), p.stdout, &wg)
	go pump(out.Stderr(), p.stderr, &wg)
	if p.status != nil {
		st := make(chan []byte, 1)
		go func(r *os.File) {
			b, _ := io.ReadAll(io.LimitReader(r, maxStatus))
			st <- b
		}(p.status)
		status = st
	}
	if p.stdin != nil {
		go func(w *os.File) {
			_, _ = w.Write(stdin) // EPIPE when the command does not read it all
			_ = w.Close()
		}(p.stdin)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done, status
}

// drain waits up to DrainGrace for the output to be drained, then up to
// DrainGrace more for the status (when there is a status pipe), closes every
// pipe — cutting off a process outside the group that still holds them —
// and waits for the pumps to return. It returns the status read, nil when
// none came in time.
func (p *pipes) drain(drained <-chan struct{}, status <-chan []byte) []byte {
	var st []byte
	select {
	case <-drained:
		if status != nil {
			select {
			case st = <-status:
			case <-time.After(DrainGrace):
			}
		}
	case <-time.After(DrainGrace):
		// A process outside the group still holds the pipes: cut it off.
	}
	p.closeAll() // unblocks the pumps and the status reader
	<-drained
	return st
}

// reap waits for cmd's leader to exit (on its own, or after Cancel killed
// the group), kills the rest of its group while the zombie leader still
// reserves the pgid, then reaps it; it returns exec.Cmd.Wait's error.
func reap(cmd *exec.Cmd, g *group) error {
	pid := cmd.Process.Pid
	if waitExit(pid) == nil {
		g.leaderExited(pid)
		return cmd.Wait()
	}
	// Cannot wait without reaping (unexpected): reap first, then kill the
	// rest of the group, accepting the tiny window in which the pgid could
	// be reused.
	err := cmd.Wait()
	g.leaderExited(pid)
	return err
}

// pump copies r to w in chunks of at most readChunk bytes until r fails
// (EOF, or closed by Run).
func pump(w io.Writer, r *os.File, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// group tracks a command's process group so that it is only ever signalled
// while the leader is unreaped (its pgid cannot have been reused then).
type group struct {
	mu       sync.Mutex
	exited   bool // leader exited: the group has been killed for the last time
	canceled bool // killed because the command's context ended
}

// cancel is exec.Cmd.Cancel: kill the whole group unless the leader already exited.
func (g *group) cancel(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exited {
		return os.ErrProcessDone
	}
	g.canceled = true
	killGroup(pid)
	return nil
}

// leaderExited kills what is left of the group (the leader is a zombie, so
// the pgid is still reserved) and disables further kills.
func (g *group) leaderExited(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exited = true
	killGroup(pid)
}

func (g *group) wasCanceled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.canceled
}

func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// waitExit blocks until process pid has exited, without reaping it.
func waitExit(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// exitCode maps a wait status to a shell-style exit code: the exit status, or
// 128+n when killed by signal n.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
