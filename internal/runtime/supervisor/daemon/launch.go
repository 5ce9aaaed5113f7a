package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/creack/pty"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (s *server) newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return s.idPrefix + hex.EncodeToString(b[:])
}

// start launches spec on a free shim; a spec naming a process the
// supervisor holds returns that one (existing).
func (s *server) start(spec *supervisor.Spec) (p *proc, existing bool, e *supervisor.Error) {
	if spec == nil || len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, false, errorf(supervisor.ErrInvalid, "start: empty command")
	}
	if spec.ID != "" {
		if spec.Foreground || !supervisor.IDPattern.MatchString(spec.ID) {
			return nil, false, errorf(supervisor.ErrInvalid, "start: id %q: want %s on a background process", sandboxapi.Clip(spec.ID, 64), supervisor.IDPattern)
		}
		s.idMu.Lock()
		defer s.idMu.Unlock()
		s.mu.Lock()
		old, ok := s.procs[spec.ID]
		s.mu.Unlock()
		if ok {
			return old, true, nil
		}
	}
	p, e = s.launch(spec)
	return p, false, e
}

// launch starts spec on a free shim: admitted (admitLocked), given a shim,
// its stdio (openStdio) and buffers (bufferSizes), spawned; a command the
// shim could not start is recorded as ended (startFailed), a started one
// is followed (follow).
func (s *server) launch(spec *supervisor.Spec) (*proc, *supervisor.Error) {
	s.mu.Lock()
	if e := s.admitLocked(spec); e != nil {
		s.mu.Unlock()
		return nil, e
	}
	sh := s.takeShimLocked()
	s.mu.Unlock()
	if sh == nil {
		var err error
		if sh, err = s.newShim(); err != nil {
			return nil, errorf(supervisor.ErrInternal, "start: %v", err)
		}
	}

	env := spec.Env
	if spec.InheritEnv {
		env = mergeEnv(s.inherit, spec.Env)
	}
	id := spec.ID
	if id == "" {
		id = s.newID()
	}
	p := &proc{
		info: supervisor.Info{ID: id, Tag: spec.Tag, Argv: slices.Clone(spec.Argv), PTY: spec.PTY, Exec: spec.Exec, StartedMS: time.Now().UnixMilli()},
		fg:   spec.Foreground, changed: make(chan struct{}), shim: sh,
		lossless: spec.Lossless && !spec.Foreground, lastRead: time.Now(),
	}
	capacity, head := bufferSizes(spec, s.bufBytes)
	child, readers, e := openStdio(spec, p, capacity, head)
	if e != nil {
		s.releaseShim(sh)
		return nil, e
	}
	started, err := sh.spawn(shimMsg{Op: "spawn", Argv: spec.Argv, Env: env, Dir: spec.Dir, PTY: spec.PTY, KillOnExit: spec.Foreground || spec.Exec, NoFileGrowth: spec.NoFileGrowth},
		[]int{int(child[0].Fd()), int(child[1].Fd()), int(child[2].Fd())})
	for i, f := range child {
		if f != nil && (i == 0 || f != child[i-1]) {
			_ = f.Close()
		}
	}
	if err != nil {
		for _, f := range readers {
			if f != nil && f != p.master {
				_ = f.Close()
			}
		}
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		s.retireShim(sh)
		return nil, errorf(supervisor.ErrInternal, "start: %v", err)
	}
	s.mu.Lock()
	s.procs[p.info.ID] = p
	if !p.fg {
		s.order = append(s.order, p.info.ID)
	}
	s.mu.Unlock()
	if started.Ev == "failed" {
		s.startFailed(p, sh, spec, started, readers)
		return p, nil
	}
	p.info.Pid = started.Pid
	s.follow(p, sh, spec, readers)
	return p, nil
}

// admitLocked refuses a new process while the runtime is stopping
// (ErrState) and a background process beyond maxProcs live ones
// (ErrLimit; foreground commands and execs do not count, nor do processes
// whose tree has ended). s.mu is held.
func (s *server) admitLocked(spec *supervisor.Spec) *supervisor.Error {
	if s.stopping {
		return errorf(supervisor.ErrState, "the runtime is stopping")
	}
	if spec.Foreground || spec.Exec {
		return nil
	}
	live := 0
	for _, p := range s.procs {
		if !p.fg && !p.info.Exec && !p.treeDone {
			live++
		}
	}
	if live >= s.maxProcs {
		return errorf(supervisor.ErrLimit, "%d background processes are running, the most a runtime may have", s.maxProcs)
	}
	return nil
}

