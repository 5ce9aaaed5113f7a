package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/mcpauth"
	"github.com/sandboxcore/sandboxcore/internal/tools"
)

// bearerRoundTripper adds "Authorization: Bearer <token>" to every request.
type bearerRoundTripper struct{ token string }

func (b bearerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// startMultiMCP starts `sandboxctl mcp --http 127.0.0.1:0 --multi
// --key-file keyFile` and returns its base URL (http://ADDR/mcp).
func startMultiMCP(t *testing.T, bin, queue, keyFile string) string {
	t.Helper()
	cmd := exec.Command(bin, "mcp", "--http", "127.0.0.1:0", "--multi", "--key-file", keyFile, "--session-timeout", "2m")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+queue)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	listening := regexp.MustCompile(`serving streamable HTTP on (http://\S+)/mcp/<workspace id>`)
	found := make(chan string, 1)
	var log syncBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1] + "/mcp"
			}
			_, _ = log.Write([]byte(sc.Text() + "\n"))
		}
	}()
	select {
	case base := <-found:
		return base
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line from sandboxctl mcp --multi:\n%s", log.String())
		return ""
	}
}

// TestMCPMultiWorkspaceEndpoint: one `sandboxctl mcp --multi` process
// serves two workspaces of a real worker at /mcp/<workspace id>, each with
// a token of `sandboxctl mcp token` (its last line): the MCP Go SDK client
// and the official TypeScript client (tests/node/mcp_multi.mjs) list the
// tools and run sandbox_shell in each, and see their own files; a missing,
// forged or expired token is refused with 401, a token of the other
// workspace with 403, and a valid token of a workspace that does not exist
// gets 404 WorkspaceNotFound.
func TestMCPMultiWorkspaceEndpoint(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "mcpmulti")
	url := mcpRepo(t)
	user := uniq(t, "u")
	ctx := ctxFor(t, 5*time.Minute)
	var ids []string
	for _, conv := range []string{"a", "b"} {
		s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", conv, url))
		require.NoError(t, err)
		require.NoError(t, s.WriteFile(ctx, "whoami.txt", []byte(hd.WorkspaceID+"\n"), 0o644))
		_, err = s.Release(ctx, false)
		require.NoError(t, err)
		ids = append(ids, hd.WorkspaceID)
	}
	wsA, wsB := ids[0], ids[1]

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	keyFile := filepath.Join(t.TempDir(), "mcp.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600))
	key, err := mcpauth.LoadKey(keyFile)
	require.NoError(t, err)
	token := func(ws string) string {
		r := runCLI(t, bin, h.Config.TaskQueue, "", "mcp", "token", ws, "--ttl", "10m", "--key-file", keyFile)
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		tok := lines[len(lines)-1]
		c, err := key.Verify(tok, time.Now())
		require.NoError(t, err)
		require.Equal(t, ws, c.WorkspaceID)
		return tok
	}
	tokA, tokB := token(wsA), token(wsB)
	expired, err := key.Sign(wsA, time.Now().Unix()-1)
	require.NoError(t, err)

	base := startMultiMCP(t, bin, h.Config.TaskQueue, keyFile)

	t.Run("refusals", func(t *testing.T) {
		missing := "ws-" + strings.Repeat("0", 24)
		for _, c := range []struct {
			name, ws, token string
			status          int
		}{
			{"no token", wsA, "", 401},
			{"forged", wsA, tokA[:len(tokA)-4] + "AAAA", 401},
			{"expired", wsA, expired, 401},
			{"A's token on B", wsB, tokA, 403},
			{"a workspace that does not exist", missing, token(missing), 404},
		} {
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req, err := http.NewRequest(http.MethodPost, base+"/"+c.ws, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var out struct {
				Error struct{ Type string } `json:"error"`
			}
			if c.status == 404 {
				assert.NoError(t, json.NewDecoder(res.Body).Decode(&out), c.name)
				assert.Equal(t, "WorkspaceNotFound", out.Error.Type, c.name)
			} else {
				assert.True(t, strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer "), "%s: %q", c.name, res.Header.Get("WWW-Authenticate"))
			}
			res.Body.Close()
			assert.Equal(t, c.status, res.StatusCode, c.name)
		}
	})

	t.Run("go-sdk", func(t *testing.T) {
		for _, c := range []struct{ ws, token string }{{wsA, tokA}, {wsB, tokB}} {
			hc := &http.Client{Transport: bearerRoundTripper{c.token}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "multi", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: base + "/" + c.ws, HTTPClient: hc}, nil)
			require.NoError(t, err)
			lt, err := cs.ListTools(ctx, nil)
			require.NoError(t, err)
			var names []string
			for _, tl := range lt.Tools {
				names = append(names, tl.Name)
			}
			assert.Contains(t, names, tools.Shell, c.ws)
			var sh tools.ShellOutput
			callTool(t, cs, tools.Shell, map[string]any{"command": "cat whoami.txt"}, &sh)
			assert.Equal(t, 0, sh.ExitCode, c.ws)
			assert.Equal(t, c.ws+"\n", sh.Stdout, "the shell ran in its own workspace")
			require.NoError(t, cs.Close())
		}
		// A's token cannot open B through the SDK either.
		_, err := mcp.NewClient(&mcp.Implementation{Name: "multi", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: base + "/" + wsB, HTTPClient: &http.Client{Transport: bearerRoundTripper{tokA}}, MaxRetries: -1}, nil)
		assert.Error(t, err)
	})

	t.Run("typescript", func(t *testing.T) {
		requireNode(t)
		cmd := exec.Command("node", "mcp_multi.mjs")
		cmd.Dir = "node"
		cmd.Env = append(os.Environ(), "MCP_BASE="+base, "WS_A="+wsA, "WS_B="+wsB, "TOKEN_A="+tokA, "TOKEN_B="+tokB, "TOKEN_EXPIRED="+expired)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		case <-time.After(3 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("node client did not finish; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		for _, step := range []string{"refusals 401 403", "two workspaces one endpoint", "done"} {
			assert.Contains(t, stdout.String(), "ok multi "+step+"\n", "step %q", step)
		}
	})
}
