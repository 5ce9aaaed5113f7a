package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// edit_file through the session: concurrent edits of one file by several
// agents all land (each is one step on the worker under the session's
// ordering: no lost update), typed errors cross the wire with their field,
// an analysis workspace refuses edits, and the CLI's edit, log, output and
// ls --depth speak the same updates.
func TestEditFileThroughTheSession(t *testing.T) {
	h := startHost(t, "editfile")
	url := mcpRepo(t)
	ctx := ctxFor(t, 3*time.Minute)
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "edit", url))
	require.NoError(t, err)

	const agents = 8
	var lines strings.Builder
	for i := 0; i < agents; i++ {
		fmt.Fprintf(&lines, "slot %d: empty\n", i)
	}
	_, err = s.EditFile(ctx, sandboxapi.EditFileInput{Path: "shared.txt", Command: sandboxapi.EditCreate, FileText: lines.String()})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, agents)
	for i := 0; i < agents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.EditFile(ctx, sandboxapi.EditFileInput{Path: "shared.txt", Command: sandboxapi.EditStrReplace,
				OldStr: fmt.Sprintf("slot %d: empty", i), NewStr: fmt.Sprintf("slot %d: written by agent %d", i, i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "agent %d", i)
	}
	data, err := s.ReadFile(ctx, "shared.txt")
	require.NoError(t, err)
	for i := 0; i < agents; i++ {
		assert.Contains(t, string(data), fmt.Sprintf("slot %d: written by agent %d\n", i, i))
	}
	assert.NotContains(t, string(data), "empty", "no edit was lost")

	_, err = s.EditFile(ctx, sandboxapi.EditFileInput{Path: "README.md", Command: sandboxapi.EditStrReplace, OldStr: "dup", NewStr: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "occurs 2 times")
	var se *sandboxapi.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "old_str", se.Field)
	require.NoError(t, s.WriteFile(ctx, "blob.bin", []byte{0, 1, 2, 'x'}, 0))
	_, err = s.EditFile(ctx, sandboxapi.EditFileInput{Path: "blob.bin", Command: sandboxapi.EditStrReplace, OldStr: "x", NewStr: "y"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "binary")
	_, err = s.EditFile(ctx, sandboxapi.EditFileInput{Path: "../../etc/passwd", Command: sandboxapi.EditCreate, FileText: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
	res, err := s.EditFile(ctx, sandboxapi.EditFileInput{Path: "README.md", Command: sandboxapi.EditInsert, InsertLine: 0, NewStr: "top"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(res.Snippet, "     1\ttop\n     2\t# demo\n"), res.Snippet)

	ro, _, err := h.client.Acquire(ctx, sandboxapi.WorkspaceRequest{UserID: uniq(t, "u"), ProjectID: "p", RepoURL: url, Mode: sandboxapi.ModeAnalysis, BaseRef: "trunk"})
	require.NoError(t, err)
	_, err = ro.EditFile(ctx, sandboxapi.EditFileInput{Path: "README.md", Command: sandboxapi.EditCreate, FileText: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)

	// The CLI: edit, log, exec --keep-output + output, ls --depth.
	bin := buildCLI(t)
	q := h.Config.TaskQueue
	ws := s.WorkspaceID()
	r := runCLI(t, bin, q, "", "edit", ws, "README.md", "--old", "line three", "--new", "line 3")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\tline 3\n")
	r = runCLI(t, bin, q, "", "edit", ws, "README.md", "--old", "dup", "--new", "x")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "occurs 2 times")
	r = runCLI(t, bin, q, "", "log", ws, "-n", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "readme")
	r = runCLI(t, bin, q, "", "exec", ws, "--max-output", "1000", "--keep-output", "--", "seq", "1", "20000")
	require.Equal(t, 0, r.code, r.stderr)
	i := strings.Index(r.stderr, "sandboxctl output "+ws+" ")
	require.GreaterOrEqual(t, i, 0, r.stderr)
	id := strings.Fields(r.stderr[i:])[3]
	r = runCLI(t, bin, q, "", "output", ws, id)
	require.Equal(t, 0, r.code, r.stderr)
	want, err := exec.Command("seq", "1", "20000").Output()
	require.NoError(t, err)
	assert.Equal(t, string(want), r.stdout)
	r = runCLI(t, bin, q, "", "ls", ws, "--depth", "2", "--skip-hidden", "--skip-ignored")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "src/main.go")
	assert.NotContains(t, r.stdout, ".gitignore")
}

// mcpSession starts `sandboxctl mcp` args… with the MCP Go SDK's client.
func mcpSession(t *testing.T, bin, queue string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+queue)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, stderr.String())
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s: %+v", name, res.Content)
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, out))
	return res
}

