package tests

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/metrics"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// scrape is one parsed /metrics page: value of each sample by
// "name{label="value",…}" (labels sorted; histograms as _count and _sum).
type scrape map[string]float64

func scrapeMetrics(t *testing.T, addr string) scrape {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "the metrics page parses as the Prometheus text format")
	out := scrape{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := func(suffix string) string { return name + suffix + labelsOf(m) }
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			case dto.MetricType_UNTYPED:
				out[key("")] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return "{" + strings.Join(ls, ",") + "}"
}

// sample returns the value of name with exactly these labels.
func (s scrape) sample(name string, labels ...string) float64 {
	var ls []string
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(ls)
	return s[name+"{"+strings.Join(ls, ",")+"}"]
}

// matching sums every sample of name whose labels include these.
func (s scrape) matching(name string, labels ...string) float64 {
	var sum float64
	for k, v := range s {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(k, fmt.Sprintf("%s=%q", labels[i], labels[i+1])) {
				ok = false
			}
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// TestMetricsAfterAScriptedSession: a host serving SANDBOX_METRICS_ADDR is
// scraped before and after a scripted session (acquire, commands exiting 0
// and 3 and one timing out, a write, a commit, an eviction dry run, and an
// acquire refused for want of access), and every sandboxcore counter and
// histogram count moved by exactly what was done — no activity ran that
// the script did not cause — while the Temporal SDK's own metrics are
// served on the same page.
func TestMetricsAfterAScriptedSession(t *testing.T) {
	cfg := baseConfig(t, "metrics")
	cfg.MetricsAddr = "127.0.0.1:0"
	// No Options.Client: the host dials its own, so its SDK metrics are its own.
	hw, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Credentials: creds, Logger: quiet, MetricsCacheFor: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(hw.Stop)
	require.NotEmpty(t, hw.MetricsAddr)
	h := &testHost{Host: hw, client: sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfg.TaskQueue})}
	kind := hw.Activities.Runtimes.Kind()
	ctx := ctxFor(t, 3*time.Minute)

	before := scrapeMetrics(t, hw.MetricsAddr)

	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	gittest.Commit(t, upstream, "README.md", "hello\n", "initial")
	s, _, err := h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", gittest.FileURL(upstream)))
	require.NoError(t, err)
	for _, req := range []sandboxapi.ExecRequest{
		{Cmd: []string{"true"}},
		{Cmd: []string{"sh", "-c", "exit 3"}},
		{Cmd: []string{"sleep", "30"}, TimeoutS: 1},
	} {
		_, err := s.Exec(ctx, req)
		require.NoError(t, err)
	}
	require.NoError(t, s.WriteFile(ctx, "notes/hello.txt", []byte("hello\n"), 0))
	c, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "agent: hello"})
	require.NoError(t, err)
	require.False(t, c.NothingToCommit)
	plan, err := h.client.RunEviction(ctx, sandboxapi.EvictionInput{DryRun: true, Hosts: []string{cfg.HostID}})
	require.NoError(t, err)
	require.Len(t, plan.Hosts, 1)
	require.NotNil(t, plan.Hosts[0].Plan, "the host planned: %s", plan.Hosts[0].Error)
	usage := plan.Hosts[0].Plan.Plan.Usage
	run, err := tc.DescribeWorkflowExecution(ctx, plan.WorkflowID, "")
	require.NoError(t, err)
	var failures int64 = -1
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(run.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[sandboxapi.SearchAttrEvictionFailures], &failures))
	assert.Equal(t, int64(0), failures, "the eviction run's SandboxEvictionFailures")

	// A private repository acquired without a credential: refused by the access check.
	srv := gittest.NewHTTPServer(t, t.TempDir(), "agent", "secret-"+uniq(t, "s"))
	gittest.Commit(t, gittest.InitRepo(t, srv.RepoDir("team/private.git"), "trunk"), "README.md", "x\n", "initial")
	_, _, err = h.client.Acquire(ctx, editRequest(uniq(t, "u"), "p", "c", srv.URL("team/private.git")))
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed)

	after := scrapeMetrics(t, hw.MetricsAddr)
	if testing.Verbose() {
		for k := range after {
			if strings.HasPrefix(k, "temporal_") {
				t.Log(k)
			}
		}
	}
	delta := func(name string, labels ...string) float64 {
		return after.sample(name, labels...) - before.sample(name, labels...)
	}

	// Every activity the script caused, exactly once each (local activities
	// on the host queue included), and nothing else.
	// Each command is one ExecStart (the fast path); one still running after
	// its wait (the 1 s one, at least) is waited for by one Exec.
	want := map[string]float64{
		wire.ActivityLocate: 2, wire.ActivityAcquire: 2, wire.ActivityExecStart: 3, wire.OpActivity(sandboxapi.UpdateWriteFile): 1,
		wire.OpActivity(sandboxapi.UpdateCommit): 1, wire.ActivityEvictionHosts: 1, wire.ActivityPlanEviction: 1,
	}
	got := map[string]float64{}
	for k, v := range after {
		if strings.HasPrefix(k, metrics.NameOperationDuration+"_count{") {
			if d := v - before[k]; d != 0 {
				op := k[strings.Index(k, `operation="`)+len(`operation="`):]
				got[op[:strings.Index(op, `"`)]] += d
				assert.Contains(t, k, fmt.Sprintf("runtime_kind=%q", kind), k)
			}
		}
	}
	execs := got[wire.ActivityExec]
	delete(got, wire.ActivityExec)
	assert.True(t, execs >= 1 && execs <= 3, "exec activities waiting for a command: %v", execs)
	assert.Equal(t, want, got, "activity counts of %s", metrics.NameOperationDuration)
	assert.Equal(t, 1.0, delta(metrics.NameOperationErrors, "operation", wire.ActivityAcquire, "runtime_kind", kind, "error_type", sandboxapi.ErrRepoAuthFailed.Type))
	assert.Equal(t, 1.0, after.matching(metrics.NameOperationErrors)-before.matching(metrics.NameOperationErrors), "one failed activity")
	assert.Greater(t, delta(metrics.NameOperationDuration+"_sum", "operation", wire.ActivityExec, "runtime_kind", kind)+
		delta(metrics.NameOperationDuration+"_sum", "operation", wire.ActivityExecStart, "runtime_kind", kind), 1.0, "the timed-out command took its 1 s")

	for outcome, n := range map[string]float64{metrics.ExecOK: 1, metrics.ExecNonZero: 1, metrics.ExecTimedOut: 1, metrics.ExecCancelled: 0, metrics.ExecError: 0} {
		assert.Equal(t, n, delta(metrics.NameExecResults, "outcome", outcome, "runtime_kind", kind), "exec outcome %s", outcome)
	}

	// One clone (the first acquire; the refused one never reached the cache), no fetch.
	assert.Equal(t, 1.0, delta(metrics.NameRepoTransfer+"_count", "op", "clone", "outcome", "ok"))
	assert.Equal(t, 0.0, after.matching(metrics.NameRepoTransfer+"_count", "op", "fetch")-before.matching(metrics.NameRepoTransfer+"_count", "op", "fetch"))
	assert.Positive(t, delta(metrics.NameRepoTransferBytes, "op", "clone"), "the clone's bytes on disk")

	// The runtime started with the first command and is still running.
	assert.Equal(t, 1.0, delta(metrics.NameRuntimeStarts, "runtime_kind", kind))
	assert.Equal(t, 0.0, after.matching(metrics.NameRuntimeStops)-before.matching(metrics.NameRuntimeStops))
	assert.Equal(t, 1.0, after.sample(metrics.NameRuntimesRunning, "runtime_kind", kind))

	// The dry run planned once; disk gauges are the plan's own numbers.
	assert.Equal(t, 1.0, after.matching(metrics.NameEvictionPlans)-before.matching(metrics.NameEvictionPlans))
	assert.Equal(t, float64(usage.UsedBytes), after.sample(metrics.NameDiskUsed))
	assert.Equal(t, float64(usage.BudgetBytes), after.sample(metrics.NameDiskBudget))
	assert.Positive(t, usage.RepoCacheBytes)
	assert.Positive(t, usage.WorkspaceBytes)
	assert.Equal(t, float64(usage.RepoCacheBytes), after.sample(metrics.NameRepoCacheBytes))
	assert.Equal(t, float64(usage.WorkspaceBytes), after.sample(metrics.NameWorkspaceBytes))
	assert.Equal(t, float64(plan.Hosts[0].Plan.Plan.HighBytes), after.sample(metrics.NameDiskWater, "mark", "high"))
	assert.Equal(t, 0.0, after.matching(metrics.NameEvictionActions)-before.matching(metrics.NameEvictionActions), "a dry run changes nothing")

	// Credentials: the refused access check, nothing failed to resolve.
	assert.Equal(t, 1.0, delta(metrics.NameCredentialFailures, "stage", "access", "error_type", sandboxapi.ErrRepoAuthFailed.Type))
	assert.Equal(t, 0.0, after.matching(metrics.NameCredentialFailures, "stage", "resolve")-before.matching(metrics.NameCredentialFailures, "stage", "resolve"))

	// The store's rows and the sessions by state (visibility is eventually consistent).
	assert.Equal(t, 1.0, after.sample(metrics.NameWorkspaces, "state", "ready", "mode", "edit"))
	assert.Equal(t, 0.0, after.sample(metrics.NameWorkspacesDirty, "mode", "edit"), "committed: clean")
	require.Eventually(t, func() bool {
		return scrapeMetrics(t, hw.MetricsAddr).sample(metrics.NameSessions, "state", sandboxapi.StateActive) == 1
	}, 15*time.Second, 200*time.Millisecond, "one active session on this host")

	// The Temporal SDK's own metrics, on the same page: the exec activities
	// waiting for a command were each executed once (never retried).
	assert.Equal(t, execs, after.matching("temporal_activity_execution_latency_seconds_count", "activity_type", wire.ActivityExec)-
		before.matching("temporal_activity_execution_latency_seconds_count", "activity_type", wire.ActivityExec))
	assert.Positive(t, after.matching("temporal_request_total")-before.matching("temporal_request_total"))
	assert.Positive(t, after.matching("temporal_workflow_task_execution_latency_seconds_count"))
	for k := range after {
		assert.NotContains(t, k, upstream, "no label carries a path")
	}
}
