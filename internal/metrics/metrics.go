// Package metrics is a worker host's Prometheus instrumentation
// (docs/OPERATIONS.md "Metrics"): one registry per host holding the
// Temporal SDK's own metrics (through its tally integration) and
// sandboxcore's, served over HTTP at SANDBOX_METRICS_ADDR.
//
// sandboxcore's metrics are taken at the activity boundary, in one place: a
// Temporal worker interceptor (Interceptor) times every activity the host
// runs (local activities included) and reads the results it knows (exec
// results, eviction plans and outcomes, runtime stops), so an operation or
// activity added later is measured without any edit here. The only other
// sources are the repo cache's transfer hook (clone and fetch, which happen
// inside the acquire activity), a decorator on the credential provider and
// access verifier, and two collectors that count workspaces (store) and
// sessions (Temporal visibility) when scraped.
//
// Labels never carry user, workspace or repository names, paths or ids:
// only bounded sets (activity type, runtime kind, error type, eviction
// action, tier and outcome, workspace state and mode, session state).
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Metric names (Prometheus conventions: base units, _total counters).
const (
	NameOperationDuration  = "sandbox_operation_duration_seconds"
	NameOperationErrors    = "sandbox_operation_errors_total"
	NameExecResults        = "sandbox_exec_results_total"
	NameRepoTransfer       = "sandbox_repo_transfer_duration_seconds"
	NameRepoTransferBytes  = "sandbox_repo_transfer_bytes_total"
	NameDiskUsed           = "sandbox_disk_used_bytes"
	NameDiskBudget         = "sandbox_disk_budget_bytes"
	NameDiskWater          = "sandbox_disk_water_mark_bytes"
	NameRepoCacheBytes     = "sandbox_repo_cache_bytes"
	NameWorkspaceBytes     = "sandbox_workspace_bytes"
	NameDiskMeasuredAt     = "sandbox_disk_measured_timestamp_seconds"
	NameEvictionPlans      = "sandbox_eviction_plans_total"
	NameEvictionActions    = "sandbox_eviction_actions_total"
	NameCredentialFailures = "sandbox_credential_failures_total"
	NameRuntimeStarts      = "sandbox_runtime_starts_total"
	NameRuntimeStops       = "sandbox_runtime_stops_total"
	NameRuntimesRunning    = "sandbox_runtimes_running"
	NameWorkspaces         = "sandbox_workspaces"
	NameWorkspacesDirty    = "sandbox_workspaces_dirty"
	NameSessions           = "sandbox_sessions"
)

// Exec outcomes (label outcome of sandbox_exec_results_total).
const (
	ExecOK        = "ok"
	ExecNonZero   = "non_zero"
	ExecTimedOut  = "timed_out"
	ExecCancelled = "cancelled"
	ExecError     = "error" // the command could not run (runtime unavailable, …)
)

// Options configure a host's metrics.
type Options struct {
	// RuntimeKind labels operation latencies and runtime starts and stops
	// (the host's runtime provider kind).
	RuntimeKind string
	// Workspaces lists this host's workspace rows for sandbox_workspaces
	// (nil: not exported).
	Workspaces func(ctx context.Context) ([]sandboxapi.Workspace, error)
	// CountSessions counts the sessions a visibility query matches, for
	// sandbox_sessions (nil: not exported). SessionsQuery builds each state's query.
	CountSessions func(ctx context.Context, query string) (int64, error)
	SessionsQuery func(state string) string
	// SessionStates are the states sandbox_sessions reports.
	SessionStates []string
	// CacheFor is how long the workspace and session counts are reused
	// between scrapes; 0 means 15 s.
	CacheFor time.Duration
	// Logger receives collection errors; nil discards them.
	Logger *slog.Logger
}

// Metrics is one host's registry and its sandboxcore collectors. Its
// methods are safe for concurrent use.
type Metrics struct {
	reg  *prometheus.Registry
	opts Options
	log  *slog.Logger

	opDuration      *prometheus.HistogramVec
	opErrors        *prometheus.CounterVec
	execResults     *prometheus.CounterVec
	transfer        *prometheus.HistogramVec
	transferBytes   *prometheus.CounterVec
	diskUsed        prometheus.Gauge
	diskBudget      prometheus.Gauge
	diskWater       *prometheus.GaugeVec
	repoCacheBytes  prometheus.Gauge
	workspaceBytes  prometheus.Gauge
	diskMeasuredAt  prometheus.Gauge
	evictionPlans   *prometheus.CounterVec
	evictionActions *prometheus.CounterVec
	credFailures    *prometheus.CounterVec
	runtimeStarts   *prometheus.CounterVec
	runtimeStops    *prometheus.CounterVec
	runtimesRunning prometheus.GaugeFunc

	mu      sync.Mutex
	running map[string]bool // workspace id → its runtime was seen started by this worker

	tallyCloser func() error
}

