package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// Support for the benchmarks: per-call latency percentiles, a per-hop
// breakdown of session updates read back from the workflow's history, and
// the benchmark repositories (a snapshot of spf13/cobra, a generated tree).

// latencies collects one duration per measured call.
type latencies []time.Duration

// percentile returns the q-quantile (0 < q ≤ 1, nearest rank) in ms.
func (l latencies) percentile(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return ms(s[i])
}

// report adds p50-ms and p99-ms (prefix-p50-ms … when prefix is set).
func (l latencies) report(b *testing.B, prefix string) {
	if prefix != "" {
		prefix += "-"
	}
	b.ReportMetric(l.percentile(0.5), prefix+"p50-ms")
	b.ReportMetric(l.percentile(0.99), prefix+"p99-ms")
}

// cpuClock measures the CPU time (user + system) of this process and of its
// waited-for children (git, bwrap …): the client, the embedded Temporal
// server and the worker all run here, so per call it is the whole cost of a
// call on the machine, which the load of other jobs does not inflate as it
// does wall time.
type cpuClock struct{ start time.Duration }

func cpuNow() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

func startCPU() cpuClock { return cpuClock{start: cpuNow()} }

// report adds cpu-ms/op: CPU time since start per iteration.
func (c cpuClock) report(b *testing.B, n int) {
	if n > 0 {
		b.ReportMetric(ms(cpuNow()-c.start)/float64(n), "cpu-ms/op")
	}
}

// timedCall is one update sent with a known update id, timed at the client.
type timedCall struct {
	id         string
	start, end time.Time
}

// callTimer times session calls, each with its own update id
// (sandboxclient.WithUpdateID), so their hops can be found in the history.
type callTimer struct {
	prefix string
	calls  []timedCall
}

// do runs fn with a context carrying a fresh update id and records its times.
func (c *callTimer) do(ctx context.Context, fn func(ctx context.Context) error) error {
	id := fmt.Sprintf("%s-%d-%d", c.prefix, len(c.calls), time.Now().UnixNano())
	t0 := time.Now()
	err := fn(sandboxclient.WithUpdateID(ctx, id))
	c.calls = append(c.calls, timedCall{id: id, start: t0, end: time.Now()})
	return err
}

func (c *callTimer) latencies() latencies {
	out := make(latencies, len(c.calls))
	for i, k := range c.calls {
		out[i] = k.end.Sub(k.start)
	}
	return out
}

// hopRecorder is a worker interceptor that timestamps, on the wall clock of
// this process, each update handler's start and end and each local
// activity's start and end (first executions only, never replays), so that
// reportHops can split the worker's part of a call.
type hopRecorder struct {
	interceptor.WorkerInterceptorBase
	mu  sync.Mutex
	upd map[string]span   // update id → handler
	las map[string][]span // workflow id → local activities, in order
}

type span struct{ start, end time.Time }

func newHopRecorder() *hopRecorder {
	return &hopRecorder{upd: map[string]span{}, las: map[string][]span{}}
}

func (r *hopRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &hopActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, r: r}
}

func (r *hopRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &hopWorkflow{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type hopActivity struct {
	interceptor.ActivityInboundInterceptorBase
	r *hopRecorder
}

func (a *hopActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	t0 := time.Now()
	out, err := a.Next.ExecuteActivity(ctx, in)
	if info := activity.GetInfo(ctx); info.IsLocalActivity {
		a.r.mu.Lock()
		a.r.las[info.WorkflowExecution.ID] = append(a.r.las[info.WorkflowExecution.ID], span{t0, time.Now()})
		a.r.mu.Unlock()
	}
	return out, err
}

type hopWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
	r *hopRecorder
}

func (w *hopWorkflow) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	u := workflow.GetCurrentUpdateInfo(ctx)
	if workflow.IsReplaying(ctx) || u == nil {
		return w.Next.ExecuteUpdate(ctx, in)
	}
	t0 := time.Now() // measurement only: never reaches the workflow's state
	out, err := w.Next.ExecuteUpdate(ctx, in)
	w.r.mu.Lock()
	if _, seen := w.r.upd[u.ID]; !seen {
		w.r.upd[u.ID] = span{t0, time.Now()}
	}
	w.r.mu.Unlock()
	return out, err
}

