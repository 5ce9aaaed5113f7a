package output

import (
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestOutcomeResult: an ending the command did not choose sets its exit
// code and flag; anything else keeps the command's own code; the streams,
// counts and duration pass through.
func TestOutcomeResult(t *testing.T) {
	for _, c := range []struct {
		reason              string
		code                int
		timedOut, cancelled bool
	}{
		{"", 3, false, false},
		{sandboxapi.ExitReasonExited, 3, false, false},
		{sandboxapi.ExitReasonSignaled, 3, false, false},
		{sandboxapi.ExitReasonTimeout, 124, true, false},
		{sandboxapi.ExitReasonCancelled, 130, false, true},
		{sandboxapi.ExitReasonRuntimeStopped, 137, false, false},
	} {
		res := Outcome{ExitCode: 3, Reason: c.reason, Stdout: []byte("o"), Stderr: []byte("e"), StdoutBytes: 10, StderrBytes: 1,
			Truncated: true, Duration: 1500 * time.Millisecond}.Result()
		if res.ExitCode != c.code || res.TimedOut != c.timedOut || res.Cancelled != c.cancelled {
			t.Errorf("%q: exit %d timed_out %v cancelled %v; want %d %v %v", c.reason, res.ExitCode, res.TimedOut, res.Cancelled, c.code, c.timedOut, c.cancelled)
		}
		if string(res.Stdout) != "o" || string(res.Stderr) != "e" || res.StdoutBytes != 10 || res.StderrBytes != 1 || !res.Truncated || res.DurationMS != 1500 {
			t.Errorf("%q: %+v", c.reason, res)
		}
	}
}
