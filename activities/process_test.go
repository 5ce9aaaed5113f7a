package activities

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/store/sqlite"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// plainRuntime is a runtime without sandbox.ProcessRuntime (as a remote
// runtime is): Exec runs a command in the usual way.
type plainRuntime struct{ id string }

func (r plainRuntime) ID() string { return r.id }
func (plainRuntime) State(context.Context) (sandbox.RuntimeState, error) {
	return sandbox.RuntimeRunning, nil
}
func (plainRuntime) Start(context.Context) error { return nil }
func (plainRuntime) Stop(context.Context) error  { return nil }
func (plainRuntime) Exec(_ context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	return sandboxapi.ExecResult{ExitCode: 0, Stdout: []byte("ran " + req.Cmd[0] + "\n")}, nil
}
func (r plainRuntime) ExecStream(ctx context.Context, req sandboxapi.ExecRequest, _ func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error) {
	return r.Exec(ctx, req)
}

type plainProvider struct{}

func (plainProvider) Kind() string                              { return "plain" }
func (plainProvider) Capabilities() sandbox.RuntimeCapabilities { return sandbox.RuntimeCapabilities{} }
func (plainProvider) Create(_ context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	return plainRuntime{spec.ID}, nil
}
func (plainProvider) Get(_ context.Context, id string) (sandbox.Runtime, error) {
	return plainRuntime{id}, nil
}
func (plainProvider) List(context.Context, map[string]string) ([]sandbox.RuntimeSummary, error) {
	return nil, nil
}
func (plainProvider) Destroy(context.Context, string) error { return nil }

// A runtime without processes: every process activity is
// SandboxCommandRejected (asserted here, at the consumer), and exec's
// start reports Unsupported without running anything (the workflow then
// runs the command with the exec activity, which still works).
func TestRuntimeWithoutProcesses(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	req := sandboxapi.WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "https://example.com/o/r.git", Mode: sandboxapi.ModeEdit, ConversationID: "c"}
	ws := sandboxapi.Workspace{ID: sandboxapi.WorkspaceIDForKey(req.Key()), UserID: "u", ProjectID: "p", Mode: sandboxapi.ModeEdit, ConversationID: "c",
		HostID: "h", State: sandboxapi.WorkspaceReady, LocalPath: t.TempDir(), BranchName: "agent/edits-c",
		Repo: sandboxapi.RepoIdentity{Host: "example.com", Owner: "o", Name: "r", URL: req.RepoURL}, CreatedAt: time.Now(), UpdatedAt: time.Now(), LastUsedAt: time.Now()}
	require.NoError(t, st.CreateWorkspace(ctx, ws))
	a := &Activities{Store: st, Runtimes: plainProvider{}, HostID: "h"}

	start, err := a.startExec(ctx, wire.ExecActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ExecRequest{Cmd: []string{"true"}}, ProcessID: "exec-x", Wait: time.Second})
	require.NoError(t, err)
	assert.True(t, start.Unsupported)
	res, err := a.runExec(ctx, wire.ExecActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ExecRequest{Cmd: []string{"true"}}})
	require.NoError(t, err)
	assert.Equal(t, "ran true\n", string(res.Stdout))

	_, err = a.ProcessStart(ctx, wire.OpInput[sandboxapi.ProcessStartInput]{WorkspaceID: ws.ID, Request: sandboxapi.ProcessStartInput{Cmd: []string{"sleep", "1"}}})
	assert.True(t, sandboxapi.IsCommandRejected(sandboxapi.FromTemporal(err)), "%v", err)
	_, err = a.ProcessRead(ctx, wire.ProcessReadActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ProcessReadInput{ProcessID: "p"}})
	assert.True(t, sandboxapi.IsCommandRejected(sandboxapi.FromTemporal(err)), "%v", err)
	_, err = a.ProcessList(ctx, wire.WorkspaceActivityInput{WorkspaceID: ws.ID})
	assert.True(t, sandboxapi.IsCommandRejected(sandboxapi.FromTemporal(err)), "%v", err)
	_, err = a.ProcessSignal(ctx, wire.OpInput[sandboxapi.ProcessSignalInput]{WorkspaceID: ws.ID, Request: sandboxapi.ProcessSignalInput{ProcessID: "p"}})
	assert.True(t, sandboxapi.IsCommandRejected(sandboxapi.FromTemporal(err)), "%v", err)
}
