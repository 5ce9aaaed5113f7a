package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxcore/sandboxcore/internal/runtime/output"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Exec on processes and the process updates (docs/API.md "Processes",
// "exec"): the consumer side of the optional sandbox.ProcessRuntime.

// execWaitStep is how long one wait of a running exec lasts between two
// heartbeats (progress for clients that poll them).
const execWaitStep = time.Second

// processRuntime returns the workspace's runtime and its process
// capability. create: create (or resume) the runtime, as a start does;
// otherwise an existing runtime is taken (Create only when this worker does
// not know it yet: a runtime left by an earlier worker is re-attached).
// Errors: errNoProcesses (ErrCommandRejected) when the runtime has no
// processes.
func (a *Activities) processRuntime(ctx context.Context, wsID string, create bool) (sandboxapi.Workspace, sandbox.ProcessRuntime, error) {
	ws, err := a.workspace(ctx, wsID)
	if err != nil {
		return ws, nil, err
	}
	var rt sandbox.Runtime
	if !create {
		rt, err = a.Runtimes.Get(ctx, sandboxapi.RuntimeIDFor(ws.ID))
	}
	if create || errors.Is(err, sandboxapi.ErrNotFound) {
		rt, err = a.createRuntime(ctx, ws)
	}
	if err != nil {
		return ws, nil, err
	}
	pr, ok := rt.(sandbox.ProcessRuntime)
	if !ok {
		return ws, nil, &noProcessesError{sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "the %s runtime of workspace %s runs no background processes", a.Runtimes.Kind(), ws.ID)}
	}
	if create {
		a.recordRuntime(ctx, ws, rt.ID(), sandbox.RuntimeRunning)
	}
	return ws, pr, nil
}

// noProcessesError is processRuntime's error for a runtime without the
// sandbox.ProcessRuntime capability (a SandboxCommandRejected).
type noProcessesError struct{ error }

func (e *noProcessesError) Unwrap() error { return e.error }

func isNoProcesses(err error) bool {
	var np *noProcessesError
	return errors.As(err, &np)
}

// execSpec is the process an exec update's command runs as.
func execSpec(in wire.ExecActivityInput) sandbox.ProcessSpec {
	req := in.Request
	return sandbox.ProcessSpec{ID: in.ProcessID, Exec: true, Cmd: req.Cmd, Cwd: req.Cwd, Env: req.Env, Network: req.Network,
		Timeout: req.Timeout(), HeadBytes: req.OutputCap() / 2, Lossless: req.Stream, StdinData: req.Stdin}
}

