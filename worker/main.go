// Command sandbox-worker runs one sandboxcore worker host: it embeds a
// Temporal dev server (with the Web UI) unless TEMPORAL_ADDRESS is set, and
// serves SessionWorkflow and its activities. Configuration comes from the
// environment (README.md "Configuration").
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/wire"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := hostworker.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, err := hostworker.Start(ctx, cfg, hostworker.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer h.Stop()

	addr := cfg.TemporalAddress
	if h.Dev != nil {
		addr = h.Dev.Address
	}
	fmt.Printf("sandboxcore worker ready\n")
	fmt.Printf("  host id      %s (task queues %s and %s)\n", cfg.HostID, cfg.TaskQueue, wire.HostTaskQueue(cfg.HostID))
	fmt.Printf("  temporal     %s (namespace %s%s)\n", addr, cfg.Namespace, map[bool]string{true: ", embedded", false: ""}[h.Dev != nil])
	if h.Dev != nil && h.Dev.UIURL != "" {
		fmt.Printf("  web ui       %s/namespaces/%s/workflows\n", h.Dev.UIURL, cfg.Namespace)
	}
	fmt.Printf("  data dir     %s\n", cfg.DataDir)
	kind := h.Activities.Runtimes.Kind()
	fmt.Printf("  runtime      %s (SANDBOX_RUNTIME_PROVIDER=%s)\n", kind, cfg.RuntimeProvider)
	if kind == "local" {
		fmt.Printf("  WARNING      the local runtime runs commands as plain host processes, without isolation\n")
	}
	fmt.Printf("\nNext, in another terminal (see README.md, \"Walkthrough\"):\n")
	fmt.Printf("  export TEMPORAL_ADDRESS=%s\n", addr)
	if cfg.AllowFileURLs {
		fmt.Printf("  bin/sandboxctl acquire --repo file://$PWD --user me --project demo --mode edit --conversation c1\n")
	} else {
		fmt.Printf("  bin/sandboxctl acquire --repo https://github.com/OWNER/REPO --user me --project demo --mode edit --conversation c1\n")
	}
	fmt.Printf("  bin/sandboxctl exec WS -- git status\n\nStop with Ctrl-C.\n")
	<-ctx.Done()
	fmt.Println("sandbox-worker: shutting down")
	return nil
}
