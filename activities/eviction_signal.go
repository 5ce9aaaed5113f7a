package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// signalConcurrency bounds the evict signals in flight at once: enough to
// hide a loaded server's latency (a signal-with-start took 0.2–0.8 s with
// 200 sessions evicting on 2 cores, docs/BENCHMARKS.md "Scale"), few enough
// not to flood the server the sessions themselves need.
const signalConcurrency = 8

// signalTimeout bounds one signal-with-start.
const signalTimeout = 30 * time.Second

// signalProgress is SignalEvictions' heartbeat detail: the indexes into
// SignalEvictionsInput.Requests whose signal was delivered, ascending. A
// retry of the activity reads it back and sends only the others.
type signalProgress struct {
	Delivered []int `json:"delivered"`
}

// SignalEvictions sends each request to its workspace's SessionWorkflow with
// signal-with-start (signal "evict"; a session that is not running starts on
// in.TaskQueue with SessionInput{WorkspaceID} and completes after handling
// it), each within signalTimeout: one workspace's requests one after the
// other in their order, at most signalConcurrency workspaces at once.
//
// It heartbeats its progress (signalProgress) after every delivered signal,
// and a retry resumes from the last progress recorded: delivered requests
// are not sent again. Sending one again (delivered, but its progress not yet
// recorded) is harmless: the session re-checks every rule, answers an
// already evicted workspace "skipped", and the eviction run keeps the first
// reply per request id (docs/DESIGN.md "Eviction policy").
//
// An end of the activity's context (cancellation asked for, the attempt
// timed out or unknown to the server, its deadline; not a late heartbeat
// call, HeartbeatShield) stops the signals and returns an error, so that the
// retry resumes. Failures of single signals are reported per request id,
// not as an error.
func (e *EvictionActivities) SignalEvictions(ctx context.Context, in wire.SignalEvictionsInput) (wire.SignalEvictionsResult, error) {
	out := wire.SignalEvictionsResult{Failed: map[string]string{}}
	delivered := previousSignalProgress(ctx, len(in.Requests))
	pending := pendingSignals(len(in.Requests), delivered)

	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, signalConcurrency)
	)
	heartbeat := func() {
		if !activity.IsActivity(ctx) {
			return
		}
		mu.Lock()
		p := signalProgress{Delivered: slices.Sorted(slices.Values(delivered))}
		mu.Unlock()
		activity.RecordHeartbeat(ctx, p)
	}
	// One workspace's requests go one after the other, in plan order (a
	// runtime's stop before its workspace's eviction: the session answers
	// them in the order they arrive); different workspaces in parallel.
	for _, group := range signalGroups(in.Requests, pending) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, i := range group {
				if ctx.Err() != nil {
					return // the retry sends the rest
				}
				r := in.Requests[i]
				cctx, cancel := context.WithTimeout(ctx, signalTimeout)
				err := SignalSession(cctx, e.Client, in.TaskQueue, r.WorkspaceID, sandboxapi.SignalEvict, r.Request)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					delivered = append(delivered, i)
				case ctx.Err() != nil:
					// The attempt is over: not this request's failure; the
					// retry sends it.
				default:
					out.Failed[r.Request.RequestID] = err.Error()
				}
				mu.Unlock()
				if err == nil {
					heartbeat()
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return out, fmt.Errorf("evict signals interrupted after %d of %d delivered: %w", len(delivered), len(in.Requests), context.Cause(ctx))
	}
	return out, nil
}

// previousSignalProgress returns the indexes (below n, each once) a previous
// attempt of SignalEvictions recorded as delivered; none on a first attempt
// or outside an activity.
func previousSignalProgress(ctx context.Context, n int) []int {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return nil
	}
	var p signalProgress
	if err := activity.GetHeartbeatDetails(ctx, &p); err != nil {
		return nil // unreadable: send everything again (harmless)
	}
	var out []int
	for _, i := range p.Delivered {
		if i >= 0 && i < n && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// signalGroups splits pending (ascending indexes into requests) into one
// group per workspace, each in the order given, the groups in the order of
// their first request.
func signalGroups(requests []wire.SessionRequest, pending []int) [][]int {
	at := map[string]int{}
	var groups [][]int
	for _, i := range pending {
		ws := requests[i].WorkspaceID
		g, ok := at[ws]
		if !ok {
			g = len(groups)
			at[ws] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// pendingSignals returns, ascending, the indexes below n not in delivered.
func pendingSignals(n int, delivered []int) []int {
	done := make([]bool, n)
	for _, i := range delivered {
		if i >= 0 && i < n {
			done[i] = true
		}
	}
	var out []int
	for i := range n {
		if !done[i] {
			out = append(out, i)
		}
	}
	return out
}

// SignalSession sends signal (with arg) to workspace wsID's SessionWorkflow
// by signal-with-start: a session that is not running starts on taskQueue
// (the shared queue) with SessionInput{WorkspaceID: wsID}, handles the signal
// and completes. Errors: ErrInvalidArgument (bad id) or the client's error.
func SignalSession(ctx context.Context, c client.Client, taskQueue, wsID, signal string, arg any) error {
	wfID, err := sandboxapi.SessionWorkflowID(wsID)
	if err != nil {
		return err
	}
	_, err = c.SignalWithStartWorkflow(ctx, wfID, signal, arg, client.StartWorkflowOptions{
		ID:                    wfID,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrWorkspace).ValueSet(wsID),
			temporal.NewSearchAttributeKeyKeyword(sandboxapi.SearchAttrState).ValueSet(sandboxapi.StateAcquiring)),
		StaticSummary: sandboxapi.SessionSummary(wsID, nil),
		StaticDetails: sandboxapi.SessionDetails(wsID, nil),
	}, sandboxapi.SessionWorkflowType, sandboxapi.SessionInput{WorkspaceID: wsID})
	return err
}