// startExec starts an exec update's command as process in.ProcessID (at
// most once: a retried start finds it) and waits up to in.Wait for it to
// end. Done with the ExecResult when it did; Unsupported (nothing ran) when
// the runtime has no processes. Errors: ErrInvalidArgument,
// ErrRuntimeUnavailable, ErrWorkspaceUnavailable.
func (a *Activities) startExec(ctx context.Context, in wire.ExecActivityInput) (wire.ExecStartResult, error) {
	if in.ProcessID == "" {
		return wire.ExecStartResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec start: no process id")
	}
	ws, pr, err := a.processRuntime(ctx, in.WorkspaceID, true)
	if isNoProcesses(err) {
		return wire.ExecStartResult{Unsupported: true}, nil
	}
	if err != nil {
		return wire.ExecStartResult{}, err
	}
	// The command's network, checked as exec checks it (docs/SECURITY.md
	// "Network modes"): never above the workspace's policy.
	if err := a.commandNetwork("exec", ws, in.Request.Network); err != nil {
		return wire.ExecStartResult{}, err
	}
	// One command of the workspace at a time on this host, whatever
	// session sent it (execlock.go): the start waits for the exec started
	// before it to end.
	unlock, beside, err := a.lockExecUnlessBesideSetup(ctx, ws.ID, in.Request, in.Setup)
	if err != nil {
		return wire.ExecStartResult{}, err
	}
	defer unlock()
	if !beside {
		if err := a.awaitOtherExec(ctx, pr, ws.ID, in.ProcessID); err != nil {
			return wire.ExecStartResult{}, err
		}
	}
	if _, err := pr.StartProcess(ctx, execSpec(in)); err != nil {
		return wire.ExecStartResult{}, err
	}
	if !beside {
		// A command beside the setup is not waited for by the next one:
		// like a background process, it runs on next to later commands.
		a.startedExec(ws.ID, in.ProcessID)
	}
	unlock()
	info, err := pr.WaitProcess(ctx, in.ProcessID, min(max(in.Wait, 0), sandboxapi.MaxProcessReadWait))
	if err != nil {
		return wire.ExecStartResult{}, err
	}
	if !info.Exited || info.Lingering {
		return wire.ExecStartResult{}, nil
	}
	res, done, err := execResult(ctx, pr, in.ProcessID, in.Request)
	if err != nil || !done {
		return wire.ExecStartResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return wire.ExecStartResult{Done: true, Result: res}, nil
}

// execWait is ActivityExec for a command ExecStart started: it waits for
// process in.ProcessID (re-attaching to it when the activity is retried
// after a worker died), heartbeating an ExecProgress every second, and
// returns its ExecResult; it never starts a command. Errors:
// ErrRuntimeUnavailable when the process is gone (the runtime was
// destroyed or its host restarted: the outcome is unknown).
func (a *Activities) execWait(ctx context.Context, in wire.ExecActivityInput) (sandboxapi.ExecResult, error) {
	ws, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ExecResult{}, err
	}
	var last [2]int64
	var progress sandboxapi.ExecProgress
	for {
		info, err := pr.WaitProcess(ctx, in.ProcessID, execWaitStep)
		if errors.Is(err, sandboxapi.ErrNotFound) {
			// Not retried: no attempt can find it again.
			return sandboxapi.ExecResult{}, sandboxapi.NewApplicationError(sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable,
				"exec %s: its command's process is gone (the runtime was destroyed or its host restarted); its outcome is unknown", sandboxapi.Clip(in.Request.Cmd[0], 64)), true)
		}
		if err != nil {
			return sandboxapi.ExecResult{}, err
		}
		if info.Exited && !info.Lingering {
			res, done, err := execResult(ctx, pr, in.ProcessID, in.Request)
			if err != nil {
				return sandboxapi.ExecResult{}, err
			}
			if done {
				a.touch(ctx, ws.ID, false)
				return res, nil
			}
		}
		if activity.IsActivity(ctx) {
			if tot := [2]int64{info.StdoutBytes, info.StderrBytes}; tot != last || progress.UpdateID == "" {
				last = tot
				progress = execProgress(ctx, pr, in, tot)
			}
			activity.RecordHeartbeat(ctx, progress)
		}
		if ctx.Err() != nil {
			return sandboxapi.ExecResult{}, ctx.Err()
		}
	}
}

// execProgress is the newest output of each stream (at most
// sandboxapi.StreamWindowBytes) for clients that poll heartbeat details
// (docs/API.md "Streaming exec output", the older protocol).
func execProgress(ctx context.Context, pr sandbox.ProcessRuntime, in wire.ExecActivityInput, tot [2]int64) sandboxapi.ExecProgress {
	p := sandboxapi.ExecProgress{UpdateID: in.UpdateID, StdoutEnd: tot[0], StderrEnd: tot[1]}
	w := int64(sandboxapi.StreamWindowBytes)
	out, err := pr.ReadProcess(ctx, in.ProcessID, sandbox.ProcessReadRequest{Offset: max(tot[0]-w, 0), Both: true,
		StderrOffset: max(tot[1]-w, 0), MaxBytes: int(w), Peek: true})
	if err != nil {
		return sandboxapi.ExecProgress{UpdateID: in.UpdateID}
	}
	p.Stdout, p.StdoutEnd = out.Data, out.NextOffset
	if out.Stderr != nil {
		p.Stderr, p.StderrEnd = out.Stderr.Data, out.Stderr.NextOffset
	}
	return p
}

