package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// streamEvery is how often a running exec publishes its output progress as
// activity heartbeat details (the host workers' MaxHeartbeatThrottleInterval
// lets the SDK send them this often).
const streamEvery = time.Second

// streamTail keeps the last sandboxapi.StreamWindowBytes bytes of one stream
// and its total byte count, in one buffer of twice that size allocated once.
type streamTail struct {
	buf   []byte
	total int64
}

func (s *streamTail) write(p []byte) {
	const w = sandboxapi.StreamWindowBytes
	s.total += int64(len(p))
	if s.buf == nil {
		s.buf = make([]byte, 0, 2*w)
	}
	if len(p) > w {
		p = p[len(p)-w:]
	}
	if len(s.buf)+len(p) > 2*w {
		keep := max(len(s.buf)-w, 0)
		s.buf = s.buf[:copy(s.buf, s.buf[keep:])]
	}
	s.buf = append(s.buf, p...)
}

// tail returns a copy of the newest bytes, at most StreamWindowBytes.
func (s *streamTail) tail() []byte {
	b := s.buf
	if len(b) > sandboxapi.StreamWindowBytes {
		b = b[len(b)-sandboxapi.StreamWindowBytes:]
	}
	return append([]byte(nil), b...)
}

// execStreaming runs req with rt.ExecStream and, while it runs, heartbeats an
// ExecProgress (the newest output of each stream with its absolute offset) so
// a client polling the workflow's pending activity sees output as it comes
// (docs/API.md "Streaming exec output").
//
// keep, when not nil, receives every byte of both streams (kept output).
func execStreaming(ctx context.Context, rt sandbox.Runtime, req sandboxapi.ExecRequest, updateID string, keep outputKeeper) (sandboxapi.ExecResult, error) {
	if !activity.IsActivity(ctx) {
		if keep != nil {
			return rt.ExecStream(ctx, req, func(c sandboxapi.ExecChunk) { keep.Write(c.Stream, c.Data) })
		}
		return rt.Exec(ctx, req)
	}
	var mu sync.Mutex
	var out, errs streamTail
	progress := func() sandboxapi.ExecProgress {
		mu.Lock()
		defer mu.Unlock()
		return sandboxapi.ExecProgress{
			UpdateID: updateID,
			Stdout:   out.tail(), StdoutEnd: out.total,
			Stderr: errs.tail(), StderrEnd: errs.total,
		}
	}
	stop := startHeartbeats(ctx, streamEvery, func() any { return progress() })
	res, err := rt.ExecStream(ctx, req, func(c sandboxapi.ExecChunk) {
		mu.Lock()
		defer mu.Unlock()
		if c.Stream == "stderr" {
			errs.write(c.Data)
		} else {
			out.write(c.Data)
		}
		if keep != nil {
			keep.Write(c.Stream, c.Data)
		}
	})
	stop()
	return res, err
}
