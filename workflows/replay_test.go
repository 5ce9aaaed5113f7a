package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

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
		assert.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
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
		assert.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}

// TestRetiredChangesKeepARecordedHistory: every retired change
// (retiredChanges) is kept by at least one recorded history that took its
// branch (its Version marker is in it), so the replay tests prove this code
// replays the runs recorded since the change; and no history recorded
// before one (none passes its code without the marker: they were dropped
// when it was retired) is left to fail TestReplayRecordedHistories.
func TestRetiredChangesKeepARecordedHistory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	require.NoError(t, err)
	kept := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		h := &historypb.History{}
		require.NoError(t, protojson.Unmarshal(data, h), f)
		for _, ev := range h.GetEvents() {
			m := ev.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "Version" {
				continue
			}
			var change string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &change), f)
			kept[change] = append(kept[change], filepath.Base(f))
		}
	}
	require.NotEmpty(t, retiredChanges)
	for _, change := range retiredChanges {
		assert.NotEmpty(t, kept[change], "retired change %s: no recorded history took its branch", change)
	}
}
