package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	tokenspb "go.temporal.io/server/api/token/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// slowHeartbeats is a client interceptor that holds every heartbeat call of
// the activity type named activityType for delay before sending it (a
// loaded server answering late), counting them.
func slowHeartbeats(activityType string, delay time.Duration, held *atomic.Int64) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if hb, ok := req.(*workflowservice.RecordActivityTaskHeartbeatRequest); ok {
			var tok tokenspb.Task
			if proto.Unmarshal(hb.GetTaskToken(), &tok) == nil && tok.GetActivityType() == activityType {
				held.Add(1)
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// An eviction run whose signal activity's heartbeat calls are answered
// later than their deadline (the SDK then cancels the activity's context,
// though the attempt is still running: at scale, 140 of 200 signals failed
// "context canceled") still delivers every evict signal: every workspace is
// evicted, none fails.
func TestEvictionSignalsSurviveSlowHeartbeats(t *testing.T) {
	var held atomic.Int64
	// Longer than the one-second deadline of a heartbeat call on a host
	// worker (its heartbeat throttle interval).
	c, err := sdkclient.Dial(sdkclient.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(quiet),
		ConnectionOptions: sdkclient.ConnectionOptions{DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(slowHeartbeats(wire.ActivitySignalEvictions, 1500*time.Millisecond, &held))}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	name := uniq(t, "ev-slowhb")
	h := startHostWith(t, name, hostworker.Options{Client: c}, aggressive(tinyBudget))
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	e := &evEnv{t: t, h: h, user: uniq(t, "u"), up: up, url: gittest.FileURL(up)}

	const n = 6
	var ids []string
	for i := range n {
		_, hd := e.acquire(sandboxapi.ModeEdit, fmt.Sprintf("c%d", i))
		ids = append(ids, hd.WorkspaceID)
	}
	res := e.run(false)
	byID := resultsByID(res)
	for _, id := range ids {
		r, ok := byID[string(sandboxapi.EvictionEvictWorkspace)+":"+id]
		require.True(t, ok, "no eviction result for %s: %+v", id, res.Hosts[0].Results)
		assert.Equal(t, sandboxapi.OutcomeDone, r.Outcome, "%s: %s", id, r.Reason)
		assert.Equal(t, sandboxapi.WorkspaceEvicted, e.row(id).State, id)
	}
	assert.Zero(t, res.Summary.Failed, "%+v", res.Summary)
	assert.Positive(t, held.Load(), "the signal activity sent no heartbeat: the test did not slow one down")
}
