package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// scaleEnv turns BenchmarkScale on (make bench-scale sets it): it runs for
// minutes and holds thousands of worktrees, so `make bench` skips it.
const scaleEnv = "SANDBOX_BENCH_SCALE"

// envInt reads a positive integer setting of the scale benchmark.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// BenchmarkScale is `make bench-scale` (docs/BENCHMARKS.md "Scale"): one
// host in this process (the embedded Temporal server, the worker, the SQLite
// store, bubblewrap), measured in three steps:
//
//   - acquire: SANDBOX_BENCH_SESSIONS (10,000) new edit workspaces of a
//     cached small repository (20 files), by SANDBOX_BENCH_ACQUIRERS (16)
//     concurrent clients. Every session is kept open: its workflow runs
//     (state active, idle timers pending) and its worktree and store row
//     exist; none has a runtime (a runtime is made by the first exec).
//     Reported: acquire throughput, p50/p99, then the process's RSS, its
//     growth per open session and the embedded server's share of the heap.
//   - exec: SANDBOX_BENCH_EXEC_CLIENTS (50) concurrent clients, each on its
//     own open session, each running SANDBOX_BENCH_EXECS (20) execs of
//     `true` one after the other (the first builds the session's bubblewrap
//     runtime). Every call must succeed. Reported: p50/p99 of all calls and
//     of the calls after each session's first.
//   - evict: a second host with SANDBOX_BENCH_EVICT (1,000) open edit
//     workspaces (a quarter with an uncommitted file) under a 1-byte disk
//     budget runs one eviction run (the workflow its Schedule starts):
//     reported its duration (to compare with the 5-minute interval) and what
//     it evicted (at most eviction.MaxEvictionActionsPerHost per run).
func BenchmarkScale(b *testing.B) {
	if os.Getenv(scaleEnv) != "1" {
		b.Skip("set " + scaleEnv + "=1 (make bench-scale)")
	}
	sessions := envInt(b, "SANDBOX_BENCH_SESSIONS", 10000)
	acquirers := envInt(b, "SANDBOX_BENCH_ACQUIRERS", 16)
	clients := envInt(b, "SANDBOX_BENCH_EXEC_CLIENTS", 50)
	execs := envInt(b, "SANDBOX_BENCH_EXECS", 20)
	evict := envInt(b, "SANDBOX_BENCH_EVICT", 1000)
	url := smallRepo(b)
	var open []*sandboxclient.Session

	b.Run("evict", func(b *testing.B) {
		h := startHost(b, uniq(b, "scale-evict"), embeddedServer(b), aggressive(tinyBudget))
		list, _, _ := acquireMany(b, h, url, evict, acquirers)
		ctx := context.Background()
		for i, s := range list {
			if i%4 == 0 {
				if err := s.WriteFile(ctx, "work.txt", []byte("uncommitted\n"), 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		t0 := time.Now()
		res, err := h.client.RunEviction(ctxFor(b, 30*time.Minute), sandboxapi.EvictionInput{Hosts: []string{h.Config.HostID}, ReplyTimeout: 25 * time.Minute})
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		evicted, failed := 0, 0
		for _, hr := range res.Hosts {
			if hr.Plan == nil {
				b.Fatalf("no plan for %s: %s", hr.HostID, hr.Error)
			}
			for _, r := range hr.Results {
				switch {
				case r.Outcome == sandboxapi.OutcomeDone && r.Action == sandboxapi.EvictionEvictWorkspace:
					evicted++
				case r.Outcome == sandboxapi.OutcomeFailed:
					if failed < 5 {
						b.Logf("failed: %s %s: %s", r.Action, r.ID, r.Reason)
					}
					failed++
				}
			}
		}
		b.ReportMetric(took.Seconds(), "run-s")
		b.ReportMetric(float64(evicted), "evicted")
		b.ReportMetric(float64(failed), "failed")
		b.Logf("eviction run over %d workspaces: %v, %d evicted, %d failed", evict, took, evicted, failed)
		if failed > 0 {
			b.Errorf("%d eviction actions failed", failed)
		}
	})

	b.Run("acquire", func(b *testing.B) {
		h := startHost(b, uniq(b, "scale"), embeddedServer(b))
		runtime.GC()
		rss0 := rssBytes(b)
		var took time.Duration
		var lat latencies
		open, took, lat = acquireMany(b, h, url, sessions, acquirers)
		b.ReportMetric(float64(sessions)/took.Seconds(), "workspaces/s")
		lat.report(b, "acquire")
		// Idle: every session open, nothing running.
		time.Sleep(10 * time.Second)
		runtime.GC()
		rss1 := rssBytes(b)
		server, total := heapShare(b, "go.temporal.io/server/")
		writeHeapProfile(b, os.Getenv("SANDBOX_BENCH_HEAP_PROFILE"))
		b.ReportMetric(float64(rss1)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(rss1-rss0)/float64(sessions), "rss-B/session")
		b.ReportMetric(float64(total)/(1<<20), "heap-MiB")
		b.ReportMetric(100*float64(server)/float64(max(total, 1)), "server-heap-%")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.StackInuse)/(1<<20), "stack-MiB")
		b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
		b.Logf("%d sessions in %v (%.1f/s); RSS %d → %d MiB; heap %d MiB, embedded server %d MiB; Go heap in use %d MiB, goroutine stacks %d MiB (%d goroutines), runtime total %d MiB",
			sessions, took, float64(sessions)/took.Seconds(), rss0>>20, rss1>>20, total>>20, server>>20,
			ms.HeapInuse>>20, ms.StackInuse>>20, runtime.NumGoroutine(), ms.Sys>>20)

		b.Run("exec", func(b *testing.B) {
			if len(open) < clients {
				b.Fatalf("%d sessions for %d clients", len(open), clients)
			}
			var mu sync.Mutex
			var all, warm latencies
			var wg sync.WaitGroup
			errs := make(chan error, clients*execs)
			step := len(open) / clients
			t0 := time.Now()
			for c := 0; c < clients; c++ {
				s := open[c*step]
				wg.Go(func() {
					for i := 0; i < execs; i++ {
						t := time.Now()
						res, err := s.Exec(context.Background(), sandboxapi.ExecRequest{Cmd: []string{"true"}})
						d := time.Since(t)
						if err == nil && res.ExitCode != 0 {
							err = fmt.Errorf("exit code %d", res.ExitCode)
						}
						if err != nil {
							errs <- fmt.Errorf("session %s exec %d: %w", s.WorkspaceID(), i, err)
							continue
						}
						mu.Lock()
						all = append(all, d)
						if i > 0 {
							warm = append(warm, d)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Error(err)
			}
			all.report(b, "exec")
			warm.report(b, "warm-exec")
			b.ReportMetric(float64(len(all))/time.Since(t0).Seconds(), "execs/s")
			b.Logf("%d execs by %d clients: p50 %.1f ms, p99 %.1f ms (after the first of each session: p50 %.1f ms, p99 %.1f ms)",
				len(all), clients, all.percentile(0.5), all.percentile(0.99), warm.percentile(0.5), warm.percentile(0.99))
		})
	})
}

// acquireMany acquires n new edit workspaces of url on h with c concurrent
// clients (100 users, one conversation each acquire) and returns their
// sessions, the time it took and each acquire's latency. Any failure fails b.
func acquireMany(b *testing.B, h *testHost, url string, n, c int) ([]*sandboxclient.Session, time.Duration, latencies) {
	b.Helper()
	ctx := context.Background()
	run := uniq(b, "r")
	out := make([]*sandboxclient.Session, n)
	lat := make(latencies, n)
	var next, done atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil {
					return
				}
				t := time.Now()
				s, hd, err := h.client.Acquire(ctx, editRequest(fmt.Sprintf("user%02d", i%100), "p", fmt.Sprintf("%s-%d", run, i), url))
				if err == nil && !hd.Created {
					err = fmt.Errorf("not created: %+v", hd)
				}
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("acquire %d: %w", i, err))
					return
				}
				out[i], lat[i] = s, time.Since(t)
				if d := done.Add(1); d%1000 == 0 {
					el := time.Since(t0)
					b.Logf("%d/%d acquired in %v (%.1f/s), RSS %d MiB", d, n, el.Round(time.Second), float64(d)/el.Seconds(), rssBytes(b)>>20)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return out, time.Since(t0), lat
}

// smallRepo is the cached small repository of the scale benchmark: 20 text
// files of 200 B to 2 KiB.
func smallRepo(b testing.TB) string {
	return namedRepo(b, "small20", func(dir string) error {
		for i := 0; i < 20; i++ {
			data := bytes.Repeat([]byte(fmt.Sprintf("line %d of a small file\n", i)), 8+i*4)
			if err := os.WriteFile(fmt.Sprintf("%s/f%02d.txt", dir, i), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// rssBytes is this process's resident set size (VmRSS).
func rssBytes(b testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// writeHeapProfile writes the heap profile (pprof's binary format, for `go
// tool pprof`) to path and the goroutines, grouped by stack (text), to
// path + ".goroutines", taken with every session open and idle; "" writes
// nothing.
func writeHeapProfile(b testing.TB, path string) {
	if path == "" {
		return
	}
	for _, p := range []struct {
		name, file string
		debug      int
	}{{"heap", path, 0}, {"goroutine", path + ".goroutines", 1}} {
		f, err := os.Create(p.file)
		if err != nil {
			b.Fatal(err)
		}
		err = pprof.Lookup(p.name).WriteTo(f, p.debug)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// heapShare returns the in-use heap bytes allocated under a function whose
// name starts with prefix, and the whole in-use heap, from the heap profile
// (its text form: each record "<objects>: <bytes> [...] @ …" followed by its
// stack; sampled records scaled as pprof scales them).
func heapShare(b testing.TB, prefix string) (matched, total int64) {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	rate := 512 * 1024.0
	var cur int64
	var hit bool
	flush := func() {
		total += cur
		if hit {
			matched += cur
		}
		cur, hit = 0, false
	}
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "heap profile:"):
			if i := strings.LastIndex(l, "heap/"); i >= 0 {
				if r, err := strconv.ParseFloat(l[i+5:], 64); err == nil && r > 0 {
					rate = r
				}
			}
		case strings.HasPrefix(l, "# runtime.MemStats"):
			flush()
			return matched, total
		case strings.HasPrefix(l, "#"):
			if f := strings.Fields(l); len(f) >= 3 && strings.HasPrefix(f[2], prefix) {
				hit = true
			}
		case strings.Contains(l, " @ ") && strings.Contains(l, ": "):
			flush()
			var objs, bytesInUse int64
			if _, err := fmt.Sscanf(l, "%d: %d", &objs, &bytesInUse); err == nil && objs > 0 {
				avg := float64(bytesInUse) / float64(objs)
				scale := 1 / (1 - math.Exp(-avg/rate))
				cur = int64(float64(bytesInUse) * scale)
			}
		}
	}
	flush()
	return matched, total
}
