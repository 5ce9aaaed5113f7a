package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
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

// latencies records per-operation durations of a benchmark and reports
// their median and 99th percentile (p50-ms, p99-ms) next to ns/op.
type latencies []time.Duration

func (l *latencies) time(fn func()) {
	start := time.Now()
	fn()
	*l = append(*l, time.Since(start))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	b.ReportMetric(float64(s[len(s)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(s[min(len(s)-1, len(s)*99/100)])/1e6, "p99-ms")
}

// BenchmarkExecTrue measures one exec update running `true` in the test host's
// runtime: SANDBOX_RUNTIME_PROVIDER as set, unset = auto (bubblewrap when
// usable, as make run; see baseConfig). Its command runs as a process of the
// runtime, started and waited for by one local activity (the fast path).
func BenchmarkExecTrue(b *testing.B) {
	h := startHost(b, uniq(b, "bench-exec"))
	ctx := context.Background()
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "exec", benchRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	req := sandbox.ExecRequest{Cmd: []string{"true"}}
	if _, err := s.Exec(ctx, req); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat.time(func() {
			res, err := s.Exec(ctx, req)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
		})
	}
	lat.report(b)
}

// BenchmarkExecStartTrue is a baseline of BenchmarkExecTrue: what its one
// local activity does (sandbox.ExecStart: the workspace row, the runtime,
// start `true` as a process, wait for it, read its output), called
// directly, without Temporal.
func BenchmarkExecStartTrue(b *testing.B) {
	h := startHost(b, uniq(b, "bench-execstart"))
	ctx := context.Background()
	_, hd, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "exec", benchRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	req := sandbox.ExecRequest{Cmd: []string{"true"}}
	run := func(i int) {
		res, err := h.Activities.ExecStart(ctx, wire.ExecActivityInput{WorkspaceID: hd.WorkspaceID, Request: req,
			ProcessID: fmt.Sprintf("exec-bench-%d-%d", time.Now().UnixNano(), i), Wait: time.Second})
		if err != nil || !res.Done || res.Result.ExitCode != 0 {
			b.Fatalf("exec start: %v %+v", err, res)
		}
	}
	run(-1)
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat.time(func() { run(i) })
	}
	lat.report(b)
}

// BenchmarkReadFile measures one read_file update of a small file.
func BenchmarkReadFile(b *testing.B) {
	h := startHost(b, uniq(b, "bench-read"))
	ctx := context.Background()
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "read", benchRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.WriteFile(ctx, "bench.txt", []byte("hello\n"), 0); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat.time(func() {
			if _, err := s.ReadFile(ctx, "bench.txt"); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
}

// BenchmarkRawForkExec is the baseline of BenchmarkExecTrue: fork/exec of `true`.
func BenchmarkRawForkExec(b *testing.B) {
	var lat latencies
	for i := 0; i < b.N; i++ {
		lat.time(func() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
}
