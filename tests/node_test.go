package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
)

// nodeModules installs the pinned npm packages of tests/node once per test
// binary. Without node or npm the test skips, except under CI=true
// (.ci/run installs them).
var nodeModules = sync.OnceValue(func() error { return installNodeProject("node") })

// installNodeProject installs the npm project in dir (below tests/) from
// its committed package-lock.json (npm ci), unless the last install there
// was of the same lock file: its digest is kept in node_modules, so the
// test binaries of one make test (test-e2e, test-e2e-daytona, …) install
// a project once, not each (npm ci rewrites node_modules whole).
func installNodeProject(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	stamp := filepath.Join(dir, "node_modules", ".sandboxcore-installed")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == hex.EncodeToString(sum[:]) {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &npmError{out: string(out), err: err}
	}
	return os.WriteFile(stamp, []byte(hex.EncodeToString(sum[:])), 0o644)
}

type npmError struct {
	out string
	err error
}

func (e *npmError) Error() string { return "npm ci: " + e.err.Error() + "\n" + e.out }

func requireNode(t *testing.T) {
	t.Helper()
	requireNodeProject(t, nodeModules)
}

// requireNodeProject skips without node or npm (fails under CI=true), then
// installs a project's packages (install: installNodeProject of its
// directory, once per test binary).
func requireNodeProject(t *testing.T, install func() error) {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (.ci/run installs nodejs and npm)", bin)
			}
			t.Skipf("%s is not installed", bin)
		}
	}
	require.NoError(t, install())
}

// A TypeScript backend using the official @temporalio/client (pinned in
// tests/node/package.json), written from docs/API.md alone, drives a session:
// acquire by update-with-start, exec, write_file, read_file, diff, status,
// commit, typed errors with their details, and an unknown field refused as
// InvalidArgument; every result validates against docs/schema/.
func TestTypeScriptTemporalClientDrivesTheContract(t *testing.T) {
	requireNode(t)
	h := startHost(t, "tsclient")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "acme", "ts"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	cmd := exec.Command("node", "contract.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+h.Config.TaskQueue,
		"REPO_URL="+gittest.FileURL(upstream), "SANDBOX_USER="+uniq(t, "ts"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("node client did not finish; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	for _, step := range []string{"acquire", "exec 3", "write_file", "read_file", "diff ts/notes.txt", "status dirty", "commit", "typed error InvalidWorkspacePath", "sub-kind InvalidWorkspacePath FileNotFound", "unknown field timeoutS", "describe active", "done"} {
		assert.Contains(t, stdout.String(), "ok "+step, "step %q", step)
	}
}
