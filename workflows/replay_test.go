package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestReplayRecordedHistories replays the session histories recorded by the
// end-to-end test (tests/replay_test.go, SANDBOXCORE_UPDATE_HISTORIES=1)
// against the current workflow code. A change that is not replay-compatible
// fails here: guard it with workflow.GetVersion, then record new histories
// next to the old ones (DESIGN.md "Limits to respect").
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	for _, f := range files {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}

// TestReplayRecordedStreamHistories replays the recorded ProcessStreamWorkflow
// histories (tests/replay_test.go TestSessionProcessHistoriesReplay).
func TestReplayRecordedStreamHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "stream-histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	for _, f := range files {
		replayer := worker.NewWorkflowReplayer()
		replayer.RegisterWorkflowWithOptions(ProcessStreamWorkflow, workflow.RegisterOptions{Name: sandboxapi.ProcessStreamWorkflowType})
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}
