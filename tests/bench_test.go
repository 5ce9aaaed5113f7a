package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// benchRepo returns a file:// URL of this project's own repository when the
// tests run inside a git checkout, else of a small generated repository.
func benchRepo(b *testing.B) string {
	root, err := filepath.Abs("..")
	if err == nil {
		if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
			if out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "HEAD").Output(); err == nil && len(out) > 0 {
				return gittest.FileURL(root)
			}
		}
	}
	dir := gittest.InitRepo(b, filepath.Join(b.TempDir(), "team", "project"), "trunk")
	for i := 0; i < 20; i++ {
		gittest.Commit(b, dir, fmt.Sprintf("f%d.txt", i), "content\n", "c")
	}
	return gittest.FileURL(dir)
}

// BenchmarkAcquireWarm measures a re-acquire of a workspace whose session is
// running: one update-with-start round trip, no activity.
func BenchmarkAcquireWarm(b *testing.B) {
	h := startHost(b, uniq(b, "bench-warm"))
	url := benchRepo(b)
	ctx := context.Background()
	req := editRequest(uniq(b, "u"), "p", "warm", url)
	if _, _, err := h.client.Acquire(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := h.client.Acquire(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireNewWorktree measures an acquire that creates a new worktree
// from a warm repo cache (new session workflow, locate + acquire activities,
// git worktree add, store rows).
func BenchmarkAcquireNewWorktree(b *testing.B) {
	h := startHost(b, uniq(b, "bench-new"))
	url := benchRepo(b)
	ctx := context.Background()
	if _, _, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "seed", url)); err != nil {
		b.Fatal(err)
	}
	run := time.Now().UnixNano()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := h.client.Acquire(ctx, editRequest("bench", "p", fmt.Sprintf("n%d-%d", run, i), url)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawGitWorktreeAdd is the baseline of BenchmarkAcquireNewWorktree:
// plain `git worktree add --no-track -b` on a bare clone of the same repository.
func BenchmarkRawGitWorktreeAdd(b *testing.B) {
	url := benchRepo(b)
	dir := b.TempDir()
	bare := filepath.Join(dir, ".bare")
	if out, err := exec.Command("git", "clone", "--bare", "-q", url, bare).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	head, err := exec.Command("git", "-C", bare, "rev-parse", "HEAD").Output()
	if err != nil {
		b.Fatal(err)
	}
	commit := string(head[:40])
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, "worktrees", fmt.Sprintf("w%d", i))
		if out, err := exec.Command("git", "-C", bare, "worktree", "add", "-q", "--no-track", "-b", fmt.Sprintf("b%d", i), path, commit).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkExecTrue measures one exec update running `true` in the test host's
// runtime: SANDBOX_RUNTIME_PROVIDER as set, unset = auto (bubblewrap when
// usable, as make run; see baseConfig).
func BenchmarkExecTrue(b *testing.B) { benchExecTrue(b) }

// BenchmarkExecTrueMetrics is BenchmarkExecTrue on a host serving
// Prometheus metrics (SANDBOX_METRICS_ADDR): the activity interceptor's
// cost, against BenchmarkExecTrue in the same run.
func BenchmarkExecTrueMetrics(b *testing.B) { benchExecTrue(b, withMetrics()) }

func benchExecTrue(b *testing.B, opts ...hostOption) {
	h := startHost(b, uniq(b, "bench-exec"), opts...)
	ctx := context.Background()
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "exec", benchRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	req := sandbox.ExecRequest{Cmd: []string{"true"}}
	if _, err := s.Exec(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.Exec(ctx, req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
}

// BenchmarkReadFile measures one read_file update of a small file.
func BenchmarkReadFile(b *testing.B) { benchReadFile(b) }

// BenchmarkReadFileMetrics is BenchmarkReadFile on a host serving metrics.
func BenchmarkReadFileMetrics(b *testing.B) { benchReadFile(b, withMetrics()) }

func benchReadFile(b *testing.B, opts ...hostOption) {
	h := startHost(b, uniq(b, "bench-read"), opts...)
	ctx := context.Background()
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "read", benchRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.WriteFile(ctx, "bench.txt", []byte("hello\n"), 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.ReadFile(ctx, "bench.txt"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawForkExec is the baseline of BenchmarkExecTrue: fork/exec of `true`.
func BenchmarkRawForkExec(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
