// Command e2bfake runs the faithful E2B stand-in of
// internal/runtime/e2b/e2bfake/fake as a program, so the E2B runtime can be
// tried without an account (README "E2B"):
//
//	go run ./internal/runtime/e2b/e2bfake -addr 127.0.0.1:4100
//
// It prints the lines E2B_API_URL=… and E2B_API_KEY=… ready to export, then
// serves until interrupted, removing its sandboxes' containers on exit. It
// needs a Docker daemon, the image -image (default sandboxcore-test:latest,
// built by .ci/test-image.sh) and the Go toolchain (it builds the envd that
// runs inside each sandbox).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (host:port)")
	image := flag.String("image", fake.DefaultImage, "image of the sandboxes (never pulled)")
	key := flag.String("api-key", "", "the API key to accept (default: a random one, printed)")
	templates := flag.String("templates", "base", "comma-separated template ids a create may name")
	streamLimit := flag.Duration("stream-limit", 0, "cut envd streams older than this, as E2B's proxies do (0: never)")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := fake.New(fake.Options{APIKey: *key, Image: *image, Templates: strings.Split(*templates, ","), StreamLimit: *streamLimit, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	url, err := srv.Start(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		srv.Close()
		os.Exit(1)
	}
	fmt.Printf("E2B_API_URL=%s\nE2B_API_KEY=%s\n", url, srv.APIKey())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	log.Info("e2bfake: stopping; removing the sandboxes")
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	if v := srv.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "e2bfake: %d spec violations\n", len(v))
		os.Exit(3)
	}
}
