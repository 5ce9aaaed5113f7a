package runtimetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// GitFixture builds the repo cache layout of internal/workspace on the host:
// <root>/repos/h/o/r/.bare (bare) and linked worktrees w1 (agent/edits-1) and
// w2 (another workspace).
func GitFixture(t *testing.T) (bare, wt string) {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	repo := filepath.Join(root, "repos", "h", "o", "r")
	bare = filepath.Join(repo, ".bare")
	wt = filepath.Join(repo, "worktrees", "w1")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, os.MkdirAll(src, 0o755))
	git(src, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644))
	git(src, "add", "a.txt")
	git(src, "commit", "-qm", "init")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git(repo, "clone", "-q", "--bare", src, bare)
	git(bare, "worktree", "add", "-q", "-b", "agent/edits-1", wt, "main")
	git(bare, "worktree", "add", "-q", "-b", "agent/edits-2", filepath.Join(repo, "worktrees", "w2"), "main")
	return bare, wt
}

// TreeSum hashes every file's path, mode and content under dir.
func TreeSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(h, f)
			return err
		}
		return nil
	}))
	return hex.EncodeToString(h.Sum(nil))
}

// Sh runs script with `sh -c` in rt (60 s timeout) and returns the result;
// an error from Exec fails the test.
func Sh(t *testing.T, ctx context.Context, rt sandbox.Runtime, script string) sandbox.ExecResult {
	t.Helper()
	res, err := rt.Exec(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: 60})
	require.NoError(t, err)
	return res
}

// RequireOK fails the test unless res exited 0, printing both streams.
func RequireOK(t *testing.T, res sandbox.ExecResult) {
	t.Helper()
	require.Equal(t, 0, res.ExitCode, "stdout=%q stderr=%q", res.Stdout, res.Stderr)
}

// Logger returns a slog.Logger whose records go to t.Log (one line each) at
// level and above: runtime test output shows the provider's own log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: level}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// NewID returns a fresh runtime id "rt-<kind>test-<12 hex digits>".
func NewID(kind string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "rt-" + kind + "test-" + hex.EncodeToString(b)
}

// WorkspaceSpec is the spec an isolated runtime's tests start from: a fresh
// id (NewID), workspace "ws-<kind>test", dir mounted writable at /workspace
// (the workdir), network limited.
func WorkspaceSpec(kind, dir string) sandbox.RuntimeSpec {
	return sandbox.RuntimeSpec{
		ID:          NewID(kind),
		WorkspaceID: "ws-" + kind + "test",
		Workdir:     "/workspace",
		Mounts:      []sandbox.Mount{{Source: dir, Target: "/workspace", Writable: true}},
		Network:     sandbox.NetworkLimited,
	}
}
