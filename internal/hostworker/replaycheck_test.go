package hostworker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// settled keeps the last completed task's commands and drops a task still
// in flight (the signal that scheduled it stays: no task runs for it).
func TestSettledHistory(t *testing.T) {
	h := func(types ...enumspb.EventType) []*historypb.HistoryEvent {
		out := make([]*historypb.HistoryEvent, len(types))
		for i, et := range types {
			out[i] = &historypb.HistoryEvent{EventId: int64(i + 1), EventType: et}
		}
		return out
	}
	const (
		started   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
		scheduled = enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
		taskStart = enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED
		completed = enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
		marker    = enumspb.EVENT_TYPE_MARKER_RECORDED
		timer     = enumspb.EVENT_TYPE_TIMER_STARTED
		signaled  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
	)
	// The first task still runs: nothing to replay.
	_, ok := settled(h(started, scheduled, taskStart))
	assert.False(t, ok)
	// Settled: the last task's marker and timer are kept.
	got, ok := settled(h(started, scheduled, taskStart, completed, marker, timer))
	assert.True(t, ok)
	assert.Len(t, got, 6)
	// A signal scheduled a task that has not completed: the task is dropped.
	got, ok = settled(h(started, scheduled, taskStart, completed, marker, timer, signaled, scheduled, taskStart))
	assert.True(t, ok)
	assert.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, got[len(got)-1].GetEventType())
	assert.Len(t, got, 7)
}
