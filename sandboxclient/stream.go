package sandboxclient

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// StreamPoll is how often ExecStream polls the session's pending exec
// activity for output progress on a runtime without processes (the older
// protocol, docs/API.md "Streaming exec output").
const StreamPoll = 300 * time.Millisecond

// streamReadWait is how long one streaming read waits for new output.
const streamReadWait = 5 * time.Second

// ExecStream runs a command like Exec and hands its output to onChunk while
// it runs (calls are serialized): every byte of stdout and of stderr
// exactly once and in order, however fast the command writes (docs/API.md
// "Streaming exec output"). It sends the exec with Stream set (the command
// waits while its unread output fills the process buffer) and reads the
// command's process, sandboxapi.ExecProcessID, through the workspace's
// stream workflow (StreamRead) from the offsets it has printed. On a
// runtime without processes it falls back to polling the exec activity's
// heartbeat details, which can skip bursts (a "[N bytes not streamed]"
// marker chunk says how many); so does an exec with KeepOutput. When ctx ends first the command is
// cancelled as by Exec. The returned result is Exec's.
func (s *Session) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	if err := checkExecPayload(req); err != nil {
		return sandboxapi.ExecResult{}, err
	}
	id := execUpdateID(ctx)
	req.Stream = true
	h, err := s.rpc.Send(ctx, sandboxapi.UpdateExec, id, req)
	if err != nil {
		if ctx.Err() != nil {
			// It may have reached the session before ctx ended.
			return s.rpc.Abandon(ctx, id), ctx.Err()
		}
		return sandboxapi.ExecResult{}, FromTemporal(err)
	}
	done := make(chan execOutcome, 1)
	go func() {
		r, err := s.rpc.AwaitExec(ctx, h, id)
		done <- execOutcome{r, execError(ctx, err)}
	}()
	if req.KeepOutput {
		// The exec activity runs a command whose output is kept, not a
		// process (docs/API.md "Kept output"): the older protocol.
		return s.pollProgress(ctx, id, done, onChunk)
	}
	return s.streamProcess(ctx, id, done, onChunk)
}

// streamProcess hands onChunk the output of the exec id's process, read
// through the stream workflow from the offsets handed so far, until its
// end (EOF), then returns the exec's outcome from done. An exec that never
// ran as a process hands the output its result holds; a runtime without
// processes falls back to pollProgress.
func (s *Session) streamProcess(ctx context.Context, id string, done <-chan execOutcome, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	var ended *execOutcome
	finish := func() (sandboxapi.ExecResult, error) {
		if ended == nil {
			o := <-done
			ended = &o
		}
		return ended.res, ended.err
	}
	pid := sandboxapi.ExecProcessID(s.wsID, id)
	var outAt, errAt int64
	for {
		if ended == nil {
			select {
			case o := <-done:
				ended = &o
			default:
			}
		}
		if ctx.Err() != nil {
			return finish()
		}
		errOff := errAt
		r, err := s.StreamRead(ctx, sandboxapi.ProcessReadInput{ProcessID: pid, Offset: outAt, StderrOffset: &errOff,
			MaxBytes: sandboxapi.MaxProcessReadBytes, WaitMS: int(streamReadWait / time.Millisecond)})
		switch {
		case err == nil:
			outAt = emitChunk(onChunk, "stdout", sandboxapi.ProcessChunk{Data: r.Data, NextOffset: r.NextOffset, DroppedBytes: r.DroppedBytes})
			if r.Stderr != nil {
				errAt = emitChunk(onChunk, "stderr", *r.Stderr)
			}
			if r.EOF {
				return finish()
			}
		case sandboxapi.IsCommandRejected(err) && ended != nil:
			if ended.err == nil && !ended.res.Truncated {
				emitResult(ended.res, onChunk)
			}
			return finish()
		case sandboxapi.IsCommandRejected(err):
			// The runtime runs no processes: the older protocol.
			return s.pollProgress(ctx, id, done, onChunk)
		case sandboxapi.IsNotFound(err) && ended != nil:
			// The command never ran as a process (cancelled while queued)
			// or its record is gone: what the result holds is all there is.
			if ended.err == nil && !ended.res.Truncated && outAt == 0 && errAt == 0 {
				emitResult(ended.res, onChunk)
			}
			return finish()
		case sandboxapi.IsNotFound(err):
			// Not started yet (queued behind another command).
		default:
			if ctx.Err() != nil || ended != nil {
				return finish()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// emitChunk hands c's bytes of stream to onChunk, after a marker chunk
// saying how many bytes were not streamed when some were dropped, and
// returns the offset to read from next.
func emitChunk(onChunk func(sandboxapi.ExecChunk), stream string, c sandboxapi.ProcessChunk) int64 {
	if c.DroppedBytes > 0 {
		onChunk(sandboxapi.ExecChunk{Stream: stream, Data: fmt.Appendf(nil, "\n...[%d bytes not streamed]...\n", c.DroppedBytes)})
	}
	if len(c.Data) > 0 {
		onChunk(sandboxapi.ExecChunk{Stream: stream, Data: c.Data})
	}
	return c.NextOffset
}

// emitResult hands a result's output to onChunk.
func emitResult(res sandboxapi.ExecResult, onChunk func(sandboxapi.ExecChunk)) {
	if len(res.Stdout) > 0 {
		onChunk(sandboxapi.ExecChunk{Stream: "stdout", Data: res.Stdout})
	}
	if len(res.Stderr) > 0 {
		onChunk(sandboxapi.ExecChunk{Stream: "stderr", Data: res.Stderr})
	}
}

// pollProgress streams by polling the running exec activity's heartbeat
// details (sandboxapi.ExecProgress) until the exec returns on done.
func (s *Session) pollProgress(ctx context.Context, id string, done <-chan execOutcome, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
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

// execOutcome is an exec update's outcome.
type execOutcome struct {
	res sandboxapi.ExecResult
	err error
}
