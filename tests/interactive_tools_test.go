package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestInteractiveExecTools: sandbox_exec returns a short command's output
// and exit code; a longer one comes back after yield_time_ms with a session
// id that sandbox_write_stdin writes to, polls and kills.
func TestInteractiveExecTools(t *testing.T) {
	h := startHost(t, "interactive")
	s, _, _ := newEditSession(t, h)
	ctx := ctxFor(t, 2*time.Minute)
	var x tools.Interactive

	out, text, err := x.Exec(ctx, s, tools.ExecToolInput{Cmd: "echo hi; echo err >&2; exit 3", YieldTimeMS: 5000})
	require.NoError(t, err)
	require.NotNil(t, out.ExitCode)
	assert.Equal(t, 3, *out.ExitCode)
	// stdout and stderr are two pipes: which the supervisor reads first is
	// not fixed (a terminal, with --tty, keeps one order).
	assert.ElementsMatch(t, []string{"hi", "err", ""}, strings.Split(out.Output, "\n"), "%q", out.Output)
	assert.False(t, out.Running)
	assert.Contains(t, text, "exit code 3")

	start := time.Now()
	out, _, err = x.Exec(ctx, s, tools.ExecToolInput{Cmd: "echo ready; read line; echo got:$line; sleep 1; echo done", YieldTimeMS: 500})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.True(t, out.Running)
	require.NotEmpty(t, out.SessionID)
	assert.Equal(t, "ready\n", out.Output)
	out, _, err = x.WriteStdin(ctx, s, tools.WriteStdinInput{SessionID: out.SessionID, Chars: "abc\n", YieldTimeMS: 5000})
	require.NoError(t, err)
	require.NotNil(t, out.ExitCode, "%+v", out)
	assert.Equal(t, "got:abc\ndone\n", out.Output, "only what came since the last call")
	assert.Equal(t, 0, *out.ExitCode)

	out, _, err = x.Exec(ctx, s, tools.ExecToolInput{Cmd: "sleep 300", YieldTimeMS: 250})
	require.NoError(t, err)
	require.True(t, out.Running)
	id := out.SessionID
	out, _, err = x.WriteStdin(ctx, s, tools.WriteStdinInput{SessionID: id, YieldTimeMS: 300})
	require.NoError(t, err)
	assert.True(t, out.Running, "an empty write polls")
	out, _, err = x.WriteStdin(ctx, s, tools.WriteStdinInput{SessionID: id, Kill: true, YieldTimeMS: 5000})
	require.NoError(t, err)
	require.NotNil(t, out.ExitCode)
	assert.Equal(t, 137, *out.ExitCode)

	out, _, err = x.Exec(ctx, s, tools.ExecToolInput{Cmd: "printf 'name? '; read n; echo hello $n", TTY: true, YieldTimeMS: 1000})
	require.NoError(t, err)
	require.True(t, out.Running)
	assert.Contains(t, out.Output, "name?")
	out, _, err = x.WriteStdin(ctx, s, tools.WriteStdinInput{SessionID: out.SessionID, Chars: "bob\n", YieldTimeMS: 5000})
	require.NoError(t, err)
	assert.Contains(t, out.Output, "hello bob")

	_, _, err = x.Exec(ctx, s, tools.ExecToolInput{Cmd: "true", YieldTimeMS: 100})
	assert.True(t, sandboxapi.IsInvalidArgument(err), "yield_time_ms below 250: %v", err)
	_, _, err = x.WriteStdin(ctx, s, tools.WriteStdinInput{SessionID: "proc-nope"})
	assert.True(t, sandboxapi.IsNotFound(err), "%v", err)
}

// TestMCPInteractiveExecTools: sandbox_exec and sandbox_write_stdin over
// MCP (sandboxctl mcp, stdio): a command left running is continued by its
// session_id, also from a new MCP process (its output since the oldest
// offset still buffered), and a bad yield is an InvalidArgument tool error.
func TestMCPInteractiveExecTools(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "mcpinteractive")
	url := mcpRepo(t)
	args := []string{"--repo", url, "--user", uniq(t, "u"), "--project", "p", "--conversation", "c1"}
	cs := mcpSession(t, bin, h.Config.TaskQueue, args...)

	var out tools.ExecToolOutput
	callTool(t, cs, tools.ExecToolName, map[string]any{"cmd": "echo ready; read l; echo got:$l; exit 5", "yield_time_ms": 500}, &out)
	require.True(t, out.Running, "%+v", out)
	require.NotEmpty(t, out.SessionID)
	assert.Equal(t, "ready\n", out.Output)
	id := out.SessionID
	var next tools.ExecToolOutput
	callTool(t, cs, tools.WriteStdinToolName, map[string]any{"session_id": id, "chars": "abc\n", "yield_time_ms": 10000}, &next)
	require.NotNil(t, next.ExitCode, "%+v", next)
	assert.Equal(t, 5, *next.ExitCode)
	assert.Equal(t, "got:abc\n", next.Output, "only the output since the last call")

	callTool(t, cs, tools.ExecToolName, map[string]any{"command": "echo one; sleep 300", "yield_time_ms": 500}, &out)
	require.True(t, out.Running)
	require.NoError(t, cs.Close())
	cs2 := mcpSession(t, bin, h.Config.TaskQueue, args...)
	var again tools.ExecToolOutput
	callTool(t, cs2, tools.WriteStdinToolName, map[string]any{"session_id": out.SessionID, "kill": true, "yield_time_ms": 10000}, &again)
	require.NotNil(t, again.ExitCode, "%+v", again)
	assert.Equal(t, 137, *again.ExitCode, "killed")
	assert.Equal(t, "one\n", again.Output, "a new MCP process reads from the oldest buffered output")

	res, err := cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: tools.ExecToolName, Arguments: map[string]any{"cmd": "true", "yield_time_ms": 100}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, fmt.Sprint(res.Content[0].(*mcp.TextContent).Text), "InvalidArgument")
}