// operationBuckets are the latency buckets of sandbox_operation_duration_seconds
// and of clone/fetch (seconds: 1 ms to 10 min).
var operationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// New builds a host's registry: Go runtime and process collectors, and
// every sandboxcore metric (counters start at zero once a label set is
// first used).
func New(opts Options) *Metrics {
	if opts.CacheFor <= 0 {
		opts.CacheFor = 15 * time.Second
	}
	m := &Metrics{reg: prometheus.NewRegistry(), opts: opts, log: opts.Logger, running: map[string]bool{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	f := factory{m.reg}
	m.opDuration = f.histogram(NameOperationDuration, "Duration of each activity this worker ran (every session operation's activity, eviction and fan-out steps), by activity type ('operation') and runtime kind.", operationBuckets, "operation", "runtime_kind")
	m.opErrors = f.counter(NameOperationErrors, "Activities that failed, by activity type, runtime kind and error type (docs/API.md \"Errors\").", "operation", "runtime_kind", "error_type")
	m.execResults = f.counter(NameExecResults, "Finished exec commands by outcome: ok (exit 0), non_zero, timed_out, cancelled, error (could not run).", "outcome", "runtime_kind")
	m.transfer = f.histogram(NameRepoTransfer, "Duration of repo cache clones and fetches, by op (clone, fetch) and outcome (ok, error).", operationBuckets, "op", "outcome")
	m.transferBytes = f.counter(NameRepoTransferBytes, "Bytes a clone or fetch added to the repo cache on disk (growth of the bare repository), by op.", "op")
	m.diskUsed = f.gauge(NameDiskUsed, "Disk usage the eviction planner measured against the budget (bytes under the data dir, or the filesystem's used bytes with a fractional budget).")
	m.diskBudget = f.gauge(NameDiskBudget, "The host's eviction budget in bytes (SANDBOX_DISK_BUDGET_BYTES or the fraction of the filesystem).")
	m.diskWater = f.gaugeVec(NameDiskWater, "The eviction water marks in bytes (mark: high, low, severe).", "mark")
	m.repoCacheBytes = f.gauge(NameRepoCacheBytes, "Bytes of this host's repo caches (bare repositories), as the eviction planner measured them.")
	m.workspaceBytes = f.gauge(NameWorkspaceBytes, "Bytes of this host's workspaces (worktrees), as the eviction planner measured them.")
	m.diskMeasuredAt = f.gauge(NameDiskMeasuredAt, "When the eviction planner last measured this host's disk (Unix seconds).")
	m.evictionPlans = f.counter(NameEvictionPlans, "Eviction plans made for this host, by pressure (none, high, severe).", "pressure")
	m.evictionActions = f.counter(NameEvictionActions, "Eviction actions carried out on this host, by action, tier and outcome (done, skipped, blocked, failed).", "action", "tier", "outcome")
	m.credFailures = f.counter(NameCredentialFailures, "Credential resolution (stage resolve) and repository access check (stage access) failures, by error type.", "stage", "error_type")
	m.runtimeStarts = f.counter(NameRuntimeStarts, "Runtimes started by an exec on this worker (a runtime not seen running since the worker started or last stopped it).", "runtime_kind")
	m.runtimeStops = f.counter(NameRuntimeStops, "Runtimes this worker saw running that were stopped, by reason (hibernate, destroy, evict).", "runtime_kind", "reason")
	m.runtimesRunning = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameRuntimesRunning, Help: "Runtimes this worker started and has not stopped.", ConstLabels: prometheus.Labels{"runtime_kind": opts.RuntimeKind}},
		func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			return float64(len(m.running))
		})
	m.reg.MustRegister(m.runtimesRunning,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Workspaces != nil {
		m.reg.MustRegister(newWorkspaceCollector(m, opts.Workspaces))
	}
	if opts.CountSessions != nil && opts.SessionsQuery != nil {
		m.reg.MustRegister(newSessionCollector(m, opts))
	}
	return m
}

// Registry returns the host's registry (tests and the HTTP handler gather it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{m.log}})
}

// TemporalHandler returns a Temporal client metrics handler that reports
// the SDK's own metrics (temporal_… requests, workflow and activity task
// latencies, schedule-to-start, poller counts, …) into this registry with
// Prometheus naming (go.temporal.io/sdk/contrib/tally, timers as
// histograms). Set it as client.Options.MetricsHandler of the host's client.
func (m *Metrics) TemporalHandler() client.MetricsHandler {
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       m.reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			m.log.Warn("temporal sdk metric not registered", "error", err)
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitizeOptions,
	}, time.Second)
	m.mu.Lock()
	m.tallyCloser = closer.Close
	m.mu.Unlock()
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope))
}

// sanitizeOptions are the SDK's Prometheus sanitize options, except that
// label values keep '.', '-', ':', '/' and '@' (activity types such as
// sandbox.Exec and task queues such as sandbox-host-h1 read as they are
// named; Prometheus restricts only metric and label names).
var sanitizeOptions = tally.SanitizeOptions{
	NameCharacters: sdktally.PrometheusSanitizeOptions.NameCharacters,
	KeyCharacters:  sdktally.PrometheusSanitizeOptions.KeyCharacters,
	ValueCharacters: tally.ValidCharacters{Ranges: tally.AlphanumericRange,
		Characters: []rune{'_', '.', '-', ':', '/', '@'}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// Close stops the SDK metrics' reporting loop (a final report is made).
func (m *Metrics) Close() {
	m.mu.Lock()
	c := m.tallyCloser
	m.tallyCloser = nil
	m.mu.Unlock()
	if c != nil {
		_ = c()
	}
}

// Serve listens on addr (host:port; port 0 picks one) and serves /metrics
// until stop is called. It returns the address it listens on. Errors: the
// listener's.
func (m *Metrics) Serve(addr string) (bound string, stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("sandboxcore worker metrics: /metrics\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics server stopped", "error", err)
		}
	}()
	return l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// factory registers collectors on one registry.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

// slogPrinter adapts a slog.Logger to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "error", v) }
