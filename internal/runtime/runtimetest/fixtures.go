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
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
func Sh(t *testing.T, ctx context.Context, rt sandbox.Runtime, script string) sandboxapi.ExecResult {
	t.Helper()
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: 60})
	require.NoError(t, err)
	return res
}

// RequireOK fails the test unless res exited 0, printing both streams.
func RequireOK(t *testing.T, res sandboxapi.ExecResult) {
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
		Network:     sandboxapi.NetworkLimited,
	}
}

// GitMounts are the mounts of a workspace runtime over a GitFixture: the
// worktree writable at /workspace, the bare repo cache read-only at its own
// path (so the worktree's .git file resolves inside the sandbox).
func GitMounts(bare, wt string) []sandbox.Mount {
	return []sandbox.Mount{
		{Source: wt, Target: "/workspace", Writable: true},
		{Source: bare, Target: bare, Writable: false},
	}
}

// CheckGitInside is what every isolated runtime must show running over
// GitMounts: git inside sees the branch and the agent's edits; `git add` and
// `git commit` are refused with "Read-only file system"; hostile commands on
// the cache (worktree prune/remove, config, branches, tags, refs, gc, hooks,
// deleting objects, moving the worktree's gitdir) leave it byte-identical to
// before (a TreeSum taken before rt ran anything); and the host's worktree
// registration and view of the edits are intact. rt runs as the test's
// workspace runtime with the GitFixture's wt.
func CheckGitInside(t *testing.T, ctx context.Context, rt sandbox.Runtime, bare, wt, before string) {
	t.Helper()
	res := Sh(t, ctx, rt, "git status")
	RequireOK(t, res)
	require.Contains(t, string(res.Stdout), "On branch agent/edits-1")
	res = Sh(t, ctx, rt, "git log --oneline && git diff --stat && git rev-parse --show-toplevel")
	RequireOK(t, res)
	require.Contains(t, string(res.Stdout), "init")
	require.Contains(t, string(res.Stdout), "/workspace")

	// Edits in the worktree are seen by git inside.
	RequireOK(t, Sh(t, ctx, rt, "echo b > b.txt && echo more >> a.txt"))
	res = Sh(t, ctx, rt, "git status --porcelain")
	RequireOK(t, res)
	require.Equal(t, " M a.txt\n?? b.txt\n", string(res.Stdout))

	// Writes to the cache are refused with git's clear message.
	res = Sh(t, ctx, rt, "git add -A")
	require.NotEqual(t, 0, res.ExitCode)
	require.Contains(t, string(res.Stderr), "Read-only file system")
	res = Sh(t, ctx, rt, "git -c user.name=a -c user.email=a@a commit -qam x")
	require.NotEqual(t, 0, res.ExitCode)
	require.Contains(t, string(res.Stderr), "Read-only file system")

	// Hostile attempts on the cache change nothing.
	for _, script := range []string{
		"git worktree prune",
		"git worktree remove --force /workspace",
		"git config user.name hacked",
		"git branch evil",
		"git tag evil",
		"git update-ref refs/heads/agent/edits-2 HEAD~0",
		"git gc --prune=now",
		`echo 'touch /tmp/pwned' > "$(git rev-parse --git-common-dir)/hooks/post-checkout"`,
		`rm -rf "$(git rev-parse --git-common-dir)/objects"`,
		`printf 'gitdir: /tmp/elsewhere\n' > "$(git rev-parse --git-dir)/gitdir"`,
	} {
		Sh(t, ctx, rt, script)
	}
	require.Equal(t, before, TreeSum(t, bare), "the sandbox changed the repo cache")

	// The host's registration of the worktree is intact.
	out, err := exec.Command("git", "-C", bare, "worktree", "list", "--porcelain").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "worktree "+wt+"\n")
	out, err = exec.Command("git", "-C", wt, "status", "--porcelain").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, " M a.txt\n?? b.txt\n", string(out))
}

var osReadFile = os.ReadFile

// BuildPreviewServer builds testdata/previewserver (a static Linux binary: a
// real HTTP server answering "preview <path>: " and ./index.txt) into dir
// as "previewserver" and returns its path; tests copy it into a workspace
// and start it inside a runtime.
func BuildPreviewServer(t testing.TB, dir string) string {
	t.Helper()
	_, self, _, _ := goruntime.Caller(0)
	out := filepath.Join(dir, "previewserver")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/previewserver")
	cmd.Dir = filepath.Dir(self)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build previewserver: %v\n%s", err, b)
	}
	return out
}
