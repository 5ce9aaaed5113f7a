package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/payloadcodec"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// A CleanupWorkflow started by a raw client with a misspelt dry_run
// ("dryRun") fails with InvalidArgument naming the field and destroys
// nothing: the workspace and its unsaved file are still there. (Decoded
// leniently, the field was ignored and the cleanup destroyed the workspace
// for real.)
func TestCleanupRefusesUnknownFields(t *testing.T) {
	h := startHost(t, "cleanup-strict")
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 3*time.Minute)
	require.NoError(t, s.WriteFile(ctx, "work.txt", []byte("unsaved\n"), 0))
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "cleanup-strict-" + hd.UserID, TaskQueue: h.Config.TaskQueue},
		sandboxapi.CleanupWorkflowType, map[string]any{"user_id": hd.UserID, "dryRun": true})
	require.NoError(t, err)
	var rep sandboxapi.CleanupReport
	err = run.Get(ctx, &rep)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type())
	assert.Contains(t, app.Message(), `"dryRun"`)
	assert.Zero(t, rep.Summary.Destroyed)
	data, err := os.ReadFile(filepath.Join(hd.LocalPath, "work.txt"))
	require.NoError(t, err, "the workspace was not destroyed")
	assert.Equal(t, "unsaved\n", string(data))
}

// A client whose payloads are encrypted with a key the worker does not hold
// gets a typed, non-retryable InvalidArgument for an update (not the SDK's
// retryable "wrapError"), and its signals never stall the session: a
// wrong-key pin is dropped, the valid unpin after it is handled, and the
// session still releases and resumes.
func TestWrongKeyPayloadsAreRefusedTypedAndNeverStallTheSession(t *testing.T) {
	keyA, keyB := newKeyFile(t, "a"), newKeyFile(t, "b")
	codec := func(spec string) *payloadcodec.Codec {
		c, err := payloadcodec.FromEnv(envOf(map[string]string{payloadcodec.EnvKeys: spec}))
		require.NoError(t, err)
		return c
	}
	ca, cb := codec("a="+keyA), codec("b="+keyB)
	dial := func(c *payloadcodec.Codec) client.Client {
		tc, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(quiet),
			DataConverter: c.DataConverter(), FailureConverter: c.FailureConverter()})
		require.NoError(t, err)
		t.Cleanup(tc.Close)
		return tc
	}
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	ctx := ctxFor(t, 3*time.Minute)
	cfg := baseConfig(t, "wrong-key")
	c1 := dial(ca)
	h1, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: c1, Credentials: creds, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(h1.Stop)
	sc1 := sandboxclient.New(c1, sandboxclient.Options{TaskQueue: cfg.TaskQueue, DataConverter: ca.DataConverter()})
	s1, hd, err := sc1.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c1", gittest.FileURL(upstream)))
	require.NoError(t, err)

	c2 := dial(cb)
	uh, err := c2.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: hd.WorkflowID, UpdateName: sandboxapi.UpdateReadFile,
		Args: []any{map[string]any{"path": "README.md"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = uh.Get(ctx, nil)
	}
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%T %v", err, err)
	assert.Equal(t, sandboxapi.ErrInvalidArgument.Type, app.Type(), "%v", err)
	assert.True(t, app.NonRetryable(), "the same payload never decodes: %v", err)

	require.NoError(t, c2.SignalWorkflow(ctx, hd.WorkflowID, "", sandboxapi.SignalPin, map[string]any{"request_id": "p1", "until": time.Now().Add(time.Hour)}))
	require.NoError(t, c1.SignalWorkflow(ctx, hd.WorkflowID, "", sandboxapi.SignalUnpin, map[string]any{"request_id": "u1"}))
	require.Eventually(t, func() bool {
		var st sandboxapi.EvictionState
		v, err := c1.QueryWorkflow(ctx, hd.WorkflowID, "", sandboxapi.QueryEviction)
		return err == nil && v.Get(&st) == nil && st.LastPinRequest == "u1"
	}, 30*time.Second, 200*time.Millisecond, "the unpin after a wrong-key pin is handled")
	_, err = s1.Release(ctx, false)
	require.NoError(t, err)
	data, err := s1.ReadFile(ctxFor(t, 40*time.Second), "README.md")
	require.NoError(t, err, "the session resumes after a wrong-key signal")
	assert.Equal(t, "hello\n", string(data))
}
