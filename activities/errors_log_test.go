package activities

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A user's mistake (a bad URL, an unknown ref: the request's fault, not
// the service's) is logged once at INFO naming the refusal, never at
// ERROR by the SDK; a failure of the service keeps its ERROR line.
func TestCallerMistakesAreOneInfoLine(t *testing.T) {
	h := newTestHost(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{ErrorTranslation(log)}})
	Register(env, h.acts)

	for _, c := range []struct {
		req  sandboxapi.WorkspaceRequest
		kind *sandboxapi.Kind
	}{
		{sandboxapi.WorkspaceRequest{UserID: "alice", ProjectID: "p1", RepoURL: "/home/me/app", Mode: sandboxapi.ModeEdit, ConversationID: "c1"}, sandboxapi.ErrInvalidArgument},
		{func() sandboxapi.WorkspaceRequest {
			r := h.request(sandboxapi.ModeAnalysis, "")
			r.BaseRef = "no-such-branch"
			return r
		}(), sandboxapi.ErrRefNotFound},
	} {
		logs.Reset()
		_, err := env.ExecuteActivity(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey(c.req.Key()), Request: &c.req})
		wantAppError(t, err, c.kind)
		out := logs.String()
		assert.NotContains(t, out, "level=ERROR", out)
		require.Equal(t, 1, strings.Count(out, "\n"), "one line: %s", out)
		assert.Contains(t, out, `level=INFO msg="request refused" activity=`+wire.ActivityAcquire+" type="+c.kind.Type)
	}

	logs.Reset()
	_, err := env.ExecuteActivity(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: "ws-" + strings.Repeat("0", 24), Path: "x"})
	wantAppError(t, err, sandboxapi.ErrWorkspaceNotFound)
	assert.Contains(t, logs.String(), "request refused")

	assert.True(t, sandboxapi.ErrFileNotFound.CallerMistake(), "a sub-kind of a caller's mistake")
	for _, k := range []*sandboxapi.Kind{sandboxapi.ErrRuntimeUnavailable, sandboxapi.ErrRepoCacheUnavailable, sandboxapi.ErrSandbox, sandboxapi.ErrTimeout} {
		assert.False(t, k.CallerMistake(), k.Type)
	}
}
