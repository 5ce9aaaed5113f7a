package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A tracked exec is found by its update id until it ends; then it is one of
// the recentExecs last ended ones, oldest dropped first.
func TestTrackAndUntrackExec(t *testing.T) {
	s := &session{wsID: "ws-1"}
	e := s.trackExec("u-1")
	assert.Same(t, e, s.execs["u-1"])
	assert.Equal(t, sandboxapi.ExecProcessID("ws-1", "u-1"), e.processID)
	s.untrackExec(e)
	assert.True(t, e.done)
	assert.NotContains(t, s.execs, "u-1")
	assert.Equal(t, []string{"u-1"}, s.recent)
	for i := 2; i <= recentExecs+1; i++ {
		s.untrackExec(s.trackExec(fmt.Sprintf("u-%d", i)))
	}
	require.Len(t, s.recent, recentExecs)
	assert.Equal(t, "u-2", s.recent[0])
	assert.Equal(t, fmt.Sprintf("u-%d", recentExecs+1), s.recent[recentExecs-1])
}

// Waiting for a runtime process heartbeats and retries on its own terms;
// an exec the activity runs itself keeps the host options it was given.
func TestExecWaitOptions(t *testing.T) {
	base := workflow.ActivityOptions{TaskQueue: "q", StartToCloseTimeout: time.Hour, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}}
	assert.Equal(t, base, execWaitOptions(base, ""))
	got := execWaitOptions(base, "proc-1")
	assert.Equal(t, execWaitHeartbeat, got.HeartbeatTimeout)
	assert.Equal(t, int32(10), got.RetryPolicy.MaximumAttempts)
	assert.Equal(t, "q", got.TaskQueue)
	assert.Equal(t, int32(1), base.RetryPolicy.MaximumAttempts, "the given options are not changed")
}
