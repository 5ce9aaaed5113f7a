package sessionrpc

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Once sends one update of a step that an activity's retry may repeat, with
// the update id AttemptUpdateID(base, attempt) (attempt 1-based). On a
// retry it first looks for the updates of the earlier attempts, newest
// first, waiting for one still running: the first that succeeded is the
// result and nothing is sent again. An earlier update that failed (its
// worker died), or that the session's current run does not know, is
// superseded by a new one, sent by send with the new id. log notes the
// earlier failures. Errors: send's, or ctx's.
func Once[T any](ctx context.Context, s Session, base string, attempt int32, log *slog.Logger, send func(ctx context.Context, id string) (T, error)) (T, error) {
	for a := attempt - 1; a >= 1; a-- {
		var out T
		err := s.Outcome(ctx, AttemptUpdateID(base, a), &out)
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if !errors.Is(sandboxapi.FromTemporal(err), sandboxapi.ErrWorkspaceNotFound) {
			log.Info("fanout: earlier attempt failed; sending again", "update", base, "attempt", a, "err", sandboxapi.FromTemporal(err))
		}
	}
	return send(ctx, AttemptUpdateID(base, attempt))
}
