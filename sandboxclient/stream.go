package sandboxclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// StreamPoll is how often ExecStream polls the session's pending exec
// activity for output progress.
const StreamPoll = 300 * time.Millisecond

// ExecStream runs a command like Exec and hands its output to onChunk while
// it runs (calls are serialized; chunks arrive about once a second). It polls
// the running exec activity's heartbeat details (sandboxapi.ExecProgress) with
// DescribeWorkflowExecution, which adds nothing to the workflow's history. A
// stream that fell more than sandboxapi.StreamWindowBytes behind gets a
// "[N bytes not streamed]" marker chunk; output a capped result cut is not
// replayed. The returned result is Exec's.
func (s *Session) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	if err := checkExecPayload(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	id := updateIDFrom(ctx)
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = "exec-" + hex.EncodeToString(b[:])
		ctx = WithUpdateID(ctx, id)
	}
	type outcome struct {
		res sandboxapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var r sandboxapi.ExecResult
		err := s.update(ctx, sandboxapi.UpdateExec, req, &r)
		done <- outcome{r, err}
	}()
	var outAt, errAt int64
	emit := func(stream string, data []byte, end int64, at *int64) {
		start := end - int64(len(data))
		if end <= *at {
			return
		}
		if start > *at {
			onChunk(sandboxapi.ExecChunk{Stream: stream, Data: fmt.Appendf(nil, "\n...[%d bytes not streamed]...\n", start-*at)})
			*at = start
		}
		onChunk(sandboxapi.ExecChunk{Stream: stream, Data: data[*at-start:]})
		*at = end
	}
	poll := time.NewTicker(StreamPoll)
	defer poll.Stop()
	for {
		select {
		case o := <-done:
			if o.err == nil && !o.res.Truncated {
				emit("stdout", o.res.Stdout, o.res.StdoutBytes, &outAt)
				emit("stderr", o.res.Stderr, o.res.StderrBytes, &errAt)
			}
			return o.res, o.err
		case <-poll.C:
			if p, ok := s.progress(ctx, id); ok {
				emit("stdout", p.Stdout, p.StdoutEnd, &outAt)
				emit("stderr", p.Stderr, p.StderrEnd, &errAt)
			}
		}
	}
}

// progress returns the heartbeat details of the pending exec activity that
// serves update id, if any.
func (s *Session) progress(ctx context.Context, id string) (sandboxapi.ExecProgress, bool) {
	d, err := s.c.tc.DescribeWorkflowExecution(ctx, s.wfID, "")
	if err != nil {
		return sandboxapi.ExecProgress{}, false
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() != sandboxapi.ExecActivityType || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p sandboxapi.ExecProgress
		payloads := pa.GetHeartbeatDetails().GetPayloads()
		if len(payloads) == 0 || s.c.dc.FromPayload(payloads[0], &p) != nil {
			continue
		}
		if p.UpdateID == id {
			return p, true
		}
	}
	return sandboxapi.ExecProgress{}, false
}
