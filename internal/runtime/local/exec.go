package local

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// BasePath is the PATH every command starts with (RuntimeSpec.Env or
// ExecRequest.Env may replace it).
const BasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DrainGrace bounds how long an exec call waits, after its process group has
// been killed, for output pipes still held by processes that left the group;
// then the pipes are closed and the call returns. It is also the exec.Cmd
// WaitDelay.
const DrainGrace = 500 * time.Millisecond

// readChunk is the size of one read from an output pipe (and so the largest
// ExecChunk.Data handed to onChunk).
const readChunk = 32 << 10

// buildEnv returns the command environment as sorted "KEY=value" entries: the
// fixed base set, then base, spec and req (later wins). The worker's own
// environment is never consulted.
func buildEnv(home string, layers ...map[string]string) []string {
	m := map[string]string{
		"PATH": BasePath,
		"HOME": home,
		"LANG": "C.UTF-8",
		"TERM": "dumb",
	}
	for _, l := range layers {
		maps.Copy(m, l)
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

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
	req  sandbox.ExecRequest
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

// streams collects the two capped outputs and serializes onChunk.
type streams struct {
	stdout, stderr *output.Capped
	mu             sync.Mutex
	onChunk        func(sandbox.ExecChunk)
}

func (s *streams) emit(name string, c *output.Capped, p []byte) {
	_, _ = c.Write(p)
	if s.onChunk != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.onChunk(sandbox.ExecChunk{Stream: name, Data: bytes.Clone(p)})
	}
}

func (s *streams) pump(name string, c *output.Capped, r *os.File, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.emit(name, c, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *streams) result(code int, timedOut bool, start time.Time) sandbox.ExecResult {
	return sandbox.ExecResult{
		ExitCode:    code,
		Stdout:      s.stdout.Bytes(),
		Stderr:      s.stderr.Bytes(),
		TimedOut:    timedOut,
		Truncated:   s.stdout.Truncated() || s.stderr.Truncated(),
		StdoutBytes: s.stdout.Total(),
		StderrBytes: s.stderr.Total(),
		DurationMS:  time.Since(start).Milliseconds(),
	}
}

// runProcess runs pr under killCtx (derived from callerCtx; cancelled with
// errHalted by Stop/Destroy) and classifies the outcome.
func runProcess(killCtx, callerCtx context.Context, pr proc, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	start := time.Now()
	limit := pr.req.OutputCap()
	s := &streams{stdout: output.NewCapped(limit), stderr: output.NewCapped(limit), onChunk: onChunk}
	message := func(code int, msg string) (sandbox.ExecResult, error) {
		s.emit("stderr", s.stderr, []byte("sandbox: "+pr.argv[0]+": "+msg+"\n"))
		return s.result(code, false, start), nil
	}

	path, ok := lookPath(pr.argv[0], envValue(pr.env, "PATH"), pr.dir)
	if !ok {
		return message(127, "command not found")
	}

	runCtx, cancel := context.WithTimeout(killCtx, pr.req.Timeout())
	defer cancel()
	// classify turns a finished (or never started) command into its result.
	classify := func(code int, killed bool) (sandbox.ExecResult, error) {
		if killed {
			switch {
			case callerCtx.Err() != nil:
				res := s.result(code, false, start)
				if errors.Is(callerCtx.Err(), context.DeadlineExceeded) {
					return res, wrapErr(sandbox.ErrTimeout, callerCtx.Err(), "exec %s", pr.argv[0])
				}
				return res, wrapErr(sandbox.ErrRuntimeUnavailable, callerCtx.Err(), "exec %s", pr.argv[0])
			case errors.Is(context.Cause(killCtx), errHalted):
				return s.result(code, false, start), nil
			case errors.Is(runCtx.Err(), context.DeadlineExceeded):
				return s.result(124, true, start), nil
			}
		}
		return s.result(code, false, start), nil
	}

	var g group
	cmd := exec.CommandContext(runCtx, path)
	cmd.Args = slices.Clone(pr.argv)
	cmd.Dir = pr.dir
	cmd.Env = pr.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return g.cancel(cmd.Process.Pid) }
	cmd.WaitDelay = DrainGrace

	outR, outW, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if pr.req.Stdin != nil {
		if inR, inW, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
		}
		defer inW.Close()
		cmd.Stdin = inR
	}

	err = cmd.Start()
	// The child holds its own copies of these ends now.
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		if runCtx.Err() != nil {
			// Stopped, cancelled or timed out before the process existed.
			if errors.Is(context.Cause(killCtx), errHalted) && callerCtx.Err() == nil {
				return message(137, "killed before it started: the runtime was stopped")
			}
			return classify(137, true)
		}
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
			return message(127, "no such file or directory")
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
			return message(126, "cannot execute: "+errnoText(err))
		case errors.Is(err, syscall.E2BIG):
			return sandbox.ExecResult{}, sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: argument list and environment too long")
		}
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec %s: start", pr.argv[0])
	}
	pid := cmd.Process.Pid

	var wg sync.WaitGroup
	wg.Add(2)
	go s.pump("stdout", s.stdout, outR, &wg)
	go s.pump("stderr", s.stderr, errR, &wg)
	if inW != nil {
		go func() {
			_, _ = inW.Write(pr.req.Stdin) // EPIPE when the command does not read it all
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
	select {
	case <-drained:
	case <-time.After(DrainGrace):
		// A process outside the group still holds the pipes: cut it off.
		_ = outR.Close()
		_ = errR.Close()
		<-drained
	}

	if cmd.ProcessState == nil {
		return s.result(-1, false, start), wrapErr(sandbox.ErrRuntimeUnavailable, waitErr, "exec %s: wait", pr.argv[0])
	}
	return classify(exitCode(cmd.ProcessState), g.wasCanceled())
}

// exitCode maps a wait status to a shell-style exit code: the exit status, or
// 128+n when killed by signal n.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
