package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// benchRepo returns a file:// URL of this project's own repository when the
// tests run inside a git checkout, else of a small generated repository.
func benchRepo(b testing.TB) string {
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
	req := sandboxapi.ExecRequest{Cmd: []string{"true"}}
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
	req := sandboxapi.ExecRequest{Cmd: []string{"true"}}
	run := func(i int) {
		payload, err := h.Activities.ExecStart(ctx, wire.ExecActivityInput{WorkspaceID: hd.WorkspaceID, Request: req,
			ProcessID: fmt.Sprintf("exec-bench-%d-%d", time.Now().UnixNano(), i), Wait: time.Second})
		var res wire.ExecStartResult
		if err == nil {
			res, _, err = wire.DecodeExecStart(payload)
		}
		if err != nil || !res.Done || res.Result.ExitCode != 0 {
			b.Fatalf("exec start: %v %+v", err, res)
		}
	}
	run(-1)
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run(i)
		lat = append(lat, time.Since(t0))
	}
	lat.report(b, "")
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

// BenchmarkQuickOps measures the quick operations through a session on a
// small tree (a snapshot of spf13/cobra: 66 files), each next to its raw
// baseline in the same worktree and the same run: read_file vs os.ReadFile,
// write_file vs os.WriteFile (same 6 bytes), list_dir of the root vs
// os.ReadDir, status vs `git status --porcelain`, exec of `true` vs a
// fork/exec of it; and the Temporal floor
// under all of them (startFloor): an update of a workflow that does nothing,
// and one whose handler runs a local activity that does nothing (a quick
// operation's shape). Session rows report the
// p50/p99 per call and the median of each hop (reportHops); raw rows p50/p99.
func BenchmarkQuickOps(b *testing.B) {
	rec := newHopRecorder()
	h := startHostWith(b, uniq(b, "bench-quick"), hostworker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	ctx := context.Background()
	s, hd, err := h.client.Acquire(ctx, editRequest(uniq(b, "u"), "p", "quick", cobraRepo(b)))
	if err != nil {
		b.Fatal(err)
	}
	content := []byte("hello\n")
	if err := s.WriteFile(ctx, "bench.txt", content, 0); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Status(ctx); err != nil {
		b.Fatal(err)
	}
	wt := hd.LocalPath
	session := func(name string, call func(ctx context.Context) error) {
		b.Run(name, func(b *testing.B) {
			c := &callTimer{prefix: name}
			cpu := startCPU()
			for b.Loop() {
				if err := c.do(ctx, call); err != nil {
					b.Fatalf("%s: %v", name, err)
				}
			}
			cpu.report(b, len(c.calls))
			c.latencies().report(b, "")
			reportHops(b, s.WorkflowID(), c, rec)
		})
	}
	raw := func(name string, call func() error) {
		b.Run(name, func(b *testing.B) {
			var l latencies
			cpu := startCPU()
			for b.Loop() {
				t0 := time.Now()
				if err := call(); err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				l = append(l, time.Since(t0))
			}
			cpu.report(b, len(l))
			l.report(b, "")
		})
	}
	floor := startFloor(b)
	raw("temporal-update-noop", func() error { return floor(ctx, floorNoop) })
	raw("temporal-update-local-activity", func() error { return floor(ctx, floorLocal) })
	session("read_file", func(ctx context.Context) error {
		got, err := s.ReadFile(ctx, "bench.txt")
		if err == nil && string(got) != string(content) {
			err = fmt.Errorf("read %q", got)
		}
		return err
	})
	raw("raw-read-file", func() error {
		_, err := os.ReadFile(filepath.Join(wt, "bench.txt"))
		return err
	})
	session("write_file", func(ctx context.Context) error { return s.WriteFile(ctx, "bench.txt", content, 0) })
	raw("raw-write-file", func() error { return os.WriteFile(filepath.Join(wt, "bench.txt"), content, 0o644) })
	session("list_dir", func(ctx context.Context) error {
		ents, err := s.ListDir(ctx, "")
		if err == nil && len(ents) < 40 {
			err = fmt.Errorf("list_dir: %d entries", len(ents))
		}
		return err
	})
	raw("raw-list-dir", func() error {
		_, err := os.ReadDir(wt)
		return err
	})
	session("status", func(ctx context.Context) error {
		st, err := s.Status(ctx)
		if err == nil && (!st.Dirty || len(st.Files) != 1) {
			err = fmt.Errorf("status: %+v", st)
		}
		return err
	})
	raw("raw-git-status", func() error {
		_, err := exec.Command("git", "-C", wt, "status", "--porcelain").Output()
		return err
	})
	// exec of `true` with the same breakdown (its runtime started by the
	// first call, before the timed ones), next to a raw fork/exec.
	if res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		b.Fatalf("exec: %v %+v", err, res)
	}
	session("exec", func(ctx context.Context) error {
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exec: exit %d", res.ExitCode)
		}
		return err
	})
	raw("raw-fork-exec", func() error { return exec.Command("true").Run() })
}

