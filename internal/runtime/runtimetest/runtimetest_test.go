package runtimetest

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNetProbeConnects checks the suite's own probe: run on the host (no
// isolation) it must reach a loopback listener, so that its failure inside a
// network-none runtime means something.
func TestNetProbeConnects(t *testing.T) {
	port, accepted := listen(t)
	out, err := exec.Command("sh", "-c", netProbeScript, "sh", port).CombinedOutput()
	require.NoError(t, err, "probe: %s", out)
	require.Eventually(t, func() bool { return accepted.Load() > 0 }, 2*time.Second, 10*time.Millisecond)
}
