package daemon

import (
	"os"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (p *proc) totalLocked(i int) int64 {
	if p.bufs[i] == nil {
		return 0
	}
	return p.bufs[i].end
}

// pump copies one output stream into p's buffer. A foreground stream waits
// while its unread part fills the window (so nothing is ever dropped).
func (s *server) pump(p *proc, i int, r *os.File) {
	defer func() {
		_ = r.Close()
		s.mu.Lock()
		p.open[i] = false
		p.info.Totals[i] = p.bufs[i].end
		p.notify()
		s.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n := len(buf)
		if p.fg || p.lossless {
			s.mu.Lock()
			for {
				room := int64(p.bufs[i].cap) - (p.bufs[i].end - p.acked[i])
				if room > 0 {
					n = int(min(room, int64(len(buf))))
					break
				}
				if p.treeDone && !p.open[i] {
					s.mu.Unlock()
					return
				}
				if p.lossless {
					left := supervisor.LosslessIdle - time.Since(p.lastRead)
					if left <= 0 {
						break // nobody reads: drop the oldest bytes again
					}
					t := time.NewTimer(left)
					ch := p.changed
					s.mu.Unlock()
					select {
					case <-ch:
					case <-t.C:
					}
					t.Stop()
					s.mu.Lock()
					continue
				}
				ch := p.changed
				s.mu.Unlock()
				<-ch
				s.mu.Lock()
			}
			s.mu.Unlock()
		}
		k, err := r.Read(buf[:n])
		if k > 0 {
			s.mu.Lock()
			p.bufs[i].write(buf[:k])
			p.info.Totals[i] = p.bufs[i].end
			p.notify()
			s.mu.Unlock()
		}
		if err != nil {
			return // EOF, EIO from a PTY whose last holder exited, or closed
		}
	}
}

// read returns what p's streams hold from the requested offsets, waiting
// up to req.WaitMS for something new when there is nothing yet.
func (s *server) read(req supervisor.Request, gone <-chan struct{}) (supervisor.Response, []byte, *supervisor.Error) {
	max := req.Max
	if max <= 0 || max > 4<<20 {
		max = 256 << 10
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, supervisor.MaxReadWait)
	deadline := time.Now().Add(wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[req.ID]
	if !ok {
		return supervisor.Response{}, nil, errorf(supervisor.ErrNotFound, "no process %q", sandboxapi.Clip(req.ID, 64))
	}
	if (p.fg || p.lossless) && !req.Peek {
		p.ackLocked(req.Offsets)
	}
	if e := s.awaitOutputLocked(p, req.Offsets, deadline, gone); e != nil {
		return supervisor.Response{}, nil, e
	}
	resp, data := p.chunksLocked(req.Offsets, max, req.MaxTotal)
	info := p.info
	info.TreeRunning = info.Exited && !p.treeDone
	resp.Info = &info
	return resp, data, nil
}

// ackLocked records that a reader of a foreground or lossless process has
// everything before offsets (bounded by what exists), so a pump waiting
// for room in its window may go on. s.mu is held.
func (p *proc) ackLocked(offsets [2]int64) {
	if p.lossless {
		p.lastRead = time.Now()
	}
	for i := range 2 {
		if b := p.bufs[i]; b != nil && offsets[i] != supervisor.NoStream && offsets[i] > p.acked[i] {
			p.acked[i] = min(offsets[i], b.end)
			p.notify() // a waiting pump may go on
		}
	}
}

// awaitOutputLocked waits, releasing s.mu meanwhile, until p has bytes
// past offsets, has ended with everything it started, has exited since the
// call began, or deadline passes. ErrState when gone closes first (the
// client went away). s.mu is held on entry and on return.
func (s *server) awaitOutputLocked(p *proc, offsets [2]int64, deadline time.Time, gone <-chan struct{}) *supervisor.Error {
	exitedBefore := p.info.Exited
	for {
		has := false
		for i := range 2 {
			if b := p.bufs[i]; b != nil && offsets[i] != supervisor.NoStream && b.end > offsets[i] {
				has = true
			}
		}
		ended := !p.open[0] && !p.open[1] && p.info.Exited && p.treeDone
		if has || ended || (p.info.Exited && !exitedBefore) {
			return nil
		}
		if more, e := s.awaitChangeLocked(p, deadline, gone); !more {
			return e
		}
	}
}

// awaitChangeLocked waits, releasing s.mu meanwhile, until p changes
// (more is true: look again), deadline passes (more false, no error) or
// gone closes (the client went away: ErrState). s.mu is held on entry and
// on return.
func (s *server) awaitChangeLocked(p *proc, deadline time.Time, gone <-chan struct{}) (more bool, e *supervisor.Error) {
	left := time.Until(deadline)
	if left <= 0 {
		return false, nil
	}
	ch := p.changed
	s.mu.Unlock()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-gone:
		s.mu.Lock()
		return false, errorf(supervisor.ErrState, "the client went away")
	}
	s.mu.Lock()
	return true, nil
}

// chunksLocked reads p's two streams from offsets: at most max bytes each
// and maxTotal (when > 0) together, a NoStream offset reported at the
// stream's end without data. Each chunk says what was dropped before it
// and whether nothing can follow (EOF). s.mu is held.
func (p *proc) chunksLocked(offsets [2]int64, max, maxTotal int) (supervisor.Response, []byte) {
	resp := supervisor.Response{}
	var data []byte
	for i := range 2 {
		b := p.bufs[i]
		c := supervisor.Chunk{Offset: offsets[i]}
		if b != nil {
			var d []byte
			n := max
			if maxTotal > 0 {
				n = min(n, maxTotal-len(data))
			}
			if c.Offset == supervisor.NoStream {
				c.Offset = b.end
			} else {
				d, c.Offset, c.Dropped = b.readAt(c.Offset, n)
			}
			c.Len = len(d)
			data = append(data, d...)
			// Nothing follows: the stream is closed, the process ended (its
			// exit is known before its last byte is reported read) and so
			// did everything it started (an exec returns once its whole
			// tree is gone).
			c.EOF = !p.open[i] && p.info.Exited && p.treeDone && c.Offset+int64(c.Len) == b.end
		} else {
			c.EOF = p.info.Exited && p.treeDone
		}
		resp.Chunks[i] = c
	}
	return resp, data
}
