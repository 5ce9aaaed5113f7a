package daemon

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

// exitWhenIdle ends the supervisor (and so a sandbox whose init it is)
// once it has held no process, no record of one and no connection for
// idle: a sandbox whose worker never came back does not stay forever, and
// nothing is lost (the next command builds a new one).
func (s *server) exitWhenIdle(idle time.Duration) {
	for {
		time.Sleep(min(idle/4, 30*time.Second))
		s.mu.Lock()
		quiet := len(s.procs) == 0 && s.conns == 0 && time.Since(s.lastUse) >= idle
		s.mu.Unlock()
		if quiet {
			fmt.Fprintln(os.Stderr, "sandbox-supervisor: idle for", idle, "- exiting")
			os.Exit(0)
		}
	}
}

// shutdown kills every tree (recording ReasonStopped), waits up to grace
// for them and their output, and returns the background processes with
// their buffers. The caller exits after replying.
func (s *server) shutdown(grace time.Duration) []supervisor.Final {
	if grace <= 0 || grace > time.Minute {
		grace = 5 * time.Second
	}
	s.mu.Lock()
	s.stopping = true
	for _, p := range s.procs {
		s.killLocked(p, supervisor.ReasonStopped)
	}
	deadline := time.Now().Add(grace)
	for _, p := range s.procs {
		for !(p.treeDone && !p.open[0] && !p.open[1]) && time.Now().Before(deadline) {
			ch := p.changed
			s.mu.Unlock()
			select {
			case <-ch:
			case <-time.After(time.Until(deadline)):
			}
			s.mu.Lock()
		}
	}
	out := []supervisor.Final{}
	ids := slices.Clone(s.order)
	sort.SliceStable(ids, func(i, j int) bool { return s.procs[ids[i]].info.StartedMS < s.procs[ids[j]].info.StartedMS })
	for _, id := range ids {
		p := s.procs[id]
		f := supervisor.Final{Info: p.info}
		if !f.Info.Exited {
			f.Info.Exited, f.Info.ExitCode, f.Info.Reason = true, 137, supervisor.ReasonStopped
			f.Info.EndedMS = time.Now().UnixMilli()
		}
		for i, b := range p.bufs {
			if b != nil {
				from := max(b.start, b.end-supervisor.ArchiveTailBytes)
				f.Starts[i] = from
				f.Data[i] = b.read(from, int(b.end-from))
				f.Info.Totals[i] = b.end
				if len(b.head) > 0 && from > 0 {
					f.Heads[i] = slices.Clone(b.head)
				}
			}
		}
		out = append(out, f)
	}
	s.mu.Unlock()
	return out
}
