package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/sandboxcore/sandboxcore/internal/wire"
)

// A retry sends only what the previous attempt did not deliver, in order;
// indexes out of range or repeated in the recorded progress are ignored.
func TestPendingSignalsSkipDelivered(t *testing.T) {
	assert.Equal(t, []int{0, 1, 2}, pendingSignals(3, nil))
	assert.Equal(t, []int{1, 3}, pendingSignals(4, []int{2, 0, 0, -1, 9}))
	assert.Empty(t, pendingSignals(2, []int{1, 0}))
	assert.Empty(t, pendingSignals(0, []int{0}))
}

// One workspace's requests stay together and in plan order (a runtime's
// stop before its workspace's eviction); the groups follow their first
// request; delivered indexes are not in them.
func TestSignalGroupsKeepAWorkspacesOrder(t *testing.T) {
	reqs := []wire.SessionRequest{{WorkspaceID: "a"}, {WorkspaceID: "a"}, {WorkspaceID: "b"}, {WorkspaceID: "c"}, {WorkspaceID: "b"}, {WorkspaceID: "a"}}
	assert.Equal(t, [][]int{{0, 1, 5}, {2, 4}, {3}}, signalGroups(reqs, []int{0, 1, 2, 3, 4, 5}))
	assert.Equal(t, [][]int{{1, 5}, {3}}, signalGroups(reqs, []int{1, 3, 5}))
	assert.Empty(t, signalGroups(reqs, nil))
}

// The progress a previous attempt heartbeated comes back, cleaned (in range,
// each once); a first attempt has none.
func TestPreviousSignalProgressFromHeartbeat(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	run := func(details any) []int {
		env := s.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(func(ctx context.Context) ([]int, error) {
			return previousSignalProgress(ctx, 5), nil
		}, activity.RegisterOptions{Name: "progress"})
		if details != nil {
			env.SetHeartbeatDetails(details)
		}
		v, err := env.ExecuteActivity("progress")
		require.NoError(t, err)
		var out []int
		require.NoError(t, v.Get(&out))
		return out
	}
	assert.Empty(t, run(nil))
	assert.Equal(t, []int{0, 3, 4}, run(signalProgress{Delivered: []int{0, 3, 3, 7, 4, -2}}))
	assert.Empty(t, run("not progress"), "unreadable details: everything is sent again")
}
