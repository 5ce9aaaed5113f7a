package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// lockStep is one coroutine of rwOrderWorkflow: it starts After, takes the
// lock (Exclusive or shared, giving up when AbortAt passes), holds it for
// Hold, and releases it.
type lockStep struct {
	Name      string
	Exclusive bool
	After     time.Duration
	Hold      time.Duration
	AbortAt   time.Duration // 0: never
}

// rwOrderWorkflow runs steps against one rwLock and returns what happened,
// in order, with the workflow time of each event.
func rwOrderWorkflow(ctx workflow.Context, steps []lockStep) ([]string, error) {
	var l rwLock
	var log []string
	start := workflow.Now(ctx)
	note := func(ctx workflow.Context, what string) {
		log = append(log, fmt.Sprintf("%s@%s", what, workflow.Now(ctx).Sub(start)))
	}
	wg := workflow.NewWaitGroup(ctx)
	for _, st := range steps {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			if err := workflow.Sleep(ctx, st.After); err != nil {
				return
			}
			var abort func() bool
			if st.AbortAt > 0 {
				abort = func() bool { return !workflow.Now(ctx).Before(start.Add(st.AbortAt)) }
				// A timer so that the abort condition is looked at again then.
				workflow.Go(ctx, func(ctx workflow.Context) { _ = workflow.Sleep(ctx, st.AbortAt-st.After) })
			}
			ok, err := l.acquireUnless(ctx, st.Exclusive, abort)
			if err != nil || !ok {
				note(ctx, st.Name+" gave up")
				return
			}
			note(ctx, st.Name+" start")
			_ = workflow.Sleep(ctx, st.Hold)
			note(ctx, st.Name+" end")
			l.release(st.Exclusive)
		})
	}
	wg.Wait(ctx)
	return log, nil
}

func runLockSteps(t *testing.T, steps []lockStep) []string {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(rwOrderWorkflow)
	env.ExecuteWorkflow(rwOrderWorkflow, steps)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var log []string
	require.NoError(t, env.GetWorkflowResult(&log))
	return log
}

// Reads run together; a write waits for them all and runs alone; a read
// arriving while the write waits runs after it (a waiting writer blocks new
// readers, so reads cannot starve it).
func TestRWLockReadsTogetherWriteAloneWaitingWriterFirst(t *testing.T) {
	log := runLockSteps(t, []lockStep{
		{Name: "r1", After: 0, Hold: 10 * time.Second},
		{Name: "r2", After: time.Second, Hold: 10 * time.Second},
		{Name: "w1", Exclusive: true, After: 2 * time.Second, Hold: 5 * time.Second},
		{Name: "r3", After: 3 * time.Second, Hold: time.Second},
	})
	assert.Equal(t, []string{"r1 start@0s", "r2 start@1s", "r1 end@10s", "r2 end@11s", "w1 start@11s", "w1 end@16s", "r3 start@16s", "r3 end@17s"}, log)
}

// Writes run one at a time, in the order they came.
func TestRWLockWritesOneAtATime(t *testing.T) {
	log := runLockSteps(t, []lockStep{
		{Name: "w1", Exclusive: true, Hold: 5 * time.Second},
		{Name: "w2", Exclusive: true, After: time.Second, Hold: 5 * time.Second},
		{Name: "r1", After: 2 * time.Second, Hold: time.Second},
	})
	assert.Equal(t, []string{"w1 start@0s", "w1 end@5s", "w2 start@5s", "w2 end@10s", "r1 start@10s", "r1 end@11s"}, log)
}

// A waiter whose abort condition comes true gives up without the lock, and
// no longer blocks the readers behind it.
func TestRWLockAbortGivesUpAndUnblocksReaders(t *testing.T) {
	log := runLockSteps(t, []lockStep{
		{Name: "r1", Hold: 20 * time.Second},
		{Name: "w1", Exclusive: true, After: time.Second, Hold: time.Second, AbortAt: 5 * time.Second},
		{Name: "r2", After: 2 * time.Second, Hold: time.Second},
	})
	assert.Equal(t, []string{"r1 start@0s", "w1 gave up@5s", "r2 start@5s", "r2 end@6s", "r1 end@20s"}, log)
}
