package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// collectTimeout bounds one store or visibility read made for a scrape.
const collectTimeout = 5 * time.Second

// cached keeps the last collected samples for Options.CacheFor, so frequent
// scrapes (several Prometheus servers, a dashboard refreshing) cost one
// store or visibility read per period.
type cached struct {
	mu      sync.Mutex
	at      time.Time
	metrics []prometheus.Metric
}

func (c *cached) get(every time.Duration, collect func() []prometheus.Metric) []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.metrics == nil || time.Since(c.at) >= every {
		c.metrics, c.at = collect(), time.Now()
	}
	return c.metrics
}

// workspaceCollector exports sandbox_workspaces{state,mode} and
// sandbox_workspaces_dirty{mode}: this host's workspace rows in the store.
type workspaceCollector struct {
	m          *Metrics
	list       func(ctx context.Context) ([]sandboxapi.Workspace, error)
	byState    *prometheus.Desc
	dirty      *prometheus.Desc
	cache      cached
	errorsDesc *prometheus.Desc
}

func newWorkspaceCollector(m *Metrics, list func(ctx context.Context) ([]sandboxapi.Workspace, error)) *workspaceCollector {
	return &workspaceCollector{
		m: m, list: list,
		byState:    prometheus.NewDesc(NameWorkspaces, "This host's workspaces in the store, by state (creating, ready, evicted, removed) and mode.", []string{"state", "mode"}, nil),
		dirty:      prometheus.NewDesc(NameWorkspacesDirty, "This host's ready workspaces the store records as dirty (uncommitted changes), by mode.", []string{"mode"}, nil),
		errorsDesc: prometheus.NewDesc("sandbox_workspaces_collect_errors", "1 when the last read of the store for sandbox_workspaces failed.", nil, nil),
	}
}

func (c *workspaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byState
	ch <- c.dirty
	ch <- c.errorsDesc
}

func (c *workspaceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.cache.get(c.m.opts.CacheFor, c.collect) {
		ch <- s
	}
}

func (c *workspaceCollector) collect() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	rows, err := c.list(ctx)
	if err != nil {
		c.m.log.Warn("metrics: list workspaces", "error", err)
		return []prometheus.Metric{prometheus.MustNewConstMetric(c.errorsDesc, prometheus.GaugeValue, 1)}
	}
	type key struct{ state, mode string }
	counts := map[key]int{}
	dirty := map[string]int{}
	// Every mode and the common states appear, at 0 when empty, so a
	// dashboard shows a line rather than nothing.
	for _, mode := range []sandboxapi.WorkspaceMode{sandboxapi.ModeAnalysis, sandboxapi.ModeEdit, sandboxapi.ModeTask} {
		for _, st := range []sandboxapi.WorkspaceState{sandboxapi.WorkspaceReady, sandboxapi.WorkspaceEvicted} {
			counts[key{string(st), string(mode)}] = 0
		}
		dirty[string(mode)] = 0
	}
	for _, w := range rows {
		counts[key{string(w.State), string(w.Mode)}]++
		if w.Dirty && w.State == sandboxapi.WorkspaceReady {
			dirty[string(w.Mode)]++
		}
	}
	out := []prometheus.Metric{prometheus.MustNewConstMetric(c.errorsDesc, prometheus.GaugeValue, 0)}
	for k, n := range counts {
		out = append(out, prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(n), k.state, k.mode))
	}
	for mode, n := range dirty {
		out = append(out, prometheus.MustNewConstMetric(c.dirty, prometheus.GaugeValue, float64(n), mode))
	}
	return out
}

// sessionCollector exports sandbox_sessions{state}: this host's sessions
// (one running workflow per workspace) by session state, counted in
// Temporal visibility.
type sessionCollector struct {
	m     *Metrics
	desc  *prometheus.Desc
	cache cached
}

func newSessionCollector(m *Metrics, _ Options) *sessionCollector {
	return &sessionCollector{m: m,
		desc: prometheus.NewDesc(NameSessions, "This host's sessions by state (Temporal visibility: the SandboxState of the workspaces' running session workflows).", []string{"state"}, nil)}
}

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.cache.get(c.m.opts.CacheFor, c.collect) {
		ch <- s
	}
}

func (c *sessionCollector) collect() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var out []prometheus.Metric
	for _, st := range c.m.opts.SessionStates {
		n, err := c.m.opts.CountSessions(ctx, c.m.opts.SessionsQuery(st))
		if err != nil {
			c.m.log.Warn("metrics: count sessions", "state", st, "error", err)
			continue // a missing sample, not a wrong one
		}
		out = append(out, prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), st))
	}
	return out
}
