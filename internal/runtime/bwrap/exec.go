package bwrap

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// DrainGrace bounds how long an exec call waits, after bwrap has exited or
// been killed, for its output pipes; then they are closed and the call
// returns. It is also the exec.Cmd WaitDelay.
const DrainGrace = 500 * time.Millisecond

// readChunk is the size of one read from an output pipe (and so the largest
// ExecChunk.Data handed to onChunk).
const readChunk = 32 << 10

// shWrapper runs as "/bin/sh -c shWrapper sandboxcore argv…" inside the
// sandbox: sh gives the usual exit codes for a missing (127) or
// non-executable (126) command, which bwrap's own execvp would report as 1.
const shWrapper = `unset PWD; exec "$@"`

// statusFD is the descriptor bwrap writes its JSON status to (--json-status-fd).
const statusFD = 3

// envList merges layers (later wins) into sorted "KEY=value" entries.
func envList(layers ...map[string]string) []string {
	m := map[string]string{}
	for _, l := range layers {
		maps.Copy(m, l)
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// group tracks bwrap's process group so that it is only ever signalled while
// the leader is unreaped (its pgid cannot have been reused then).
type group struct {
	mu       sync.Mutex
	exited   bool
	canceled bool
}

func (g *group) cancel(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exited {
		return os.ErrProcessDone
	}
	g.canceled = true
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return nil
}

func (g *group) leaderExited(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exited = true
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func (g *group) wasCanceled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.canceled
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

// run runs req in a sandbox laid out by cfg under killCtx (derived from
// callerCtx; cancelled with errHalted by Stop/Destroy) and classifies the
// outcome.
func (p *Provider) run(killCtx, callerCtx context.Context, cfg sandboxConfig, env []string, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	start := time.Now()
	limit := req.OutputCap()
	s := &streams{stdout: output.NewCapped(limit), stderr: output.NewCapped(limit), onChunk: onChunk}
	if strings.HasPrefix(req.Cmd[0], "-") {
		// sh's exec would take it for an option.
		s.emit("stderr", s.stderr, []byte("sandbox: "+req.Cmd[0]+": command not found\n"))
		return s.result(127, false, start), nil
	}
	args := p.args(cfg, env)
	args = append(args[:len(args)-1:len(args)-1], "--json-status-fd", strconv.Itoa(statusFD), "--", "/bin/sh", "-c", shWrapper, "sandboxcore")
	args = append(args, req.Cmd...)

	runCtx, cancel := context.WithTimeout(killCtx, req.Timeout())
	defer cancel()
	classify := func(code int, killed bool) (sandbox.ExecResult, error) {
		if killed {
			switch {
			case callerCtx.Err() != nil:
				res := s.result(code, false, start)
				if errors.Is(callerCtx.Err(), context.DeadlineExceeded) {
					return res, wrapErr(sandbox.ErrTimeout, callerCtx.Err(), "exec %s", req.Cmd[0])
				}
				return res, wrapErr(sandbox.ErrRuntimeUnavailable, callerCtx.Err(), "exec %s", req.Cmd[0])
			case errors.Is(context.Cause(killCtx), errHalted):
				return s.result(code, false, start), nil
			case errors.Is(runCtx.Err(), context.DeadlineExceeded):
				return s.result(124, true, start), nil
			}
		}
		return s.result(code, false, start), nil
	}

	var g group
	cmd := exec.CommandContext(runCtx, p.bin, args...)
	cmd.Env = []string{} // bwrap itself needs nothing from the worker's environment
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cfg.cred, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return g.cancel(cmd.Process.Pid) }
	cmd.WaitDelay = DrainGrace

	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			_ = f.Close()
		}
		closers = nil
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	defer closeAll()
	outR, outW, err := pipe()
	if err != nil {
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	errR, errW, err := pipe()
	if err != nil {
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	stR, stW, err := pipe()
	if err != nil {
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{stW} // fd 3 = statusFD
	var inR, inW *os.File
	if req.Stdin != nil {
		if inR, inW, err = pipe(); err != nil {
			return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec: pipe")
		}
		cmd.Stdin = inR
	}

	err = cmd.Start()
	// The child holds its own copies of these ends now.
	_ = outW.Close()
	_ = errW.Close()
	_ = stW.Close()
	if inR != nil {
		_ = inR.Close()
	}
	if err != nil {
		if runCtx.Err() != nil {
			return classify(137, true)
		}
		return sandbox.ExecResult{}, wrapErr(sandbox.ErrRuntimeUnavailable, err, "exec %s: start bwrap", req.Cmd[0])
	}
	pid := cmd.Process.Pid

	var wg sync.WaitGroup
	wg.Add(2)
	go s.pump("stdout", s.stdout, outR, &wg)
	go s.pump("stderr", s.stderr, errR, &wg)
	status := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(stR, 64<<10))
		status <- b
	}()
	if inW != nil {
		go func() {
			_, _ = inW.Write(req.Stdin) // EPIPE when the command does not read it all
			_ = inW.Close()
		}()
	}

	var waitErr error
	if waitExit(pid) == nil {
		g.leaderExited(pid)
		waitErr = cmd.Wait()
	} else {
		waitErr = cmd.Wait()
		g.leaderExited(pid)
	}
	if inW != nil {
		_ = inW.Close()
	}
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	var st []byte
	select {
	case <-drained:
		select {
		case st = <-status:
		case <-time.After(DrainGrace):
		}
	case <-time.After(DrainGrace):
	}
	closeAll() // unblocks the pumps and the status reader
	<-drained

	if cmd.ProcessState == nil {
		return s.result(-1, false, start), wrapErr(sandbox.ErrRuntimeUnavailable, waitErr, "exec %s: wait", req.Cmd[0])
	}
	code := exitCode(cmd.ProcessState)
	if g.wasCanceled() {
		return classify(code, true)
	}
	if !bytes.Contains(st, []byte(`"exit-code"`)) {
		// bwrap failed before the command ran; its message is on stderr.
		return s.result(code, false, start), sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "bubblewrap could not build the sandbox (exit %d): %s",
			code, clipN(strings.TrimSpace(string(s.stderr.Bytes())), 400))
	}
	return classify(code, false)
}

// exitCode maps a wait status to a shell-style exit code: the exit status, or
// 128+n when killed by signal n.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
