package egress

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PolicyHeader is set on every answer the proxy itself makes to a refused
// request ("denied"), so a client can tell a policy refusal from the
// destination's own 403.
const PolicyHeader = "X-Sandboxcore-Network-Policy"

// DeniedStatus begins the status line of a refusal: 403 with a reason
// phrase that says why, which tools that print the proxy's status line
// (Python's http.client, so pip; git) show as they are. The line goes on
// with ": " and the policy's reason (DeniedStatusLine).
const DeniedStatus = "403 Forbidden by the sandbox's network policy"

// ReasonHeader carries the policy's reason on every refusal (the same text
// as the status line's and the body's), for clients that show headers
// but neither (curl -v prints it; curl alone shows only "response 403").
const ReasonHeader = "X-Sandboxcore-Denied-Reason"

// maxReasonPhrase bounds the reason in a refusal's status line and header.
const maxReasonPhrase = 512

// DeniedStatusLine is the status line of a refusal for reason, without
// "HTTP/1.1 ": DeniedStatus, ": ", and the reason made safe for a header
// (control characters dropped, at most maxReasonPhrase bytes).
func DeniedStatusLine(reason string) string {
	return DeniedStatus + ": " + headerSafe(reason)
}

// headerSafe drops control characters and non-ASCII from s and clips it,
// so it can stand in a status line or a header value (asciiClip).
func headerSafe(s string) string { return asciiClip(s, maxReasonPhrase) }

// answer writes the proxy's own plain-text answer.
func (e *endpoint) answer(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "sandboxcore egress proxy: "+format+"\n", args...)
}

// deny answers a refused destination with 403 (DeniedStatusLine: the
// status line carries the reason, PolicyHeader, ReasonHeader with the
// reason, and a body naming the policy and the reason) and logs it.
func (e *endpoint) deny(w http.ResponseWriter, pol Policy, method, dest string, d *Denial) {
	e.p.log.Info("egress denied", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "method", method, "destination", dest, "reason", d.Reason)
	e.p.record(pol.WorkspaceID, Refusal{At: time.Now(), Method: method, Destination: dest, Reason: d.Reason})
	body := fmt.Sprintf("sandboxcore egress proxy: %s to %s denied by the network policy of workspace %s: %s\n", method, dest, pol.WorkspaceID, d.Reason)
	if hj, ok := w.(http.Hijacker); ok {
		if c, buf, err := hj.Hijack(); err == nil {
			defer c.Close()
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s: denied\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
				DeniedStatusLine(d.Reason), PolicyHeader, ReasonHeader, headerSafe(d.Reason), len(body), body)
			_ = buf.Flush()
			return
		}
	}
	w.Header().Set(PolicyHeader, "denied")
	w.Header().Set(ReasonHeader, headerSafe(d.Reason))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, body)
}

// failed answers a destination that could not be reached (502).
func (e *endpoint) failed(w http.ResponseWriter, pol Policy, method, dest string, err error) {
	e.p.log.Info("egress failed", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "method", method, "destination", dest, "error", err)
	e.answer(w, http.StatusBadGateway, "%s to %s failed: %v", method, dest, err)
}

func clipText(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
