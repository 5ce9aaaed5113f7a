package daemon

import (
	"os"
	"syscall"
	"time"
)

// reaper reaps every exited child of the supervisor (shims, and orphans of
// a shim killed from inside the sandbox) and then kills whatever such
// orphans left: nothing runs untracked.
func (s *server) reaper(wake <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-wake:
		case <-t.C:
		}
		lost := false
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
			s.mu.Lock()
			if _, ok := s.shims[p]; ok {
				delete(s.shims, p)
				lost = true
			}
			s.mu.Unlock()
		}
		if lost {
			s.sweepOrphans()
		}
	}
}

// sweepOrphans kills every child of the supervisor that is not a shim, and
// its descendants (they belonged to a shim that was killed).
func (s *server) sweepOrphans() {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	self := os.Getpid()
	parents := procParents()
	s.mu.Lock()
	shims := make(map[int]bool, len(s.shims))
	for p := range s.shims {
		shims[p] = true
	}
	s.mu.Unlock()
	for p, pp := range parents {
		if pp != self || shims[p] {
			continue
		}
		for _, d := range descendants(parents, p) {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
