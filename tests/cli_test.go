package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// buildCLI builds bin/sandboxctl into a temp dir (it links only the SDK).
func buildCLI(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandboxctl")
	out, err := exec.Command("go", "build", "-o", bin, "../starter").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, bin, queue, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+queue)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{code, o.String(), e.String()}
}

func TestCLIWalkthrough(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "cli")
	queue := h.Config.TaskQueue
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	url := gittest.FileURL(upstream)
	user := uniq(t, "u")

	r := runCLI(t, bin, queue, "", "acquire", "--repo", url, "--user", user, "--project", "demo", "--mode", "edit", "--conversation", "c1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var hd sandboxapi.Handle
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &hd))
	for _, field := range []string{`"workspace_id"`, `"local_path"`, `"branch"`, `"base_commit"`, `"mode"`, `"capabilities"`} {
		assert.Contains(t, r.stdout, field)
	}
	assert.Equal(t, sandboxapi.EditBranch(user, "demo", "c1"), hd.Branch)
	ws := hd.WorkspaceID

	r = runCLI(t, bin, queue, "", "exec", ws, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code)
	assert.Equal(t, "out\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	// Durations for --timeout: "2s" times out as 2 seconds would (exit 124).
	r = runCLI(t, bin, queue, "", "exec", ws, "--timeout", "2s", "--", "sleep", "30")
	assert.Equal(t, 124, r.code, r.stderr)
	assert.Contains(t, r.stderr, "timed out")
	r = runCLI(t, bin, queue, "", "exec", ws, "--timeout", "60", "--", "true")
	assert.Equal(t, 0, r.code, r.stderr)

	r = runCLI(t, bin, queue, "hello from the agent\n", "write", ws, "notes/hello.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, queue, "", "read", ws, "notes/hello.txt")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello from the agent\n", r.stdout)

	r = runCLI(t, bin, queue, "", "status", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "?? notes/hello.txt")

	r = runCLI(t, bin, queue, "", "diff", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "+hello from the agent")

	r = runCLI(t, bin, queue, "", "search", ws, "from the", "--literal")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "notes/hello.txt:1:hello from the agent")
	r = runCLI(t, bin, queue, "", "search", ws, "no-such-text-anywhere")
	assert.Equal(t, 1, r.code, "no match exits 1 like grep")
	r = runCLI(t, bin, queue, "", "search", ws, "no-such-text-anywhere", "--json")
	assert.Equal(t, 1, r.code, "with --json too")
	assert.Contains(t, r.stdout, `"matches"`)

	// Dashes: a flag-like argument says how to pass it (JSON under --json);
	// after -- the service refuses it and names the way that works.
	r = runCLI(t, bin, queue, "", "search", ws, "-agent", "--json")
	assert.Equal(t, 2, r.code)
	var usage map[string]map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &usage), r.stderr)
	assert.Equal(t, "UsageError", usage["error"]["type"])
	assert.Contains(t, usage["error"]["message"], "goes after --")
	r = runCLI(t, bin, queue, "", "search", ws, "--", "-agent")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `search for the regular expression \-agent instead`)
	r = runCLI(t, bin, queue, "", "search", ws, `\-agent`)
	assert.Equal(t, 1, r.code, "accepted, and no line has \"-agent\": %s", r.stderr)
	assert.Empty(t, r.stderr)

	// Names the agent chooses are shown escaped: no terminal escape, carriage
	// return or newline reaches the screen from status, ls or search.
	r = runCLI(t, bin, queue, "", "exec", ws, "--", "sh", "-c", `touch "$(printf 'evil\033[31mRED')" "$(printf 'x\n?? forged')" "$(printf 'y\rOVER')"; printf 'hit\033[2K\rX\n' > hit.txt`)
	require.Equal(t, 0, r.code, r.stderr)
	for _, args := range [][]string{{"status", ws}, {"ls", ws}, {"search", ws, "hit"}} {
		r = runCLI(t, bin, queue, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.NotContains(t, r.stdout, "\x1b", args)
		assert.NotContains(t, r.stdout, "\r", args)
		assert.NotContains(t, r.stdout, "\n?? forged", args)
	}
	assert.Contains(t, r.stdout, `hit.txt:1:hit\x1b[2K\rX`)
	r = runCLI(t, bin, queue, "", "exec", ws, "--", "sh", "-c", "rm -f evil* x* y* hit.txt")
	require.Equal(t, 0, r.code, r.stderr)

	r = runCLI(t, bin, queue, "", "commit", ws, "-m", "agent: say hello")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "on "+sandboxapi.EditBranch(user, "demo", "c1"))

	// A name that is not UTF-8 cannot travel in JSON unchanged: refused
	// rather than written under another name.
	r = runCLI(t, bin, queue, "x", "write", ws, "new\xffx")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "not valid UTF-8")
	r = runCLI(t, bin, queue, "", "exec", ws, "--", "ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "new")

	r = runCLI(t, bin, queue, "", "read", ws, "../../etc/passwd")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "InvalidWorkspacePath")

	r = runCLI(t, bin, queue, "", "ls", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "notes/")

	r = runCLI(t, bin, queue, "", "hibernate", ws)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, queue, "", "describe", ws, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"runtime_running": false`)
	r = runCLI(t, bin, queue, "", "release", ws)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, bin, queue, "", "read", ws, "notes/hello.txt")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello from the agent\n", r.stdout, "resumed after release")

	r = runCLI(t, bin, queue, "", "list", "--user", user)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, ws)

	r = runCLI(t, bin, queue, "", "acquire", "--repo", "ext::sh", "--user", user, "--project", "demo", "--conversation", "c1")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "InvalidArgument")
	r = runCLI(t, bin, queue, "", "exec", "not-a-workspace", "--", "true")
	assert.Equal(t, 2, r.code)
}
