// Command sandbox-worker runs one sandboxcore worker host: it embeds a
// Temporal dev server (with the Web UI) unless TEMPORAL_ADDRESS is set, and
// serves SessionWorkflow and its activities. Configuration comes from the
// environment (README.md "Configuration").
//
// `sandbox-worker check-replay` serves nothing: it replays every open run
// on the Temporal service TEMPORAL_ADDRESS names against this build's
// workflow code and exits 0 when all replay, 1 naming those that do not
// (docs/PRODUCTION.md "Upgrading workers"), 2 on a usage error.
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
	run := run
	switch {
	case len(os.Args) == 2 && os.Args[1] == "check-replay":
		run = checkReplay
	case len(os.Args) > 1:
		fmt.Fprintf(os.Stderr, "sandbox-worker: unknown arguments %q: it takes none (configuration is the environment, README.md \"Configuration\"), or check-replay\n", os.Args[1:])
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-worker:", err)
		os.Exit(1)
	}
}

// checkReplay is `sandbox-worker check-replay` (hostworker.CheckReplay).
func checkReplay() error {
	cfg, err := hostworker.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := hostworker.CheckReplay(ctx, cfg, logger)
	if err != nil {
		return err
	}
	for _, f := range res.Failures {
		fmt.Printf("cannot replay %s %s run %s: %s\n", f.WorkflowType, f.WorkflowID, f.RunID, f.Reason)
	}
	if len(res.Failures) > 0 {
		return fmt.Errorf("%d of %d open runs do not replay with this build: do not deploy it while they are open (docs/PRODUCTION.md \"Upgrading workers\")", len(res.Failures), res.Replayed)
	}
	fmt.Printf("%d open runs replay with this build\n", res.Replayed)
	return nil
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
	how := ""
	if h.Dev != nil {
		how = ", embedded"
		if cfg.Security.DevTLS != nil {
			how += ", TLS"
			if cfg.Security.DevTLS.ClientCAFile != "" {
				how += " with client certificates"
			}
		}
	} else if cfg.Security.Temporal != nil && cfg.Security.Temporal.TLSEnabled() {
		how = ", TLS"
	}
	fmt.Printf("  temporal     %s (namespace %s%s)\n", addr, cfg.Namespace, how)
	if h.Dev != nil && h.Dev.UIURL != "" {
		fmt.Printf("  web ui       %s/namespaces/%s/workflows\n", h.Dev.UIURL, cfg.Namespace)
	}
	if p := cfg.Security.Payloads; p != nil {
		fmt.Printf("  payloads     encrypted with key %q (SANDBOX_PAYLOAD_KEYS holds %v)\n", p.EncryptionKeyID(), p.KeyIDs())
		if cfg.Security.RequirePayloadEncryption {
			fmt.Printf("               plaintext payloads refused (SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION=1)\n")
		}
	} else {
		fmt.Printf("  payloads     plaintext in Temporal's history (set SANDBOX_PAYLOAD_KEYS to encrypt them)\n")
	}
	if h.Codec != nil {
		fmt.Printf("  codec server %s for the web ui: log in once at %s/login with the token from %s\n", h.Codec.URL, h.Codec.URL, h.CodecTokenSource)
	}
	fmt.Printf("  data dir     %s\n", cfg.DataDir)
	kind := h.Activities.Runtimes.Kind()
	fmt.Printf("  runtime      %s (SANDBOX_RUNTIME_PROVIDER=%s)\n", kind, cfg.RuntimeProvider)
	if kind == "local" {
		fmt.Printf("  WARNING      the local runtime runs commands as plain host processes, without isolation\n")
	}
	switch {
	case h.Volumes != nil:
		fmt.Printf("  disk quota   %d GiB per workspace, kept by the kernel (disk volumes under %s)\n", cfg.DiskQuotaGB(), h.Volumes.Dir())
	case kind == "bwrap":
		fmt.Printf("  disk quota   %d GiB per workspace, measured (SANDBOX_DISK_VOLUMES=on has the kernel keep it)\n", cfg.DiskQuotaGB())
	}
	fmt.Printf("\nNext, in another terminal (see README.md, \"Walkthrough\"):\n")
	fmt.Printf("  export TEMPORAL_ADDRESS=%s\n", addr)
	if cfg.Security.DevTLS != nil {
		fmt.Printf("  (and the TEMPORAL_TLS_* variables this worker connects with: CA, and client certificate)\n")
	}
	if cfg.Security.Payloads != nil {
		fmt.Printf("  (and the same SANDBOX_PAYLOAD_KEYS)\n")
	}
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