// execResult builds an ended exec process's ExecResult (docs/API.md
// "exec"): each stream capped at req.OutputCap() with its head (kept by the
// process, HeadBytes) and tail joined by a marker, the full byte counts,
// exit code 124 and timed_out on its timeout, 130 and cancelled when it was
// cancelled, 137 when the runtime was stopped. done is false while its
// output is still being collected (the streams are not closed yet).
func execResult(ctx context.Context, pr sandbox.ProcessRuntime, id string, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, bool, error) {
	limit := req.OutputCap()
	headCap := limit / 2
	tailCap := limit - headCap
	first, err := pr.ReadProcess(ctx, id, sandbox.ProcessReadRequest{Both: true, MaxBytes: min(limit, sandboxapi.MaxProcessReadBytes), Peek: true})
	if err != nil {
		return sandboxapi.ExecResult{}, false, err
	}
	if !first.EOF || first.Stderr == nil || !first.Stderr.EOF {
		// The first read stopped short of an end: its cap (which counts
		// both streams together, so two streams each under the cap can
		// pass it), or the command runs on. Look at the ends: when both
		// are reached, what the first read left is read by ranges below.
		end, err := pr.ReadProcess(ctx, id, sandbox.ProcessReadRequest{Offset: first.Process.StdoutBytes, Both: true, StderrOffset: first.Process.StderrBytes, Peek: true})
		if err != nil {
			return sandboxapi.ExecResult{}, false, err
		}
		if !end.EOF || end.Stderr == nil || !end.Stderr.EOF {
			return sandboxapi.ExecResult{}, false, nil
		}
		first.Process = end.Process
	}
	info := first.Process
	streams := [2][]byte{first.Data, first.Stderr.Data}
	totals := [2]int64{info.StdoutBytes, info.StderrBytes}
	var kept [2][]byte
	for i, name := range []string{sandboxapi.StreamStdout, sandboxapi.StreamStderr} {
		total := totals[i]
		if total <= int64(limit) && int64(len(streams[i])) == total {
			kept[i] = streams[i]
			continue
		}
		headN := min(total, int64(headCap))
		tailStart := max(headN, total-int64(tailCap))
		head, err := readRange(ctx, pr, id, name, 0, headN)
		if err != nil {
			return sandboxapi.ExecResult{}, false, err
		}
		tail, err := readRange(ctx, pr, id, name, tailStart, total)
		if err != nil {
			return sandboxapi.ExecResult{}, false, err
		}
		kept[i] = output.Join(head, tail, total)
	}
	truncated := totals[0] > int64(limit) || totals[1] > int64(limit)
	if n, ok := pr.(sandbox.ExecNotices); ok {
		// How the runtime treated the command, as its own Exec says it.
		if notice := n.ExecNotice(id, info); notice != "" {
			kept[1] = append(kept[1], notice...)
			totals[1] += int64(len(notice))
		}
	}
	o := output.Outcome{ExitCode: info.ExitCode, Reason: info.ExitReason, Stdout: kept[0], Stderr: kept[1],
		StdoutBytes: totals[0], StderrBytes: totals[1], Truncated: truncated}
	if !info.EndedAt.IsZero() {
		o.Duration = info.EndedAt.Sub(info.StartedAt)
	}
	return o.Result(), true, nil
}

// readRange reads [from, to) of one stream of an ended process (what the
// buffer dropped in between is skipped: the caller's marker counts it).
func readRange(ctx context.Context, pr sandbox.ProcessRuntime, id, stream string, from, to int64) ([]byte, error) {
	var out []byte
	for off := from; off < to; {
		r, err := pr.ReadProcess(ctx, id, sandbox.ProcessReadRequest{Stream: stream, Offset: off, MaxBytes: int(min(to-off, sandboxapi.MaxProcessReadBytes)), Peek: true})
		if err != nil {
			return nil, err
		}
		if len(r.Data) == 0 {
			break
		}
		out = append(out, r.Data[:min(int64(len(r.Data)), to-r.Offset)]...)
		off = r.NextOffset
	}
	return out, nil
}

// ExecCancel kills an exec's process tree (cancel, and hibernate or release
// during a command) and waits up to in.Wait for it to be gone. A process
// that ended already, or that does not exist, is left alone.
func (a *Activities) ExecCancel(ctx context.Context, in wire.ExecCancelInput) (wire.ExecCancelResult, error) {
	_, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return wire.ExecCancelResult{}, err
	}
	if err := pr.CancelProcess(ctx, in.ProcessID); errors.Is(err, sandboxapi.ErrNotFound) {
		return wire.ExecCancelResult{Ended: true}, nil
	} else if err != nil {
		return wire.ExecCancelResult{}, err
	}
	info, err := pr.WaitProcess(ctx, in.ProcessID, min(max(in.Wait, 0), sandboxapi.MaxProcessReadWait))
	if err != nil {
		return wire.ExecCancelResult{}, err
	}
	return wire.ExecCancelResult{Ended: info.Exited && !info.Lingering}, nil
}

