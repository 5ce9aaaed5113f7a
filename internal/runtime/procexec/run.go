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

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
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
	// wrapped in sandbox.ErrRuntimeUnavailable.
	StartFailed func(err error) (sandbox.ExecResult, error)
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
	Status func(status []byte, res sandbox.ExecResult) error
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
//     with an error wrapping sandbox.ErrTimeout or
//     sandbox.ErrRuntimeUnavailable);
//   - the process could not be started: see Command.StartFailed;
//   - a pipe could not be made: an error wrapping sandbox.ErrRuntimeUnavailable.
//
// The group is also killed as soon as the leader exits, so a command leaves
// no background process behind; one that left the group (setsid, setpgid)
// escapes that kill, and its hold on the output pipes is cut after
// DrainGrace so that Run still returns.
func Run(killCtx, callerCtx context.Context, out *Output, c Command) (sandbox.ExecResult, error) {
	runCtx, cancel := context.WithTimeout(killCtx, c.Timeout)
	defer cancel()
	// classify turns a finished (or never started) command into its result.
	classify := func(code int, killed bool) (sandbox.ExecResult, error) {
		if killed {
			switch {
			case callerCtx.Err() != nil:
				return out.Interrupted(code, c.Name, callerCtx.Err())
			case errors.Is(context.Cause(killCtx), errHalted):
				return out.Result(code), nil
			case errors.Is(runCtx.Err(), context.DeadlineExceeded):
				return out.TimedOut(), nil
			}
		}
		return out.Result(code), nil
	}

	env := c.Env
	if env == nil {
		env = []string{}
	}
	var g group
	cmd := exec.CommandContext(runCtx, c.Path)
	cmd.Args = slices.Clone(c.Args)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.Credential, Pdeathsig: c.Pdeathsig}
	cmd.Cancel = func() error { return g.cancel(cmd.Process.Pid) }
	cmd.WaitDelay = DrainGrace

	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			_ = f.Close()
		}
		closers = nil
	}
	defer closeAll()
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
		}
		closers = append(closers, r, w)
		return r, w, nil
	}
	outR, outW, err := pipe()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// The ends the child gets its own copies of, closed here once it started.
	childEnds := []*os.File{outW, errW}
	var stR *os.File
	if c.Status != nil {
		var stW *os.File
		if stR, stW, err = pipe(); err != nil {
			return sandbox.ExecResult{}, err
		}
		cmd.ExtraFiles = []*os.File{stW} // descriptor 3
		childEnds = append(childEnds, stW)
	}
	var inW *os.File
	if c.Stdin != nil {
		var inR *os.File
		if inR, inW, err = pipe(); err != nil {
			return sandbox.ExecResult{}, err
		}
		cmd.Stdin = inR
		childEnds = append(childEnds, inR)
	}

	err = cmd.Start()
	for _, f := range childEnds {
		_ = f.Close()
	}
	if err != nil {
		if runCtx.Err() != nil {
			// Stopped, cancelled or timed out before the process existed.
			if c.NoticeHaltBeforeStart && errors.Is(context.Cause(killCtx), errHalted) && callerCtx.Err() == nil {
				return out.Notice(137, c.Name, "killed before it started: the runtime was stopped"), nil
			}
			return classify(137, true)
		}
		if c.StartFailed != nil {
			return c.StartFailed(err)
		}
		return sandbox.ExecResult{}, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "exec %s: start", c.Name)
	}
	pid := cmd.Process.Pid

	var wg sync.WaitGroup
	wg.Add(2)
	go pump(out.Stdout(), outR, &wg)
	go pump(out.Stderr(), errR, &wg)
	var status chan []byte
	if stR != nil {
		status = make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(stR, maxStatus))
			status <- b
		}()
	}
	if inW != nil {
		go func() {
			_, _ = inW.Write(c.Stdin) // EPIPE when the command does not read it all
			_ = inW.Close()
		}()
	}

	// Leader exit (on its own, or after Cancel killed the group): kill the rest
	// of the group while the zombie leader still reserves the pgid, then reap.
	var waitErr error
	if waitExit(pid) == nil {
		g.leaderExited(pid)
		waitErr = cmd.Wait()
	} else {
		// Cannot wait without reaping (unexpected): reap first, then kill the
		// rest of the group, accepting the tiny window in which the pgid could
		// be reused.
		waitErr = cmd.Wait()
		g.leaderExited(pid)
	}
	if inW != nil {
		_ = inW.Close() // unblocks a writer stuck on a process that left the group
	}
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
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
	closeAll() // unblocks the pumps and the status reader
	<-drained

	if cmd.ProcessState == nil {
		return out.Result(-1), sandbox.Wrap(sandbox.ErrRuntimeUnavailable, waitErr, "exec %s: wait", c.Name)
	}
	code := exitCode(cmd.ProcessState)
	if g.wasCanceled() {
		return classify(code, true)
	}
	res := out.Result(code)
	if c.Status != nil {
		if err := c.Status(st, res); err != nil {
			return res, err
		}
	}
	return res, nil
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
