package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The one place E2B's answers become sandbox error kinds (docs/API.md
// "Errors"), for the control plane, envd's /files and envd's Connect
// services alike:
//
//	401, 403 / Unauthenticated, PermissionDenied → ErrUnauthorized
//	404 / NotFound                               → ErrNotFound (the caller recreates a vanished sandbox)
//	409 a sandbox changing state                 → ErrRuntimeUnavailable (retried after transitionWait)
//	409 otherwise / AlreadyExists                → ErrConflict
//	429 the team's concurrent sandboxes          → ErrResourceLimit (not retried)
//	429 otherwise / ResourceExhausted            → ErrRateLimited (retryable, its Retry-After kept:
//	                                               replica.Retrier waits it out)
//	400/403 naming a quota or limit              → ErrResourceLimit
//	507 (envd: no disk space left)               → ErrResourceLimit "disk full"
//	other 4xx / InvalidArgument                  → ErrInvalidArgument (E2B refused the request: configuration)
//	5xx, 408, connection loss, a cut stream      → ErrRuntimeUnavailable (retryable)
//	the caller's deadline                        → ErrTimeout; its cancellation wraps context.Canceled
//
// Messages quote E2B's own (clipped, scrubbed of the API key and tokens).

// mapResp maps a generated *XxxResponse (its HTTPResponse and Body fields)
// and the client's error.
func (p *Provider) mapResp(ctx context.Context, res any, err error, format string, args ...any) error {
	var hr *http.Response
	var body []byte
	if v := reflect.ValueOf(res); v.Kind() == reflect.Pointer && !v.IsNil() {
		if f := v.Elem().FieldByName("HTTPResponse"); f.IsValid() {
			hr, _ = f.Interface().(*http.Response)
		}
		if f := v.Elem().FieldByName("Body"); f.IsValid() {
			body, _ = f.Interface().([]byte)
		}
	}
	return p.mapHTTP(ctx, hr, body, err, sprintf(format, args...))
}

// mapHTTP maps one HTTP answer (resp nil: the request failed with err).
func (p *Provider) mapHTTP(ctx context.Context, resp *http.Response, body []byte, err error, what string) error {
	if err == nil && resp != nil && resp.StatusCode < 400 {
		return nil
	}
	if resp == nil {
		if ctx.Err() != nil {
			return ctxErr(ctx, what)
		}
		if err == nil {
			err = errors.New("no response")
		}
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: %s: %s", what, p.scrub(err.Error()))
	}
	msg := p.scrub(errorMessage(body))
	switch code := resp.StatusCode; {
	case code == 429 && isSandboxQuota(msg), (code == 400 || code == 403) && isQuota(msg):
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "e2b: %s: %s", what, msg)
	case code == 401 || code == 403:
		return sandboxapi.Errorf(sandboxapi.ErrUnauthorized, "e2b: %s: E2B refused the credentials (%d %s)", what, code, msg)
	case code == 404:
		return sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: %s: %s", what, msg)
	case code == 409 && isTransitioning(msg):
		e := sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: %s: the sandbox is changing state (%s)", what, msg)
		return sandbox.WithRetryAfter(e, transitionWait)
	case code == 409:
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "e2b: %s: %s", what, msg)
	case code == 429:
		e := sandboxapi.Errorf(sandboxapi.ErrRateLimited, "e2b: %s: rate limited (%s)", what, msg)
		if d, ok := retryAfter(resp); ok {
			return sandbox.WithRetryAfter(e, d)
		}
		return e
	case code == 507:
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "e2b: %s: the sandbox's disk is full (%s)", what, msg)
	case code >= 500 || code == 408:
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: %s: %d %s", what, code, msg)
	default:
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: %s: E2B refused the request (%d %s)", what, code, msg)
	}
}

// mapConnect maps an error of envd's Connect services.
func (p *Provider) mapConnect(ctx context.Context, err error, what string) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctxErr(ctx, what)
	}
	msg := p.scrub(sandboxapi.Clip(err.Error(), 300))
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return sandboxapi.Errorf(sandboxapi.ErrUnauthorized, "e2b: %s: envd refused the access token (%s)", what, msg)
	case connect.CodeNotFound:
		return sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: %s: %s", what, msg)
	case connect.CodeAlreadyExists:
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "e2b: %s: %s", what, msg)
	case connect.CodeResourceExhausted:
		if isQuota(msg) {
			return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "e2b: %s: %s", what, msg)
		}
		return sandboxapi.Errorf(sandboxapi.ErrRateLimited, "e2b: %s: %s", what, msg)
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange, connect.CodeUnimplemented:
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "e2b: %s: envd refused the request (%s)", what, msg)
	case connect.CodeDeadlineExceeded:
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: %s: the stream's deadline passed (%s)", what, msg)
	}
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "e2b: %s: %s", what, msg)
}

// ctxErr is the error of a call cut short because ctx ended
// (replica.ContextError).
func ctxErr(ctx context.Context, what string) error { return replica.ContextError(ctx, Kind, what) }

// transitionWait is how long a call E2B refused because the sandbox was
// changing state waits before it is tried again.
const transitionWait = time.Second

// isTransitioning tells E2B's 409s that pass by themselves: the sandbox
// proxy's "The sandbox is still transitioning. Try again in a moment."
// (packages/shared/pkg/proxy/template/sandbox_still_transitioning.go:24-34
// of e2b-dev/infra, answered while a sandbox's auto-resume waits for a
// pause or resume in flight: packages/client-proxy/internal/proxy/
// proxy.go:119-120, packages/api/internal/handlers/proxy_grpc.go:193-194)
// and the control plane's keep-alive of a sandbox being paused or
// snapshotted, "Sandbox \"x\" is being paused" (packages/api/internal/
// orchestrator/keep_alive.go:50-51, utils/messages.go:13-22). A sandbox
// being killed is not one of them: it is about to be gone.
func isTransitioning(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "still transitioning") || strings.Contains(m, "is being paused") || strings.Contains(m, "is being snapshotted")
}

// isSandboxQuota tells E2B's one 429 that is a quota rather than a rate
// limit: the team's concurrent sandboxes, "you have reached the maximum
// number of concurrent E2B sandboxes (N). …" (packages/api/internal/
// orchestrator/create_instance.go:196-203 of e2b-dev/infra), on a create or
// a resume. Every other 429 is a rate limit that passes: the API's limiter,
// "Rate limit exceeded" with Retry-After (packages/api/internal/middleware/
// ratelimit/ratelimit.go:137-149), and the sandbox proxy's "The sandbox has
// too many concurrent incoming connections (limit: N)"
// (packages/shared/pkg/proxy/template/sandbox_too_many_connections.go:26-36).
func isSandboxQuota(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "maximum number of concurrent")
}

// isQuota tells a refusal (400, 403, envd's ResourceExhausted) naming a
// quota or a limit.
func isQuota(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "quota") || strings.Contains(m, "limit exceeded") || strings.Contains(m, "maximum number")
}

// errorMessage extracts E2B's message from an error body ({"code","message"}).
func errorMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		return sandboxapi.Clip(m.Message, 300)
	}
	return sandboxapi.Clip(strings.TrimSpace(string(body)), 300)
}

func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// scrub removes the API key from a text, in case a server echoed it (the
// per-sandbox tokens are scrubbed by the runtime that holds them).
func (p *Provider) scrub(s string) string { return replica.Scrub(s, p.opts.APIKey) }
