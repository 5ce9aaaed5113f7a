package sandboxclient

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/sessionrpc"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ProcessStart starts a background process (docs/API.md "Processes") and
// returns its id at once. Refused before sending: a command, environment
// or cwd that is not valid UTF-8 (ErrInvalidArgument,
// ErrInvalidWorkspacePath). Errors: ErrResourceLimit beyond
// sandboxapi.MaxProcesses live processes, ErrCommandRejected when the
// workspace's runtime runs no background processes.
func (s *Session) ProcessStart(ctx context.Context, in sandboxapi.ProcessStartInput) (sandboxapi.ProcessStartResult, error) {
	if err := checkExecPayload(sandboxapi.ExecRequest{Cmd: in.Cmd, Env: in.Env, Cwd: in.Cwd}); err != nil {
		return sandboxapi.ProcessStartResult{}, err
	}
	if err := requireUTF8(sandboxapi.ErrInvalidArgument, "tag", in.Tag); err != nil {
		return sandboxapi.ProcessStartResult{}, err
	}
	return Call(ctx, s, sandboxapi.OpProcessStart, in)
}

// ProcessRead reads a process's output through the session (process_read):
// from in.Offset, waiting up to in.WaitMS for new output. For long streams
// use StreamRead, which keeps the session's history small.
func (s *Session) ProcessRead(ctx context.Context, in sandboxapi.ProcessReadInput) (sandboxapi.ProcessReadResult, error) {
	return Call(ctx, s, sandboxapi.OpProcessRead, in)
}

// ProcessWrite writes data to a process's stdin (its terminal for a PTY
// process) and closes it afterwards when closeStdin. Errors:
// ErrCommandRejected when stdin is closed or the process ended.
func (s *Session) ProcessWrite(ctx context.Context, id string, data []byte, closeStdin bool) (sandboxapi.ProcessWriteResult, error) {
	if len(data) > sandboxapi.MaxProcessWriteBytes {
		return sandboxapi.ProcessWriteResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_write: more than %d bytes", sandboxapi.MaxProcessWriteBytes)
	}
	return Call(ctx, s, sandboxapi.OpProcessWrite, sandboxapi.ProcessWriteInput{ProcessID: id, Data: data, CloseStdin: closeStdin})
}

// ProcessSignal sends signal (sandboxapi.ProcessSignals; "" = TERM) to a
// process; KILL ends its whole tree.
func (s *Session) ProcessSignal(ctx context.Context, id, signal string) error {
	_, err := Call(ctx, s, sandboxapi.OpProcessSignal, sandboxapi.ProcessSignalInput{ProcessID: id, Signal: signal})
	return err
}

// ProcessResize sets a PTY process's terminal size.
func (s *Session) ProcessResize(ctx context.Context, id string, rows, cols int) error {
	_, err := Call(ctx, s, sandboxapi.OpProcessResize, sandboxapi.ProcessResizeInput{ProcessID: id, Rows: rows, Cols: cols})
	return err
}

// ProcessList lists the runtime's background processes.
func (s *Session) ProcessList(ctx context.Context) (sandboxapi.ProcessListResult, error) {
	return Call(ctx, s, sandboxapi.OpProcessList, sandboxapi.None{})
}

// StreamRead is ProcessRead through the workspace's stream workflow
// (docs/API.md "Streaming exec output"): it never waits for the session's
// lock and the bytes read never enter the session's history. The stream
// workflow is started when it is not running (update-with-start), and a
// read that met its continue-as-new is sent again.
func (s *Session) StreamRead(ctx context.Context, in sandboxapi.ProcessReadInput) (sandboxapi.ProcessReadResult, error) {
	wfID, err := sandboxapi.StreamWorkflowID(s.wsID)
	if err != nil {
		return sandboxapi.ProcessReadResult{}, err
	}
	for attempt := 0; ; attempt++ {
		op := s.c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: wfID, TaskQueue: s.c.taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, sandboxapi.ProcessStreamWorkflowType, sandboxapi.StreamInput{WorkspaceID: s.wsID})
		h, err := s.c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: wfID, UpdateName: sandboxapi.UpdateProcessRead,
				Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted},
		})
		var out sandboxapi.ProcessReadResult
		if err == nil {
			err = h.Get(ctx, &out)
		}
		if err == nil {
			return out, nil
		}
		typed := FromTemporal(err)
		if attempt < 4 && ctx.Err() == nil && (sandboxapi.KindOf(typed) == nil || isRunGone(err)) {
			// The run continued as new (or completed) under the update:
			// the next attempt reaches (or starts) the current run.
			continue
		}
		return out, typed
	}
}

// isRunGone reports whether err says the update's run ended before it was
// handled.
func isRunGone(err error) bool { return sessionrpc.RunGone(err) }
