package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// mapErr is the one place Daytona's answers become sandbox error kinds
// (docs/API.md "Errors"):
//
//	401, 403                      → ErrUnauthorized
//	404                           → ErrNotFound (the caller recreates a vanished sandbox)
//	409                           → ErrConflict
//	429                           → ErrRateLimited (its Retry-After, when given: retryAfter)
//	400 "… limit exceeded"/quota  → ErrResourceLimit
//	other 4xx                     → ErrInvalidArgument (Daytona refused the request: configuration)
//	5xx, connection loss, a cut   → ErrRuntimeUnavailable (retryable)
//	the caller's deadline         → ErrTimeout; its cancellation wraps context.Canceled
//
// The message quotes Daytona's own (clipped) and never the API key: it is
// not in any response, and the text is scrubbed of it anyway.
func (p *Provider) mapErr(ctx context.Context, resp *http.Response, err error, format string, args ...any) error {
	if err == nil && (resp == nil || resp.StatusCode < 400) {
		return nil
	}
	what := sprintf(format, args...)
	if resp == nil {
		if ctx.Err() != nil {
			return replica.ContextError(ctx, Kind, what)
		}
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: %s: %s", what, p.scrub(err.Error()))
	}
	msg := p.scrub(errorMessage(err))
	switch code := resp.StatusCode; {
	case code == 401 || code == 403:
		return sandboxapi.Errorf(sandboxapi.ErrUnauthorized, "daytona: %s: Daytona refused the API key (%d %s)", what, code, msg)
	case code == 404:
		return sandboxapi.Errorf(sandboxapi.ErrNotFound, "daytona: %s: %s", what, msg)
	case code == 409:
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "daytona: %s: %s", what, msg)
	case code == 429:
		e := sandboxapi.Errorf(sandboxapi.ErrRateLimited, "daytona: %s: rate limited (%s)", what, msg)
		if d, ok := retryAfter(resp); ok {
			return sandbox.WithRetryAfter(e, d)
		}
		return e
	case code == 400 && isQuota(msg):
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "daytona: %s: %s", what, msg)
	case code >= 500 || code == 408:
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: %s: %d %s", what, code, msg)
	default:
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "daytona: %s: Daytona refused the request (%d %s)", what, code, msg)
	}
}

// diskQuota tells a refusal for the organization's disk quota, the one a
// stopped sandbox counts towards: "Total disk limit exceeded. …"
// (apps/api/src/sandbox/services/sandbox.service.ts:295-299 of
// daytonaio/daytona v0.190.0). CPU and memory ("Total CPU limit exceeded",
// "Total memory limit exceeded", lines 283-293) count only sandboxes in
// states that consume compute, never stopped ones
// (apps/api/src/organization/constants/sandbox-states-consuming-compute.constant.ts
// and sandbox-states-consuming-disk.constant.ts).
func diskQuota(err error) bool {
	return strings.Contains(strings.ToLower(sandboxapi.Message(err)), "total disk limit exceeded")
}

func isQuota(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "limit exceeded") || strings.Contains(m, "quota")
}

// errorMessage extracts Daytona's message from an error body
// ({"statusCode","error","message"}; the toolbox's {"error"}).
func errorMessage(err error) string {
	type bodied interface{ Body() []byte }
	var b bodied
	if errors.As(err, &b) {
		var m struct {
			Message any    `json:"message"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(b.Body(), &m) == nil {
			switch v := m.Message.(type) {
			case string:
				if v != "" {
					return sandboxapi.Clip(v, 300)
				}
			case []any:
				var parts []string
				for _, x := range v {
					if s, ok := x.(string); ok {
						parts = append(parts, s)
					}
				}
				if len(parts) > 0 {
					return sandboxapi.Clip(strings.Join(parts, ", "), 300)
				}
			}
			if m.Error != "" {
				return sandboxapi.Clip(m.Error, 300)
			}
		}
		if s := strings.TrimSpace(string(b.Body())); s != "" {
			return sandboxapi.Clip(s, 300)
		}
	}
	if err == nil {
		return ""
	}
	return sandboxapi.Clip(err.Error(), 300)
}

// retryAfter is the delay a 429 names: its Retry-After, or the
// Retry-After-<throttler> headers of Daytona's named throttlers
// ("authenticated", "sandbox-create", "sandbox-lifecycle":
// apps/api/src/app.module.ts:153-161 of daytonaio/daytona v0.190.0), which
// @nestjs/throttler names after the throttler that refused the call
// (src/throttler.guard.ts:173-177 of nestjs/throttler v6.4.0) — the longest
// when several are given.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	var longest time.Duration
	found := false
	for k, vs := range resp.Header {
		if len(vs) == 0 || (k != "Retry-After" && !strings.HasPrefix(k, "Retry-After-")) {
			continue
		}
		var d time.Duration
		if n, err := strconv.Atoi(strings.TrimSpace(vs[0])); err == nil && n >= 0 {
			d = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(vs[0]); err == nil {
			d = max(time.Until(t), 0)
		} else {
			continue
		}
		longest, found = max(longest, d), true
	}
	return longest, found
}

// scrub removes the API key from a text, in case a server echoed it.
func (p *Provider) scrub(s string) string { return replica.Scrub(s, p.opts.APIKey) }
