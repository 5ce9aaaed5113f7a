package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The README's "Agents in Go" program, taken verbatim from README.md, builds
// in an external module (tests/extmod: its own go.mod, a replace of this
// repository, as a user would write it) and works against an embedded
// worker: acquire, exec, write, diff, commit, and errors.Is on a path escape.
// The module may import nothing internal: the compiler enforces it.
func TestExternalModuleRunsTheREADMEProgram(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- agents-in-go:begin -->\n```go\n(.*?)```\n<!-- agents-in-go:end -->").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no agents-in-go block")

	root, err := filepath.Abs("..")
	require.NoError(t, err)
	mod := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("extmod", f))
		require.NoError(t, err)
		if f == "go.mod" {
			data = regexp.MustCompile(`(?m)^replace github.com/sandboxcore/sandboxcore => .*$`).
				ReplaceAll(data, []byte("replace github.com/sandboxcore/sandboxcore => "+root))
		}
		require.NoError(t, os.WriteFile(filepath.Join(mod, f), data, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(mod, "main.go"), m[1], 0o644))
	bin := filepath.Join(mod, "agent")
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "the README program does not build in an external module:\n%s", out)

	h := startHost(t, "extmod")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "acme", "app"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial commit")
	run := exec.Command(bin)
	run.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+h.Config.TaskQueue, "REPO_URL="+gittest.FileURL(upstream))
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	require.NoError(t, run.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	got := stdout.String()
	assert.Regexp(t, `workspace ws-[0-9a-f]{24} on branch agent/[0-9a-f]{16}/edits-c42 contract `+regexp.QuoteMeta(sandboxapi.ContractVersion), got)
	assert.Regexp(t, `exec: exit 0: [0-9a-f]+ initial commit`, got)
	assert.Contains(t, got, "diff: files [notes/hello.txt]")
	commit := regexp.MustCompile(`commit ([0-9a-f]{40}) on agent/[0-9a-f]{16}/edits-c42`).FindStringSubmatch(got)
	require.NotNil(t, commit, got)
	assert.Contains(t, got, "path escape refused: InvalidWorkspacePath")

	// The commit is real: the workspace's branch tip holds the file.
	req := sandboxapi.WorkspaceRequest{UserID: "alice", ProjectID: "p1", RepoURL: gittest.FileURL(upstream), Mode: sandboxapi.ModeEdit, ConversationID: "c42"}
	s, _, err := h.client.Acquire(ctxFor(t, time.Minute), req)
	require.NoError(t, err)
	res, err := s.Exec(ctxFor(t, time.Minute), sandboxapi.ExecRequest{Cmd: []string{"git", "show", "HEAD:notes/hello.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "hello from the agent\n", string(res.Stdout))
	head, err := s.Exec(ctxFor(t, time.Minute), sandboxapi.ExecRequest{Cmd: []string{"git", "rev-parse", "HEAD"}})
	require.NoError(t, err)
	assert.Equal(t, commit[1], strings.TrimSpace(string(head.Stdout)))
}
