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
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

var preparedBench oneRun

// BenchmarkPreparedTree measures acquire → setup → tests pass on a Node
// project of 1,148 packages (docs/RUNTIMES.md "Prepared trees",
// docs/BENCHMARKS.md "Prepared trees"), one run each, for one user:
//   - cold: the first workspace; its setup (`npm ci`) downloads every
//     package through the egress proxy into an empty npm cache, then keeps
//     node_modules as a prepared tree;
//   - warm: the prepared tree removed, a new workspace's setup runs with
//     the warm npm cache (and keeps the tree again);
//   - prepared: a new workspace restores the tree instead of running the
//     setup; "ready" is acquire until a first command can run, "test" until
//     the first `npm test` passed;
//   - host: the same `npm ci && npm test` in a clone on the host with a
//     warm npm cache, and `npm test` alone, in the same run.
//
// Goals: warm/host ≤ 1.3; prepared-ready ≤ 1 s.
func BenchmarkPreparedTree(b *testing.B) {
	preparedBench.report(b, runPreparedBench)
}

const npmCI = "npm ci --ignore-scripts --no-audit --no-fund"

func runPreparedBench(b *testing.B) (map[string]float64, error) {
	h := startHost(b, uniq(b, "bench-prepared"))
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" && k != "local" && k != "docker" {
		return nil, fmt.Errorf("prepared trees need a runtime with host mounts, not %s", k)
	}
	ctx := context.Background()
	url := node1kRepo(b)
	user := uniq(b, "u")
	out := map[string]float64{}
	// setupRun acquires a workspace waiting for its setup, then runs the
	// tests; it returns the whole time and the setup state.
	setupRun := func(conv string) (time.Duration, *sandboxapi.SetupState, error) {
		req := editRequest(user, "p", conv, url)
		req.Setup = sandboxapi.SetupWait
		start := time.Now()
		s, hd, err := h.client.Acquire(ctx, req)
		if err != nil {
			return 0, nil, err
		}
		if hd.Setup == nil || hd.Setup.State != sandboxapi.SetupDone {
			return 0, nil, fmt.Errorf("setup: %+v", hd.Setup)
		}
		if _, err := timedExec(ctx, s, "npm test"); err != nil {
			return 0, nil, err
		}
		return time.Since(start), hd.Setup, nil
	}
	cold, st, err := setupRun("cold")
	if err != nil {
		return nil, fmt.Errorf("cold: %w", err)
	}
	if st.Prepared == nil || st.Prepared.Action != sandboxapi.PreparedSaved {
		return nil, fmt.Errorf("cold: the tree was not saved: %+v", st.Prepared)
	}
	out["cold-s"] = cold.Seconds()
	out["save-s"] = float64(st.Prepared.DurationMS) / 1000
	out["tree-files"] = float64(st.Prepared.Files)
	out["tree-MB"] = float64(st.Prepared.Bytes) / 1e6

	if err := h.Activities.DepCaches.Remove("prepared/" + st.Prepared.Key); err != nil {
		return nil, err
	}
	warm, st, err := setupRun("warm")
	if err != nil {
		return nil, fmt.Errorf("warm: %w", err)
	}
	out["warm-s"] = warm.Seconds()
	out["warm-save-s"] = float64(st.Prepared.DurationMS) / 1000

	start := time.Now()
	s, hd, err := h.client.Acquire(ctx, editRequest(user, "p", "prepared", url))
	if err != nil {
		return nil, err
	}
	if _, err := timedExec(ctx, s, "true"); err != nil {
		return nil, fmt.Errorf("prepared: %w", err)
	}
	ready := time.Since(start)
	if _, err := timedExec(ctx, s, "npm test"); err != nil {
		return nil, fmt.Errorf("prepared: %w", err)
	}
	test := time.Since(start)
	d, err := s.Describe(ctx)
	if err != nil {
		return nil, err
	}
	if d.Setup == nil || d.Setup.Prepared == nil || d.Setup.Prepared.Action != sandboxapi.PreparedRestored {
		return nil, fmt.Errorf("prepared: not restored: %+v (acquire said %+v)", d.Setup, hd.Setup)
	}
	out["prepared-ready-s"] = ready.Seconds()
	out["prepared-test-s"] = test.Seconds()
	out["restore-s"] = float64(d.Setup.Prepared.DurationMS) / 1000

	dir := filepath.Join(b.TempDir(), "node1k", "src")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	gittest.Git(b, filepath.Dir(dir), "clone", "--quiet", url, dir)
	hostRun := func(cmd string) (time.Duration, error) {
		c := exec.Command("sh", "-c", cmd)
		c.Dir = dir
		c.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, "..", "npm-cache"))
		start := time.Now()
		if o, err := c.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("on the host: %s: %v\n%s", cmd, err, tail(o))
		}
		return time.Since(start), nil
	}
	if _, err := hostRun(npmCI); err != nil { // warms the host's npm cache
		return nil, err
	}
	host, err := hostRun(npmCI + " && npm test")
	if err != nil {
		return nil, err
	}
	hostTest, err := hostRun("npm test")
	if err != nil {
		return nil, err
	}
	out["host-warm-s"] = host.Seconds()
	out["host-test-s"] = hostTest.Seconds()
	out["warm/host"] = warm.Seconds() / host.Seconds()
	return out, nil
}

// node1kRepo returns the file:// URL of a one-commit Node project whose
// lockfile holds 1,148 packages (mocha, jest, babel, webpack, eslint,
// typescript, nyc, lerna, the Nest CLI, prettier at pinned versions,
// resolved from the npm registry: network needed once per process), one
// mocha test, and a .sandboxcore.yaml whose setup is `npm ci` and whose
// prepared directory is node_modules.
func node1kRepo(b testing.TB) string {
	return nodeRepo(b, "node1k", `{"name":"bench-node-1k","version":"1.0.0","private":true,"scripts":{"test":"mocha"},"devDependencies":{`+
		`"mocha":"11.0.1","jest":"29.7.0","@babel/core":"7.26.0","@babel/preset-env":"7.26.0","webpack":"5.97.1","webpack-cli":"5.1.4",`+
		`"eslint":"8.57.1","typescript":"5.7.2","nyc":"17.1.0","lerna":"8.1.9","@nestjs/cli":"10.4.9","prettier":"3.4.2"}}`,
		map[string]string{".sandboxcore.yaml": "setup: " + npmCI + "\nlockfiles: [package-lock.json]\nprepared: [node_modules]\n"})
}
