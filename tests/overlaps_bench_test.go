package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// overlapsBenchWorkspaces is how many live workspaces BenchmarkOverlaps
// makes (SANDBOX_BENCH_OVERLAPS_WORKSPACES overrides; docs/BENCHMARKS.md
// "Overlaps").
func overlapsBenchWorkspaces(b *testing.B) int {
	n := 200
	if v := os.Getenv("SANDBOX_BENCH_OVERLAPS_WORKSPACES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			b.Fatalf("SANDBOX_BENCH_OVERLAPS_WORKSPACES=%q: want a number ≥ 2", v)
		}
	}
	return n
}

// BenchmarkOverlaps measures the overlaps update of one workspace on a
// repository (this project's own, or the generated one) with 200 live task
// workspaces of the same user and project, each of which changed a line of
// README.md (so every one of them overlaps): cold-ms is the first call
// (every other workspace's changes read), p50-ms/p99-ms the calls after it.
// raw-sweep-ms is the baseline measured in the same run: `git diff
// --name-only <base>` in every one of the workspaces, one after the other.
func BenchmarkOverlaps(b *testing.B) {
	n := overlapsBenchWorkspaces(b)
	h := startHost(b, uniq(b, "bench-overlaps"))
	url := benchRepo(b)
	ctx := context.Background()
	user := uniq(b, "u")
	var paths, bases []string
	var self sandboxapi.Handle
	for i := 0; i < n; i++ {
		s, hd, err := h.client.Acquire(ctx, taskRequest(user, "p", fmt.Sprintf("t%d", i), url))
		if err != nil {
			b.Fatal(err)
		}
		readme, err := s.ReadFile(ctx, "README.md")
		if err != nil {
			b.Fatal(err)
		}
		lines := strings.SplitAfter(string(readme), "\n")
		k := i % len(lines)
		lines[k] = fmt.Sprintf("changed by task %d\n", i)
		if err := s.WriteFile(ctx, "README.md", []byte(strings.Join(lines, "")), 0); err != nil {
			b.Fatal(err)
		}
		paths, bases = append(paths, hd.LocalPath), append(bases, hd.BaseCommit)
		if i == 0 {
			self = hd
		}
	}
	s, err := h.client.Session(self.WorkspaceID)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	first, err := s.Overlaps(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cold := time.Since(start)
	if first.Checked != n-1 {
		b.Fatalf("overlaps checked %d workspaces, want %d (not checked: %+v)", first.Checked, n-1, first.NotChecked)
	}

	var calls latencies
	cpu := startCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if _, err := s.Overlaps(ctx); err != nil {
			b.Fatal(err)
		}
		calls = append(calls, time.Since(t))
	}
	b.StopTimer()
	cpu.report(b, b.N)
	calls.report(b, "")
	b.ReportMetric(ms(cold), "cold-ms")

	// The baseline: one `git diff --name-only` per workspace, all of them.
	var sweeps latencies
	for r := 0; r < 3; r++ {
		t := time.Now()
		for i, p := range paths {
			if out, err := exec.Command("git", "-C", p, "diff", "--name-only", bases[i], "--").CombinedOutput(); err != nil {
				b.Fatalf("git diff in %s: %v: %s", p, err, out)
			}
		}
		sweeps = append(sweeps, time.Since(t))
	}
	b.ReportMetric(sweeps.percentile(0.5), "raw-sweep-ms")
	b.ReportMetric(float64(n), "workspaces")
}
