package tests

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// oneRun holds a one-run benchmark's figures, measured once per process
// (the benchmark function runs once with b.N=1 and again with the
// -benchtime count: both report the same run).
type oneRun struct {
	sync.Once
	metrics map[string]float64
	err     error
}

// report measures with run on its first call and reports the figures.
func (r *oneRun) report(b *testing.B, run func(*testing.B) (map[string]float64, error)) {
	r.Do(func() { r.metrics, r.err = run(b) })
	if r.err != nil {
		b.Fatal(r.err)
	}
	for k, v := range r.metrics {
		b.ReportMetric(v, k)
	}
}

var depCacheBench oneRun

// BenchmarkDependencyCaches measures what the dependency caches buy
// (docs/RUNTIMES.md "Dependency caches", docs/BENCHMARKS.md "Dependency
// caches"), one run each, on two real projects:
//   - go: `go test -count=1 ./...` (one root-only failure skipped) of github.com/spf13/cobra (the version this
//     module requires): in a user's first workspace (cold: modules
//     downloaded through the egress proxy, standard library compiled), in
//     the same user's second workspace (warm), and on the host with the
//     host's own warm caches in the same run (the baseline);
//   - npm: `npm ci --ignore-scripts && npm test` of a project with mocha
//     11.0.1 and its lockfile (built by the benchmark from the npm registry):
//     cold, warm, and on the host with a warm npm cache.
//
// The ratio metrics are warm-in-a-workspace over warm-on-the-host (goal ≤ 1.3).
func BenchmarkDependencyCaches(b *testing.B) {
	depCacheBench.report(b, runDepCacheBench)
}

func runDepCacheBench(b *testing.B) (map[string]float64, error) {
	h := startHost(b, uniq(b, "bench-depcache"))
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" && k != "local" && k != "docker" {
		return nil, fmt.Errorf("dependency caches need a runtime with host mounts, not %s", k)
	}
	ctx := context.Background()
	out := map[string]float64{}
	for _, p := range []struct {
		name string
		url  string
		cmd  string
		host func(dir string) []string // the host run's extra environment
	}{
		// TestFailGenFishCompletionFile expects a write to fail that root's
		// succeeds: skipped on both sides (the host run is root's here).
		{"go", cobraRepo(b), "go test -count=1 -skip TestFailGenFishCompletionFile ./...", func(string) []string { return nil }},
		{"npm", mochaRepo(b), "npm ci --ignore-scripts --no-audit --no-fund && npm test", func(dir string) []string {
			return []string{"npm_config_cache=" + filepath.Join(dir, "..", "npm-cache")}
		}},
	} {
		user := uniq(b, "u")
		run := func(conv string) (time.Duration, error) {
			s, _, err := h.client.Acquire(ctx, editRequest(user, "p", conv, p.url))
			if err != nil {
				return 0, err
			}
			return timedExec(ctx, s, p.cmd)
		}
		cold, err := run("cold")
		if err != nil {
			return nil, fmt.Errorf("%s cold: %w", p.name, err)
		}
		warm, err := run("warm")
		if err != nil {
			return nil, fmt.Errorf("%s warm: %w", p.name, err)
		}
		dir := filepath.Join(b.TempDir(), p.name, "src")
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		gittest.Git(b, filepath.Dir(dir), "clone", "--quiet", p.url, dir)
		var host time.Duration
		for i := 0; i < 2; i++ { // the first run warms the host's caches
			c := exec.Command("sh", "-c", p.cmd)
			c.Dir, c.Env = dir, append(os.Environ(), p.host(dir)...)
			start := time.Now()
			if o, err := c.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s on the host: %v\n%s", p.name, err, o)
			}
			host = time.Since(start)
		}
		out[p.name+"-cold-s"] = cold.Seconds()
		out[p.name+"-warm-s"] = warm.Seconds()
		out[p.name+"-host-warm-s"] = host.Seconds()
		out[p.name+"-warm/host"] = warm.Seconds() / host.Seconds()
	}
	return out, nil
}

// timedExec runs cmd with sh -c in s and returns how long the exec call
// took; a non-zero exit is an error carrying the output's tail.
func timedExec(ctx context.Context, s *sandboxclient.Session, cmd string) (time.Duration, error) {
	start := time.Now()
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", cmd}, TimeoutS: 1800})
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if res.ExitCode != 0 {
		return d, fmt.Errorf("exit %d: %s\n%s", res.ExitCode, tail(res.Stdout), tail(res.Stderr))
	}
	return d, nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// mochaRepo returns the file:// URL of a one-commit Node project: mocha
// 11.0.1 as its one dev dependency, a package-lock.json resolved from the
// npm registry (network needed once per process), and one test file.
func mochaRepo(b testing.TB) string {
	return nodeRepo(b, "mocha", `{"name":"bench-node","version":"1.0.0","private":true,"scripts":{"test":"mocha"},"devDependencies":{"mocha":"11.0.1"}}`, nil)
}

// nodeRepo returns the file:// URL of a one-commit Node project named key:
// packageJSON, a package-lock.json resolved from the npm registry (`npm
// install --package-lock-only`, network needed once per process), one
// mocha test, node_modules ignored, and the extra files.
func nodeRepo(b testing.TB, key, packageJSON string, extra map[string]string) string {
	return namedRepo(b, key, func(dir string) error {
		files := map[string]string{
			"package.json":  packageJSON + "\n",
			"test/add.js":   "const assert = require('node:assert');\ndescribe('add', () => { it('adds', () => assert.strictEqual(2 + 3, 5)); });\n",
			".gitignore":    "node_modules/\n",
			".mocharc.json": `{"spec":"test/*.js"}` + "\n",
		}
		maps.Copy(files, extra)
		for name, data := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				return err
			}
		}
		c := exec.Command("npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund")
		c.Dir = dir
		c.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, "..", "lock-npm-cache"))
		if o, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("npm install --package-lock-only: %v\n%s", err, o)
		}
		return nil
	})
}