// The MCP server resumes its workspace transparently after a release, and
// an output_id stays valid after the MCP process is restarted (the whole
// output is kept on the worker, not in the MCP process); a --workspace
// binding serves the same workspace.
func TestMCPResumesAndOutputOutlivesTheServer(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "mcpresume")
	url := mcpRepo(t)
	user := uniq(t, "u")
	args := []string{"--repo", url, "--user", user, "--project", "p", "--conversation", "c1"}
	cs := mcpSession(t, bin, h.Config.TaskQueue, args...)
	var sh tools.ShellOutput
	callTool(t, cs, tools.Shell, map[string]any{"command": "seq 1 30000"}, &sh)
	require.True(t, sh.Truncated)
	require.NotEmpty(t, sh.OutputID)
	assert.LessOrEqual(t, len(sh.Stdout), tools.DefaultShellOutputBytes+200, "the default keeps 16 KiB of each stream (and a marker)")
	var old tools.ShellOutput
	callTool(t, cs, tools.Shell, map[string]any{"cmd": "echo old name"}, &old)
	assert.Equal(t, "old name\n", old.Stdout, "cmd, sandbox_exec's old name, is accepted")

	s, err := h.client.Session(sandboxapi.WorkspaceIDForKey(editRequest(user, "p", "c1", url).Key()))
	require.NoError(t, err)
	_, err = s.Release(ctxFor(t, time.Minute), false)
	require.NoError(t, err)
	var ed tools.EditorOutput
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "view", "path": "README.md", "view_range": []int{1, 1}}, &ed)
	assert.Equal(t, "     1\t# demo\n", ed.Text, "the released workspace resumed")
	require.NoError(t, cs.Close())

	// A new MCP process, bound by workspace id, pages the kept output.
	cs2 := mcpSession(t, bin, h.Config.TaskQueue, "--workspace", s.WorkspaceID())
	var got strings.Builder
	for off := int64(0); ; {
		var page tools.OutputPage
		callTool(t, cs2, tools.Output, map[string]any{"output_id": sh.OutputID, "offset": off, "limit": 50000}, &page)
		got.WriteString(page.Text)
		off = page.NextOffset
		if page.EOF {
			break
		}
	}
	want, err := exec.Command("seq", "1", "30000").Output()
	require.NoError(t, err)
	assert.Equal(t, string(want), got.String())
	list, err := cs2.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	assert.Contains(t, names, tools.Shell, "a workspace-id binding of an edit workspace gets the write tools")
}

// TestGitToolCheckpointsAndRollsBack drives sandbox_git's checkpoint,
// checkpoints and rollback over MCP: the files come back byte for byte and
// the rollback itself can be undone (docs/API.md "Checkpoints").
func TestGitToolCheckpointsAndRollsBack(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "mcpcheckpoint")
	cs := mcpSession(t, bin, h.Config.TaskQueue, "--repo", mcpRepo(t), "--user", uniq(t, "u"), "--project", "p", "--conversation", "c1")
	var ed tools.EditorOutput
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "create", "path": "notes.txt", "file_text": "first\n"}, &ed)
	var g tools.GitOutput
	callTool(t, cs, tools.Git, map[string]any{"command": "checkpoint", "label": "first draft"}, &g)
	require.NotNil(t, g.Checkpoint)
	first := g.Checkpoint.ID
	assert.Equal(t, "first draft", g.Checkpoint.Label)
	assert.Equal(t, 1, g.Checkpoint.FilesChanged)

	callTool(t, cs, tools.TextEditor, map[string]any{"command": "str_replace", "path": "notes.txt", "old_str": "first", "new_str": "second"}, &ed)
	g = tools.GitOutput{}
	callTool(t, cs, tools.Git, map[string]any{"command": "rollback", "checkpoint": first}, &g)
	require.NotNil(t, g.Rollback)
	assert.Equal(t, first, g.Rollback.Checkpoint.ID)
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "view", "path": "notes.txt"}, &ed)
	assert.Equal(t, "     1\tfirst\n", ed.Text)

	undo := g.Rollback.Undo.ID
	g = tools.GitOutput{}
	callTool(t, cs, tools.Git, map[string]any{"command": "checkpoints"}, &g)
	var ids []int
	for _, cp := range g.Checkpoints {
		ids = append(ids, cp.ID)
	}
	assert.Equal(t, []int{first, undo}, ids)
	callTool(t, cs, tools.Git, map[string]any{"command": "rollback", "checkpoint": undo}, &g)
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "view", "path": "notes.txt"}, &ed)
	assert.Equal(t, "     1\tsecond\n", ed.Text, "the rollback was undone")

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tools.Git, Arguments: map[string]any{"command": "status", "checkpoint": 1}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "checkpoint is for rollback only")
}
