package egress

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The journal keeps the newest MaxRefusals per workspace, forgets
// workspaces refused more than an hour before the latest refusal, and the
// notice names what was refused since a command began, five at most.
func TestRefusalJournal(t *testing.T) {
	p := New(Options{})
	t0 := time.Now().Add(-2 * time.Hour)
	p.record("old", Refusal{At: t0, Method: "CONNECT", Destination: "x:443", Reason: "x:443 is not in the allow-list"})
	start := time.Now()
	for i := range MaxRefusals + 3 {
		p.record("ws", Refusal{At: start.Add(time.Duration(i) * time.Millisecond), Method: "CONNECT",
			Destination: fmt.Sprintf("h%d:443", i), Reason: fmt.Sprintf("h%d:443 is not in the allow-list", i)})
	}
	require.Len(t, p.Refusals("ws", time.Time{}), MaxRefusals)
	require.Empty(t, p.Refusals("old", time.Time{}), "an hour older than the newest: forgotten")
	require.Equal(t, "h3:443", p.Refusals("ws", time.Time{})[0].Destination)
	require.Len(t, p.Refusals("ws", start.Add(17*time.Millisecond)), 2)
	require.Empty(t, p.RefusalNotice("ws", time.Now().Add(time.Second)))
	require.Empty(t, p.RefusalNotice("other", time.Time{}))
	n := p.RefusalNotice("ws", start.Add(10*time.Millisecond))
	require.Equal(t, 6, strings.Count(n, "\n")-1, n)
	require.Contains(t, n, "sandbox: network policy refused CONNECT h10:443: h10:443 is not in the allow-list\n")
	require.Contains(t, n, "sandbox: network policy: 4 more refused\n")
	// Hostile text is kept printable and short.
	p.record("evil", Refusal{At: time.Now(), Method: strings.Repeat("M", 60000), Destination: "\u009b2kevil\u202egnp.test:443\x1b[2K", Reason: "r"})
	n = p.RefusalNotice("evil", time.Time{})
	require.Less(t, len(n), 200, n)
	require.NotContains(t, n, "\u009b")
	require.NotContains(t, n, "\u202e")
	require.NotContains(t, n, "\x1b")
	require.Contains(t, n, "2kevilgnp.test:443[2K")
}