// BenchmarkCreateToFirstCommand measures what an agent waits for before its
// first command: the acquire of a new edit workspace on a repository whose
// cache is warm (a new session workflow, its activities, `git worktree add`,
// the store rows, the move to the host's queue) plus one exec of `true` (the
// runtime is created by it), on a snapshot of spf13/cobra (66 files) and on a
// generated 1,666-file tree (≈ 13 MiB), each next to its raw baseline in the
// same run: plain `git worktree add --no-track -b` on a bare clone of the same
// repository. Reported: p50/p99 of the whole, and acquire-p50-ms and
// exec-p50-ms of its two calls.
func BenchmarkCreateToFirstCommand(b *testing.B) {
	h := startHost(b, uniq(b, "bench-create"))
	ctx := context.Background()
	for _, repo := range []struct {
		name string
		url  string
	}{{"cobra", cobraRepo(b)}, {"files-1666", treeRepo(b, 1666)}} {
		user := uniq(b, "u")
		if _, _, err := h.client.Acquire(ctx, editRequest(user, "p", "seed", repo.url)); err != nil {
			b.Fatal(err)
		}
		run := time.Now().UnixNano()
		b.Run(repo.name+"/acquire-exec", func(b *testing.B) {
			var all, acq, ex latencies
			cpu := startCPU()
			i := 0
			for b.Loop() {
				i++
				t0 := time.Now()
				s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", fmt.Sprintf("c%d-%d", run, i), repo.url))
				if err != nil || !hd.Created {
					b.Fatalf("acquire: %v %+v", err, hd)
				}
				t1 := time.Now()
				res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("exec: %v %+v", err, res)
				}
				t2 := time.Now()
				all, acq, ex = append(all, t2.Sub(t0)), append(acq, t1.Sub(t0)), append(ex, t2.Sub(t1))
			}
			cpu.report(b, len(all))
			all.report(b, "")
			b.ReportMetric(acq.percentile(0.5), "acquire-p50-ms")
			b.ReportMetric(ex.percentile(0.5), "exec-p50-ms")
		})
		b.Run(repo.name+"/raw-worktree-add", func(b *testing.B) {
			dir := b.TempDir()
			bare := filepath.Join(dir, ".bare")
			if out, err := exec.Command("git", "clone", "--bare", "-q", repo.url, bare).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			commit := gittest.Git(b, bare, "rev-parse", "HEAD")
			var l latencies
			cpu := startCPU()
			i := 0
			for b.Loop() {
				i++
				path := filepath.Join(dir, "worktrees", fmt.Sprintf("w%d", i))
				t0 := time.Now()
				if out, err := exec.Command("git", "-C", bare, "worktree", "add", "-q", "--no-track", "-b", fmt.Sprintf("b%d", i), path, commit).CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				l = append(l, time.Since(t0))
			}
			cpu.report(b, len(l))
			l.report(b, "")
		})
	}
}
