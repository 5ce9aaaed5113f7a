package tests

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Two clients read, modify and write the same file: with if_match the
// second write fails with SandboxConflict and the first one's update is
// kept (before this, the second silently replaced it). The same through
// edit_file, for a removed file, through the CLI and the MCP text editor.
func TestIfMatchKeepsConcurrentUpdates(t *testing.T) {
	h := startHost(t, "ifmatch")
	url := mcpRepo(t)
	user := uniq(t, "u")
	ctx := ctxFor(t, 3*time.Minute)
	req := editRequest(user, "p", "c1", url)
	a, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	b, err := h.client.Session(hd.WorkspaceID)
	require.NoError(t, err)

	readA, err := a.ReadFileResult(ctx, "README.md")
	require.NoError(t, err)
	readB, err := b.ReadFileResult(ctx, "README.md")
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.ContentHash(readA.Content), readA.ContentHash)
	assert.Equal(t, readA.ContentHash, readB.ContentHash)

	wa, err := a.WriteFileIfMatch(ctx, "README.md", append(readA.Content, "from a\n"...), 0, readA.ContentHash)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.ContentHash(append(readA.Content, "from a\n"...)), wa.ContentHash)
	_, err = b.WriteFileIfMatch(ctx, "README.md", append(readB.Content, "from b\n"...), 0, readB.ContentHash)
	require.Error(t, err)
	assert.True(t, sandboxapi.IsConflict(err), "%v", err)
	assert.Contains(t, err.Error(), "changed since it was read")
	got, err := a.ReadFile(ctx, "README.md")
	require.NoError(t, err)
	assert.Equal(t, string(readA.Content)+"from a\n", string(got), "a's update is kept")

	// edit_file: a stale hash is refused, the current one applies.
	_, err = b.EditFile(ctx, sandboxapi.EditFileInput{Path: "README.md", Command: sandboxapi.EditStrReplace, OldStr: "from a", NewStr: "from b", IfMatch: readB.ContentHash})
	assert.True(t, sandboxapi.IsConflict(err), "%v", err)
	ed, err := b.EditFile(ctx, sandboxapi.EditFileInput{Path: "README.md", Command: sandboxapi.EditStrReplace, OldStr: "from a", NewStr: "from b", IfMatch: wa.ContentHash})
	require.NoError(t, err)
	got, err = a.ReadFile(ctx, "README.md")
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.ContentHash(got), ed.ContentHash)

	// A removed file cannot match; a malformed hash is refused before anything runs.
	require.NoError(t, a.WriteFile(ctx, "gone.txt", []byte("x"), 0))
	r, err := a.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"rm", "gone.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode)
	_, err = a.WriteFileIfMatch(ctx, "gone.txt", []byte("y"), 0, sandboxapi.ContentHash([]byte("x")))
	assert.True(t, sandboxapi.IsConflict(err), "%v", err)
	assert.Contains(t, err.Error(), "removed since it was read")
	_, err = sandboxclient.Call(ctx, a, sandboxapi.OpWriteFile, sandboxapi.WriteFileInput{Path: "gone.txt", Content: []byte("y"), IfMatch: "md5:abc"})
	require.Error(t, err)
	assert.True(t, sandboxapi.IsInvalidArgument(err), "%v", err)
	_, err = a.ReadFile(ctx, "gone.txt")
	assert.True(t, sandboxapi.IsFileNotFound(err), "nothing was written: %v", err)

	// The CLI: read --json shows the hash, write --if-match refuses a stale one (exit 1).
	bin := buildCLI(t)
	q := h.Config.TaskQueue
	rr := runCLI(t, bin, q, "", "read", hd.WorkspaceID, "README.md", "--json")
	require.Equal(t, 0, rr.code, rr.stderr)
	var res sandboxapi.ReadFileResult
	require.NoError(t, json.Unmarshal([]byte(rr.stdout), &res))
	rr = runCLI(t, bin, q, "new\n", "write", hd.WorkspaceID, "README.md", "--if-match", readA.ContentHash)
	assert.Equal(t, 1, rr.code, rr.stdout)
	assert.Contains(t, rr.stderr, "SandboxConflict")
	rr = runCLI(t, bin, q, "new\n", "write", hd.WorkspaceID, "README.md", "--if-match", res.ContentHash)
	require.Equal(t, 0, rr.code, rr.stderr)

	// The MCP text editor: a view gives the hash, an edit with a stale one is a tool error.
	cs := mcpSession(t, bin, q, "--workspace", hd.WorkspaceID)
	var view tools.EditorOutput
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "view", "path": "README.md"}, &view)
	assert.Equal(t, sandboxapi.ContentHash([]byte("new\n")), view.ContentHash)
	stale, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tools.TextEditor, Arguments: map[string]any{
		"command": "str_replace", "path": "README.md", "old_str": "new", "new_str": "newer", "if_match": res.ContentHash}})
	require.NoError(t, err)
	assert.True(t, stale.IsError)
	var edited tools.EditorOutput
	callTool(t, cs, tools.TextEditor, map[string]any{"command": "str_replace", "path": "README.md", "old_str": "new", "new_str": "newer", "if_match": view.ContentHash}, &edited)
	assert.Equal(t, sandboxapi.ContentHash([]byte("newer\n")), edited.ContentHash)
}
