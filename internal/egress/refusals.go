package egress

import (
	"fmt"
	"strings"
	"time"
)

// Refusal is one request the proxy refused for a workspace's network policy.
type Refusal struct {
	At time.Time
	// Method is CONNECT (HTTPS and other tunnels) or the HTTP method.
	Method string
	// Destination is host:port as the command asked for it.
	Destination string
	// Reason is the policy's reason (as the 403 says it).
	Reason string
}

// Refusal journal bounds: the newest MaxRefusals per workspace, none older
// than refusalAge.
const (
	MaxRefusals = 16
	refusalAge  = time.Hour
)

// record adds r to workspace ws's journal and drops what is past the
// bounds (of every workspace: the journal never grows with workspaces that
// stopped being refused).
func (p *Proxy) record(ws string, r Refusal) {
	// What the command sent is hostile: printable ASCII only, clipped, so
	// that the notice cannot carry escapes or grow with it.
	r.Method, r.Destination, r.Reason = asciiClip(r.Method, 16), asciiClip(r.Destination, 260), asciiClip(r.Reason, 300)
	p.refMu.Lock()
	defer p.refMu.Unlock()
	if p.refusals == nil {
		p.refusals = map[string][]Refusal{}
	}
	list := append(p.refusals[ws], r)
	if len(list) > MaxRefusals {
		list = append([]Refusal(nil), list[len(list)-MaxRefusals:]...)
	}
	p.refusals[ws] = list
	for k, l := range p.refusals {
		if r.At.Sub(l[len(l)-1].At) > refusalAge {
			delete(p.refusals, k)
		}
	}
}

// Refusals returns workspace ws's refusals at or after since, oldest first
// (at most MaxRefusals, none older than an hour).
func (p *Proxy) Refusals(ws string, since time.Time) []Refusal {
	p.refMu.Lock()
	defer p.refMu.Unlock()
	var out []Refusal
	for _, r := range p.refusals[ws] {
		if !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// RefusalNotice is what a command's stderr gets for the refusals made
// while it ran (Refusals since its start): one line per refusal, the
// first five, so that an agent whose tool printed only "CONNECT tunnel
// failed, response 403" learns what was refused and why (docs/SECURITY.md
// "Network modes"); "" for none. The workspace's other commands running at
// the same time share its network policy and are counted too.
func (p *Proxy) RefusalNotice(ws string, since time.Time) string {
	rs := p.Refusals(ws, since)
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n")
	for i, r := range rs {
		if i == 5 {
			fmt.Fprintf(&b, "sandbox: network policy: %d more refused\n", len(rs)-i)
			break
		}
		fmt.Fprintf(&b, "sandbox: network policy refused %s %s: %s\n", r.Method, r.Destination, r.Reason)
	}
	return b.String()
}

// asciiClip keeps the printable ASCII of s, at most n bytes of it (then
// "...").
func asciiClip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
