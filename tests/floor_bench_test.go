package tests

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The Temporal floor: what one update costs on this machine's server and SDK
// when the workflow does nothing of its own. It is the raw baseline of every
// session operation (docs/BENCHMARKS.md "Latency goals"): a session's quick
// operation is one such update plus one local activity, its exec one update
// plus the command.

const (
	floorWorkflowType = "bench.FloorWorkflow"
	floorNoop         = "noop"
	floorLocal        = "local"
)

// floorWorkflow answers two updates until cancelled: noop returns its
// argument from the handler, local returns it from a local activity that does
// nothing else (the shape of a session's quick operation).
func floorWorkflow(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandler(ctx, floorNoop, func(ctx workflow.Context, in string) (string, error) {
		return in, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, floorLocal, func(ctx workflow.Context, in string) (string, error) {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
		var out string
		err := workflow.ExecuteLocalActivity(ctx, floorEcho, in).Get(ctx, &out)
		return out, err
	}); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

func floorEcho(_ context.Context, in string) (string, error) { return in, nil }

// startFloor starts a worker for floorWorkflow on its own task queue of the
// tests' shared server (the one the session benchmarks' hosts use), with the
// worker options a host uses, and one running workflow; it returns a call
// that sends the named update and waits for its result.
func startFloor(b *testing.B) func(ctx context.Context, update string) error {
	b.Helper()
	queue := uniq(b, "floor")
	w := worker.New(tc, queue, worker.Options{MaxHeartbeatThrottleInterval: time.Second})
	w.RegisterWorkflowWithOptions(floorWorkflow, workflow.RegisterOptions{Name: floorWorkflowType})
	w.RegisterActivity(floorEcho)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	ctx := context.Background()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, floorWorkflowType)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), run.GetID(), "", "benchmark done") })
	return func(ctx context.Context, update string) error {
		h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateName: update,
			Args: []any{"x"}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		var out string
		if err := h.Get(ctx, &out); err != nil {
			return err
		}
		if out != "x" {
			b.Fatalf("floor update %s returned %q", update, out)
		}
		return nil
	}
}