// ProcessStart starts a background process (process_start). Errors:
// ErrInvalidArgument, ErrResourceLimit (MaxProcesses live already),
// ErrCommandRejected (the runtime has no processes), ErrRuntimeUnavailable.
func (a *Activities) ProcessStart(ctx context.Context, in wire.OpInput[sandboxapi.ProcessStartInput]) (sandboxapi.ProcessStartResult, error) {
	ws, pr, err := a.processRuntime(ctx, in.WorkspaceID, true)
	if err != nil {
		return sandboxapi.ProcessStartResult{}, err
	}
	if err := a.commandNetwork("process_start", ws, in.Request.Network); err != nil {
		return sandboxapi.ProcessStartResult{}, err
	}
	a.changes.markProcess(ws.ID) // its changes show within OverlapsStaleAfter
	info, err := pr.StartProcess(ctx, wire.ProcessSpecFor(in.Request))
	if err != nil {
		return sandboxapi.ProcessStartResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return sandboxapi.ProcessStartResult{ProcessID: info.ID, Process: info}, nil
}

// ProcessRead reads a process's output (process_read), waiting up to
// in.Wait for new output, or for the process to appear (an exec's process
// exists once its command starts). Errors: ErrNotFound, ErrInvalidArgument.
func (a *Activities) ProcessRead(ctx context.Context, in wire.ProcessReadActivityInput) (sandboxapi.ProcessReadResult, error) {
	ws, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ProcessReadResult{}, err
	}
	r := in.Request
	req := sandbox.ProcessReadRequest{Stream: r.Stream, Offset: r.Offset, MaxBytes: r.MaxBytes, Wait: min(max(in.Wait, 0), sandboxapi.MaxProcessReadWait)}
	if r.StderrOffset != nil {
		req.Both, req.StderrOffset = true, *r.StderrOffset
	}
	deadline := time.Now().Add(req.Wait)
	var out sandbox.ProcessOutput
	for {
		out, err = pr.ReadProcess(ctx, r.ProcessID, req)
		if !errors.Is(err, sandboxapi.ErrNotFound) || time.Until(deadline) <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return sandboxapi.ProcessReadResult{}, ctx.Err()
		case <-time.After(min(20*time.Millisecond, time.Until(deadline))):
		}
		req.Wait = max(time.Until(deadline), 0)
	}
	if err != nil {
		return sandboxapi.ProcessReadResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	stream := r.Stream
	if stream == "" {
		stream = sandboxapi.StreamStdout
	}
	return sandboxapi.ProcessReadResult{
		ProcessID: r.ProcessID, Stream: stream, Data: out.Data, Offset: out.Offset, NextOffset: out.NextOffset,
		DroppedBytes: out.DroppedBytes, Stderr: out.Stderr, EOF: out.EOF && (out.Stderr == nil || out.Stderr.EOF),
		Exited: out.Process.Exited, ExitCode: out.Process.ExitCode, ExitReason: out.Process.ExitReason, Process: out.Process,
	}, nil
}

// ProcessWrite writes to a process's stdin (process_write). Errors:
// ErrNotFound, ErrCommandRejected (stdin closed, the process ended).
func (a *Activities) ProcessWrite(ctx context.Context, in wire.OpInput[sandboxapi.ProcessWriteInput]) (sandboxapi.ProcessWriteResult, error) {
	ws, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ProcessWriteResult{}, err
	}
	n, err := pr.WriteProcess(ctx, in.Request.ProcessID, in.Request.Data, in.Request.CloseStdin)
	if err != nil {
		return sandboxapi.ProcessWriteResult{}, err
	}
	a.touch(ctx, ws.ID, false)
	return sandboxapi.ProcessWriteResult{ProcessID: in.Request.ProcessID, Written: n}, nil
}

// ProcessSignal signals a process (process_signal; default TERM). Errors:
// ErrNotFound, ErrInvalidArgument (an unknown signal), ErrCommandRejected.
func (a *Activities) ProcessSignal(ctx context.Context, in wire.OpInput[sandboxapi.ProcessSignalInput]) (sandboxapi.ProcessResult, error) {
	_, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ProcessResult{}, err
	}
	sig := in.Request.Signal
	if sig == "" {
		sig = "TERM"
	}
	if err := pr.SignalProcess(ctx, in.Request.ProcessID, sig); err != nil {
		return sandboxapi.ProcessResult{}, err
	}
	return sandboxapi.ProcessResult{ProcessID: in.Request.ProcessID}, nil
}

// ProcessResize resizes a PTY process's terminal (process_resize). Errors:
// ErrNotFound, ErrInvalidArgument, ErrCommandRejected (no terminal).
func (a *Activities) ProcessResize(ctx context.Context, in wire.OpInput[sandboxapi.ProcessResizeInput]) (sandboxapi.ProcessResult, error) {
	_, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ProcessResult{}, err
	}
	if err := pr.ResizeProcess(ctx, in.Request.ProcessID, in.Request.Rows, in.Request.Cols); err != nil {
		return sandboxapi.ProcessResult{}, err
	}
	return sandboxapi.ProcessResult{ProcessID: in.Request.ProcessID}, nil
}

// ProcessList lists the runtime's background processes (process_list).
// Errors: ErrCommandRejected when the runtime has no processes.
func (a *Activities) ProcessList(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.ProcessListResult, error) {
	_, pr, err := a.processRuntime(ctx, in.WorkspaceID, false)
	if err != nil {
		return sandboxapi.ProcessListResult{}, err
	}
	list, err := pr.ListProcesses(ctx)
	if err != nil {
		return sandboxapi.ProcessListResult{}, err
	}
	return sandboxapi.ProcessListResult{Processes: list, Support: pr.ProcessSupport()}, nil
}
