package tests

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestExecStreamDeliversOutputWhileRunning: a client sees a command's output
// before the command ends (heartbeat details of the running exec activity).
func TestExecStreamDeliversOutputWhileRunning(t *testing.T) {
	h := startHost(t, "stream")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, time.Minute)
	var mu sync.Mutex
	var out, errOut strings.Builder
	var firstAt time.Time
	start := time.Now()
	res, err := s.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo first; echo oops >&2; sleep 4; echo second"}},
		func(c sandboxapi.ExecChunk) {
			mu.Lock()
			defer mu.Unlock()
			if firstAt.IsZero() && c.Stream == "stdout" && strings.Contains(string(c.Data), "first") {
				firstAt = time.Now()
			}
			if c.Stream == "stderr" {
				errOut.Write(c.Data)
			} else {
				out.Write(c.Data)
			}
		})
	ended := time.Now()
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	require.False(t, firstAt.IsZero(), "no streamed chunk carried the first line")
	assert.Less(t, firstAt.Sub(start), ended.Sub(start)-time.Second, "the first line must arrive while the command still runs")
	assert.Equal(t, "first\nsecond\n", out.String(), "each byte streamed exactly once")
	assert.Equal(t, "oops\n", errOut.String())
	assert.Equal(t, "first\nsecond\n", string(res.Stdout))
}