// bufferSizes returns the output ring's capacity and kept head of a
// process of spec on a supervisor buffering bufBytes per stream: a
// foreground command keeps a window of foregroundWindow (its reader drains
// it) and no head; a lossless process (an exec's) twice bufBytes; the head
// asked for is bounded by bufBytes.
func bufferSizes(spec *supervisor.Spec, bufBytes int) (capacity, head int) {
	capacity = bufBytes
	switch {
	case spec.Foreground:
		capacity = foregroundWindow
	case spec.Lossless:
		capacity = 2 * bufBytes
	}
	if !spec.Foreground {
		head = min(max(spec.HeadBytes, 0), bufBytes)
	}
	return capacity, head
}

// openStdio makes p's standard streams: a terminal (sized spec.Rows ×
// spec.Cols, 24×80 when unset) as all three with its master as p's one
// output and stdin; otherwise a pipe per output stream, and a stdin pipe
// when spec gives stdin or keeps it open (a background process), else
// /dev/null. child are the ends the process gets, readers p's output ends.
// On an error everything opened is closed (ErrInternal).
func openStdio(spec *supervisor.Spec, p *proc, capacity, head int) (child [3]*os.File, readers [2]*os.File, e *supervisor.Error) {
	closeAll := func() {
		for _, f := range append(child[:], readers[:]...) {
			if f != nil {
				_ = f.Close()
			}
		}
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
	}
	if spec.PTY {
		master, slave, err := pty.Open()
		if err != nil {
			return child, readers, errorf(supervisor.ErrInternal, "start: terminal: %v", err)
		}
		rows, cols := spec.Rows, spec.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		_ = pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols})
		child = [3]*os.File{slave, slave, slave}
		readers[0] = master
		p.master, p.stdin = master, master
		p.bufs[0] = newRing(capacity, head)
		p.open[0] = true
		return child, readers, nil
	}
	for i := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return child, readers, errorf(supervisor.ErrInternal, "start: pipe: %v", err)
		}
		readers[i], child[i+1] = r, w
		p.bufs[i] = newRing(capacity, head)
		p.open[i] = true
	}
	if spec.Stdin != nil || (spec.OpenStdin && !spec.Foreground) {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return child, readers, errorf(supervisor.ErrInternal, "start: pipe: %v", err)
		}
		child[0], p.stdin = r, w
		return child, readers, nil
	}
	dn, err := os.Open(os.DevNull)
	if err != nil {
		closeAll()
		return child, readers, errorf(supervisor.ErrInternal, "start: %v", err)
	}
	child[0] = dn
	return child, readers, nil
}

// startFailed records p, which the shim could not start (command not
// found, not executable), as ended the way a shell reports it: the shim's
// code, and "sandbox: <cmd>: <reason>" on stderr (the terminal with a PTY).
// The shim goes back to the idle pool.
func (s *server) startFailed(p *proc, sh *shimHandle, spec *supervisor.Spec, started shimMsg, readers [2]*os.File) {
	for _, f := range readers {
		if f != nil {
			_ = f.Close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	msg := "sandbox: " + spec.Argv[0] + ": " + started.Msg + "\n"
	idx := 1
	if spec.PTY {
		idx = 0
	}
	p.bufs[idx].write([]byte(msg))
	p.open = [2]bool{}
	p.info.Exited, p.info.ExitCode, p.info.Reason, p.info.Message = true, started.Code, supervisor.ReasonStartErr, started.Msg
	p.info.EndedMS = time.Now().UnixMilli()
	p.treeDone, p.shim = true, nil
	p.info.Totals = [2]int64{p.bufs[0].end, p.totalLocked(1)}
	p.notify()
	s.pruneLocked()
	s.recycleShimLocked(sh)
}

// mergeEnv returns base overridden by over (KEY=value lists).
func mergeEnv(base, over []string) []string {
	m := map[string]string{}
	var keys []string
	for _, l := range [][]string{base, over} {
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
			m[k] = v
		}
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out
}
