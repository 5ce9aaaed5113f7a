package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
)

// mcpRepo is the upstream repository the MCP tests bind to.
func mcpRepo(t *testing.T) string {
	t.Helper()
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "acme", "mcp"), "trunk")
	gittest.Commit(t, upstream, ".gitignore", "*.log\n", "ignore logs")
	gittest.Commit(t, upstream, "src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n", "main")
	gittest.Commit(t, upstream, "README.md", "# demo\nline two\nline three\ndup dup\nend\n", "readme")
	return gittest.FileURL(upstream)
}

// The official MCP TypeScript client (@modelcontextprotocol/sdk, pinned in
// tests/node/package.json) drives `sandboxctl mcp` over stdio and over
// streamable HTTP against an embedded worker: tools/list of an edit and an
// analysis binding, view with a range, str_replace then view, an old_str
// occurring twice, create and insert, shell exit 3, a 100,000-line output
// cut and paged back with sandbox_output, progress notifications, search,
// git status/diff/commit/log, typed errors (../../etc/passwd →
// InvalidWorkspacePath), and HTTP without the bearer token refused. The
// client validates every structured result against the tool's output schema.
func TestMCPTypeScriptClient(t *testing.T) {
	requireNode(t)
	bin := buildCLI(t)
	h := startHost(t, "mcpts")
	url := mcpRepo(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			cmd := exec.Command("node", "mcp.mjs", transport)
			cmd.Dir = "node"
			cmd.Env = append(os.Environ(), "SANDBOXCTL="+bin, "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+h.Config.TaskQueue,
				"REPO_URL="+url, "SANDBOX_USER="+uniq(t, "mcp"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			case <-time.After(5 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("node client did not finish; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			steps := []string{"tools/list edit", "tools/list analysis", "view with a range", "str_replace then view",
				"str_replace of an old_str occurring twice", "create and insert", "shell exit 3", "100000 lines cut and paged back",
				"progress", "search", "git status diff commit log", "typed errors InvalidWorkspacePath", "done"}
			if transport == "http" {
				steps = append(steps, "http without the token refused")
			}
			for _, step := range steps {
				assert.Contains(t, stdout.String(), "ok "+transport+" "+step+"\n", "step %q", step)
			}
		})
	}
}

// sandboxctl mcp refuses a binding it cannot serve before it starts: no
// workspace, both kinds of binding, and streamable HTTP off loopback
// without a bearer token.
func TestMCPCommandRefusesBadBindings(t *testing.T) {
	bin := buildCLI(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("short\n"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "no workspace"},
		{[]string{"mcp", "--workspace", "ws-0123456789abcdef01234567", "--repo", "file:///x/y"}, "not both"},
		{[]string{"mcp", "--workspace", "../etc"}, "InvalidArgument"},
		{[]string{"mcp", "--workspace", "ws-0123456789abcdef01234567", "--http", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"mcp", "--workspace", "ws-0123456789abcdef01234567", "--http", "127.0.0.1:0", "--token-file", token}, "at least 16"},
		{[]string{"mcp", "--workspace", "ws-0123456789abcdef01234567", "--token-file", token}, "--token-file is for --http"},
	} {
		r := runCLI(t, bin, "q-none", "", c.args...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.True(t, strings.Contains(r.stderr, c.want), "%v: %s", c.args, r.stderr)
	}
}

// TestMCPCommandRefusesUnknownWorkspace: a well-formed id no workspace has
// fails at start-up with WorkspaceNotFound and exit 1 (as every other
// command does), instead of serving read tools that cannot work.
func TestMCPCommandRefusesUnknownWorkspace(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "mcp-unknown")
	r := runCLI(t, bin, h.Config.TaskQueue, "", "mcp", "--workspace", "ws-0123456789abcdef01234567")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "WorkspaceNotFound", r.stderr)
	assert.Empty(t, r.stdout, "no MCP traffic from a server that did not start")
	r = runCLI(t, bin, h.Config.TaskQueue, "", "mcp", "--workspace", "ws-0123456789abcdef01234567", "--json")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, `"type":"WorkspaceNotFound"`, r.stderr)
}