// reportHops reads the current run's history of wfID and reports, for the
// calls whose update was accepted in it, the median of each hop (ms), from
// the history's event times and the hopRecorder's stamps (the server runs in
// this process: one clock):
//
//	hop-send:       client → the history service created the update's
//	                workflow task (frontend, history, update registry)
//	hop-dispatch:   task scheduled → started (matching, the sticky poll,
//	                RecordWorkflowTaskStarted and its history read)
//	hop-to-handler: → the update handler runs in the worker (poll response,
//	                SDK task processing, the validator)
//	hop-to-la:      → the local activity starts (workflow code, the SDK's
//	                local activity dispatch)
//	hop-la:         the local activity (store row, file or git work)
//	hop-after-la:   → the handler returns (result back into the workflow)
//	hop-complete:   → the history service has the task's completion (the
//	                rest of the workflow task, RespondWorkflowTaskCompleted)
//	hop-reply:      → the client has the result (the task's events
//	                persisted, the outcome back through frontend)
func reportHops(b *testing.B, wfID string, c *callTimer, rec *hopRecorder) {
	type wt struct{ sched, started, completed time.Time }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	byID := map[string]wt{}
	var cur wt
	it := tc.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatalf("history of %s: %v", wfID, err)
		}
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			cur = wt{sched: at}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			cur.started = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			cur.completed = at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			id := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetMeta().GetUpdateId()
			byID[id] = cur
		}
	}
	rec.mu.Lock()
	las := slices.Clone(rec.las[wfID])
	upd := maps.Clone(rec.upd)
	rec.mu.Unlock()
	hops := map[string]latencies{}
	add := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			hops[name] = append(hops[name], to.Sub(from))
		}
	}
	for _, k := range c.calls {
		w, ok := byID[k.id]
		if !ok || w.started.IsZero() || w.completed.IsZero() {
			continue
		}
		add("send", k.start, w.sched)
		add("dispatch", w.sched, w.started)
		u, ok := upd[k.id]
		if !ok {
			add("worker", w.started, w.completed)
			add("reply", w.completed, k.end)
			continue
		}
		add("to-handler", w.started, u.start)
		var la span
		for _, l := range las {
			if !l.start.Before(u.start) && !l.end.After(u.end) {
				la = l
				break
			}
		}
		if !la.start.IsZero() {
			add("to-la", u.start, la.start)
			add("la", la.start, la.end)
			add("after-la", la.end, u.end)
		}
		add("complete", u.end, w.completed)
		add("reply", w.completed, k.end)
	}
	for name, l := range hops {
		b.ReportMetric(l.percentile(0.5), "hop-"+name+"-ms")
	}
}

// benchRepos are built once per test binary run (they are read-only sources).
var benchRepos = struct {
	sync.Mutex
	dir   string
	byKey map[string]string
}{byKey: map[string]string{}}

func benchRepoDir() (string, error) {
	if benchRepos.dir == "" {
		d, err := os.MkdirTemp("", "sandboxcore-bench-repos-")
		if err != nil {
			return "", err
		}
		benchRepos.dir = d
	}
	return benchRepos.dir, nil
}

// cobraRepo returns the file:// URL of a one-commit repository holding the
// files of github.com/spf13/cobra at the version this module requires (66
// files, 868 KiB in v1.10.2), copied from the Go module cache (`go mod
// download -json`: no network when the module is cached, as it is for a
// build of this module).
func cobraRepo(b testing.TB) string {
	return namedRepo(b, "cobra", func(dir string) error {
		out, err := exec.Command("go", "mod", "download", "-json", "github.com/spf13/cobra").Output()
		if err != nil {
			return fmt.Errorf("go mod download github.com/spf13/cobra: %w", err)
		}
		var mod struct{ Dir, Version string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			return fmt.Errorf("go mod download github.com/spf13/cobra: %q: %v", out, err)
		}
		return filepath.WalkDir(mod.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(mod.Dir, p)
			dst := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
	})
}

// treeRepo returns the file:// URL of a one-commit repository of n generated
// text files, 49 to a directory, of 200 B to 16 KiB each (deterministic; mean
// ≈ 8 KiB, so 1,666 files ≈ 13 MiB).
func treeRepo(b testing.TB, n int) string {
	return namedRepo(b, fmt.Sprintf("tree%d", n), func(dir string) error {
		line := []byte("the quick brown fox jumps over the lazy dog 0123456789\n")
		for i := 0; i < n; i++ {
			size := 200 + (i*7919)%(16<<10-200)
			data := make([]byte, 0, size+len(line))
			for len(data) < size {
				data = append(data, line...)
			}
			data = append(data, fmt.Sprintf("file %d\n", i)...)
			p := filepath.Join(dir, fmt.Sprintf("d%02d", i/49), fmt.Sprintf("f%04d.txt", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// namedRepo builds (once per run) <tmp>/<key>/team/<key>, fills its work tree
// with fill, commits everything on branch main and returns its file:// URL.
func namedRepo(b testing.TB, key string, fill func(dir string) error) string {
	b.Helper()
	benchRepos.Lock()
	defer benchRepos.Unlock()
	if url, ok := benchRepos.byKey[key]; ok {
		return url
	}
	root, err := benchRepoDir()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, key, "team", key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := fill(dir); err != nil {
		b.Fatal(err)
	}
	gittest.Git(b, dir, "init", "--quiet", "--initial-branch=main")
	gittest.Git(b, dir, "add", "-A")
	gittest.Git(b, dir, "commit", "--quiet", "--no-verify", "--message=snapshot")
	url := gittest.FileURL(dir)
	benchRepos.byKey[key] = url
	return url
}

// removeBenchRepos deletes the repositories namedRepo built (TestMain).
func removeBenchRepos() {
	benchRepos.Lock()
	defer benchRepos.Unlock()
	if benchRepos.dir != "" {
		_ = os.RemoveAll(benchRepos.dir)
	}
}
