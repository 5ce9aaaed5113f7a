package daemon

import (
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (s *server) write(id string, data []byte, closeIn bool) (int, *supervisor.Error) {
	s.mu.Lock()
	p, ok := s.procs[id]
	var w *os.File
	if ok {
		w = p.stdin
	}
	isPTY := ok && p.master != nil
	s.mu.Unlock()
	if !ok {
		return 0, errorf(supervisor.ErrNotFound, "no process %q", sandboxapi.Clip(id, 64))
	}
	if w == nil {
		return 0, errorf(supervisor.ErrState, "process %s: stdin is closed (start it with stdin open)", id)
	}
	_ = w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	n, err := w.Write(data)
	if err == nil && closeIn {
		if isPTY {
			_, err = w.Write([]byte{4}) // end of file for the terminal's reader
		} else {
			s.mu.Lock()
			if p.stdin == w {
				p.stdin = nil
			}
			s.mu.Unlock()
			err = w.Close()
		}
	}
	if err != nil {
		return n, errorf(supervisor.ErrState, "process %s: stdin: %v", id, err)
	}
	return n, nil
}

func (s *server) signal(id string, sig syscall.Signal, reason string) *supervisor.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return errorf(supervisor.ErrNotFound, "no process %q", sandboxapi.Clip(id, 64))
	}
	if reason != "" && (reason != supervisor.ReasonCanceled || sig != syscall.SIGKILL) {
		return errorf(supervisor.ErrInvalid, "signal: reason %q: only %q, with SIGKILL", sandboxapi.Clip(reason, 64), supervisor.ReasonCanceled)
	}
	if p.treeDone || p.shim == nil {
		return nil // nothing left to signal
	}
	if sig == syscall.SIGKILL {
		s.killLocked(p, reason)
		return nil
	}
	p.shim.send(shimMsg{Op: "signal", Sig: int(sig)}, nil)
	return nil
}

func (s *server) resize(id string, rows, cols uint16) *supervisor.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return errorf(supervisor.ErrNotFound, "no process %q", sandboxapi.Clip(id, 64))
	}
	if p.master == nil {
		return errorf(supervisor.ErrState, "process %s has no terminal", id)
	}
	if rows == 0 || cols == 0 {
		return errorf(supervisor.ErrInvalid, "rows and cols must be positive")
	}
	if err := pty.Setsize(p.master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return errorf(supervisor.ErrState, "process %s: resize: %v", id, err)
	}
	return nil
}

// killLocked kills p's whole tree, recording reason (when not empty) as
// why it ended.
func (s *server) killLocked(p *proc, reason string) {
	if reason != "" && p.killed == "" && !p.info.Exited {
		p.killed = reason
	}
	if p.shim != nil && !p.treeDone {
		p.shim.send(shimMsg{Op: "kill"}, nil)
	}
}

// wait waits up to waitMS (at most MaxReadWait) for process id's tree to
// end and its streams to close, and returns the process as it is then.
func (s *server) wait(id string, waitMS int64, gone <-chan struct{}) (supervisor.Info, *supervisor.Error) {
	deadline := time.Now().Add(min(time.Duration(waitMS)*time.Millisecond, supervisor.MaxReadWait))
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return supervisor.Info{}, errorf(supervisor.ErrNotFound, "no process %q", sandboxapi.Clip(id, 64))
	}
	for !(p.info.Exited && p.treeDone && !p.open[0] && !p.open[1]) {
		more, e := s.awaitChangeLocked(p, deadline, gone)
		if e != nil {
			return supervisor.Info{}, e
		}
		if !more {
			break
		}
	}
	info := p.info
	info.TreeRunning = info.Exited && !p.treeDone
	return info, nil
}

// list returns the background processes (exec processes are not listed).
func (s *server) list() []supervisor.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []supervisor.Info{}
	for _, id := range s.order {
		p := s.procs[id]
		if p.info.Exec {
			continue
		}
		info := p.info
		info.TreeRunning = info.Exited && !p.treeDone
		out = append(out, info)
	}
	return out
}

// pruneLocked forgets the oldest ended background processes beyond
// KeptExited, and the oldest ended exec processes beyond KeptExec.
func (s *server) pruneLocked() {
	var ended, execs []string
	for _, id := range s.order {
		if p := s.procs[id]; p.treeDone && !p.open[0] && !p.open[1] {
			if p.info.Exec {
				execs = append(execs, id)
			} else {
				ended = append(ended, id)
			}
		}
	}
	var drop []string
	if n := len(ended) - supervisor.KeptExited; n > 0 {
		drop = append(drop, ended[:n]...)
	}
	if n := len(execs) - supervisor.KeptExec; n > 0 {
		drop = append(drop, execs[:n]...)
	}
	for _, id := range drop {
		delete(s.procs, id)
	}
	if len(drop) > 0 {
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return slices.Contains(drop, x) })
	}
}

// forgetWhenDone drops a foreground process once its tree and streams end.
func (s *server) forgetWhenDone(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !(p.treeDone && !p.open[0] && !p.open[1]) {
		// Its owner is gone: nobody reads, so let the pumps run on.
		p.acked = [2]int64{p.bufs[0].end, p.totalLocked(1)}
		p.notify()
		ch := p.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	delete(s.procs, p.info.ID)
}
