// Command sdkbench measures the Go SDK (sandboxclient) against a running
// worker: the latency of exec of `true` and of read_file on one workspace,
// for the Python SDK's benchmark to compare with in the same run
// (python/bench/bench_sdk.py, make bench-python, docs/BENCHMARKS.md "Python
// SDK"). It prints one JSON object: {"exec_true": {"p50_ms", "p90_ms"},
// "read_file": {…}, "n"}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

func main() {
	address := flag.String("address", "127.0.0.1:7233", "Temporal frontend")
	queue := flag.String("task-queue", "sandbox", "the worker's task queue")
	wsID := flag.String("workspace", "", "workspace id (required)")
	path := flag.String("path", "README.md", "file read_file reads")
	n := flag.Int("n", 200, "calls of each operation")
	flag.Parse()
	ctx := context.Background()
	sc, err := sandboxclient.Dial(ctx, sandboxclient.DialOptions{TaskQueue: *queue, Connection: sandboxclient.Connection{Address: *address}})
	if err != nil {
		log.Fatal(err)
	}
	defer sc.Close()
	s, err := sc.Session(*wsID)
	if err != nil {
		log.Fatal(err)
	}
	measure := func(op func() error) map[string]float64 {
		for range 5 { // warm-up
			if err := op(); err != nil {
				log.Fatal(err)
			}
		}
		var ms []float64
		for range *n {
			t := time.Now()
			if err := op(); err != nil {
				log.Fatal(err)
			}
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
		}
		slices.Sort(ms)
		return map[string]float64{"p50_ms": ms[len(ms)/2], "p90_ms": ms[len(ms)*9/10]}
	}
	out := map[string]any{"n": *n}
	out["exec_true"] = measure(func() error {
		_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		return err
	})
	out["read_file"] = measure(func() error {
		_, err := s.ReadFile(ctx, *path)
		return err
	})
	b, _ := json.Marshal(out)
	fmt.Fprintln(os.Stdout, string(b))
}
