package daemon

import (
	"os"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

// follow runs the started process p: its output pumped into its buffers,
// spec.Stdin written (then stdin closed), its timeout armed (ReasonTimeout),
// its end watched on sh; the shim pool is refilled.
func (s *server) follow(p *proc, sh *shimHandle, spec *supervisor.Spec, readers [2]*os.File) {
	p.readers = readers
	for i, r := range readers {
		if r != nil {
			go s.pump(p, i, r)
		}
	}
	if spec.Stdin != nil && p.stdin != nil && !spec.PTY {
		w := p.stdin
		s.mu.Lock()
		p.stdin = nil
		s.mu.Unlock()
		go func() {
			_, _ = w.Write(spec.Stdin) // EPIPE when the command does not read it all
			_ = w.Close()
		}()
	}
	if spec.TimeoutMS > 0 {
		p.timer = time.AfterFunc(time.Duration(spec.TimeoutMS)*time.Millisecond, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !p.info.Exited {
				s.killLocked(p, supervisor.ReasonTimeout)
			}
		})
	}
	go s.watch(p, sh)
	s.mu.Lock()
	s.refillLocked()
	s.mu.Unlock()
}

// watch follows the shim's reports for p until its tree is empty.
func (s *server) watch(p *proc, sh *shimHandle) {
	for ev := range sh.events {
		s.mu.Lock()
		switch ev.Ev {
		case "exit":
			ws := syscall.WaitStatus(ev.Status)
			code, reason := ws.ExitStatus(), supervisor.ReasonExited
			if ws.Signaled() {
				code, reason = 128+int(ws.Signal()), supervisor.ReasonSignaled
			}
			if p.killed != "" {
				reason = p.killed
			}
			p.info.Exited, p.info.ExitCode, p.info.Reason = true, code, reason
			p.info.EndedMS = time.Now().UnixMilli()
			if p.timer != nil {
				p.timer.Stop()
			}
			p.notify()
		case "done":
			s.treeEndedLocked(p)
			s.recycleShimLocked(sh)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	// The shim died (killed from inside the sandbox): its tree is swept by
	// the reaper.
	s.mu.Lock()
	if !p.info.Exited {
		p.info.Exited, p.info.ExitCode, p.info.Reason = true, 137, supervisor.ReasonLost
		p.info.EndedMS = time.Now().UnixMilli()
		if p.killed != "" {
			p.info.Reason = p.killed
		}
	}
	s.treeEndedLocked(p)
	s.mu.Unlock()
}

// treeEndedLocked records that p's tree is gone; its pipes get drainGrace
// to deliver what is left.
func (s *server) treeEndedLocked(p *proc) {
	p.treeDone, p.shim = true, nil
	if p.stdin != nil && p.stdin != p.master {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	p.notify()
	if p.open[0] || p.open[1] {
		time.AfterFunc(drainGrace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if p.open[0] || p.open[1] {
				for _, r := range p.readers {
					if r != nil {
						_ = r.Close() // ends a pump stuck on a pipe held elsewhere
					}
				}
				p.open = [2]bool{}
				p.notify()
			}
		})
	}
	s.pruneLocked()
}
