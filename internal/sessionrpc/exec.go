package sessionrpc

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// CancelWait bounds how long an exec whose context ended waits for the
// cancel update and for the cancelled command's result (docs/API.md
// "Cancelling a command").
const CancelWait = 15 * time.Second

// Exec sends the exec update with id (sandboxapi.UpdateExec, accepted
// first: Send) and waits for its result. When ctx ends first the command
// is cancelled (Abandon) and its cancelled result is returned with ctx's
// error (Temporal itself cannot cancel an update). Errors: ctx.Err() as
// said, else raw as the package doc says.
func (s Session) Exec(ctx context.Context, id string, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	h, err := s.Send(ctx, sandboxapi.UpdateExec, id, req)
	if err != nil {
		if ctx.Err() != nil {
			// It may have reached the session before ctx ended.
			return s.Abandon(ctx, id), ctx.Err()
		}
		return sandboxapi.ExecResult{}, err
	}
	return s.AwaitExec(ctx, h, id)
}

// AwaitExec waits for the exec update h (id) to complete. When ctx ends
// first, the command is cancelled (Abandon) and its cancelled result is
// returned with ctx's error. Errors: ctx.Err() as said, else raw.
func (s Session) AwaitExec(ctx context.Context, h client.WorkflowUpdateHandle, id string) (sandboxapi.ExecResult, error) {
	var res sandboxapi.ExecResult
	err := h.Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if ctx.Err() == nil {
		return res, err
	}
	return s.Abandon(ctx, id), ctx.Err()
}

// Abandon cancels the exec with update id after ctx ended and returns its
// result (waiting at most CancelWait; a cancelled result, exit 130, when it
// is not known by then).
func (s Session) Abandon(ctx context.Context, id string) sandboxapi.ExecResult {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), CancelWait)
	defer cancel()
	s.cancelSent(bg, id)
	var res sandboxapi.ExecResult
	if err := s.Outcome(bg, id, &res); err != nil {
		res = sandboxapi.ExecResult{ExitCode: 130, Cancelled: true}
	}
	return res
}

// cancelSent cancels the exec with update id, which may not have reached
// the session yet (a cancel that finds no such exec is sent again twice,
// 200 ms apart). The cancel update has a random id of its own: sent with
// the exec's id it would only wait for the exec's outcome.
func (s Session) cancelSent(ctx context.Context, id string) {
	for attempt := 0; attempt < 3; attempt++ {
		c, err := Call(ctx, s, sandboxapi.OpCancel, "", sandboxapi.CancelInput{UpdateID: id})
		if err != nil || c.State != sandboxapi.CancelUnknown {
			return
		}
		if !wait(ctx, 200*time.Millisecond) {
			return
		}
	}
}
