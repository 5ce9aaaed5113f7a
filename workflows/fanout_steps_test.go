package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestScriptStatus(t *testing.T) {
	assert.Equal(t, sandboxapi.TaskSucceeded, scriptStatus(wire.RunScriptResult{ExitCode: 0}))
	assert.Equal(t, sandboxapi.TaskFailed, scriptStatus(wire.RunScriptResult{ExitCode: 2}))
	assert.Equal(t, sandboxapi.TaskTimedOut, scriptStatus(wire.RunScriptResult{ExitCode: 0, TimedOut: true}), "a timeout wins over the exit code")
}

func TestAgentStatus(t *testing.T) {
	final, msg := agentStatus(false, nil)
	assert.Equal(t, sandboxapi.TaskTimedOut, final)
	assert.Empty(t, msg)
	final, msg = agentStatus(true, &sandboxapi.CompleteTaskSignal{TaskID: "t", Succeeded: true, Message: "done"})
	assert.Equal(t, [2]string{sandboxapi.TaskSucceeded, "done"}, [2]string{final, msg})
	final, msg = agentStatus(true, &sandboxapi.CompleteTaskSignal{TaskID: "t", Message: "gave up"})
	assert.Equal(t, [2]string{sandboxapi.TaskFailed, "gave up"}, [2]string{final, msg})
}

func TestTaskCommitMessage(t *testing.T) {
	assert.Equal(t, "Task t1 (fan-out f1)", taskCommitMessage("f1", sandboxapi.TaskSpec{TaskID: "t1"}))
	assert.Equal(t, "Task t1 (fan-out f1)\n\nfix the tests", taskCommitMessage("f1", sandboxapi.TaskSpec{TaskID: "t1", Instructions: "fix the tests"}))
}

func TestPendingTasks(t *testing.T) {
	got := pendingTasks([]sandboxapi.TaskSpec{{TaskID: "a", Script: "make test"}, {TaskID: "b", Instructions: "fix it"}})
	assert.Equal(t, []sandboxapi.TaskResult{
		{TaskID: "a", Kind: sandboxapi.TaskKindScript, Status: sandboxapi.TaskPending},
		{TaskID: "b", Kind: sandboxapi.TaskKindAgent, Status: sandboxapi.TaskPending},
	}, got)
}
