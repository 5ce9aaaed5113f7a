// Command daytonafake runs the faithful Daytona stand-in of
// internal/runtime/daytona/daytonafake/fake as a program, so the Daytona
// runtime can be tried without an account (README "Daytona"):
//
//	go run ./internal/runtime/daytona/daytonafake -addr 127.0.0.1:4000
//
// It prints the lines DAYTONA_API_URL=… and DAYTONA_API_KEY=… ready to
// export, then serves until interrupted, removing its sandboxes' containers
// on exit. It needs a Docker daemon and the image -image (default
// sandboxcore-test:latest, built by .ci/test-image.sh).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (host:port)")
	image := flag.String("image", fake.DefaultImage, "image of the sandboxes (never pulled)")
	key := flag.String("api-key", "", "the API key to accept (default: a random one, printed)")
	minute := flag.Duration("minute", time.Minute, "how long one Daytona minute lasts (auto-stop, auto-archive)")
	quota := flag.Int("disk-quota-gib", 0, "organization disk quota in GiB (0: none)")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := fake.New(fake.Options{APIKey: *key, Image: *image, Minute: *minute, MaxDiskGiB: *quota, Logger: log})
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
	fmt.Printf("DAYTONA_API_URL=%s\nDAYTONA_API_KEY=%s\n", url, srv.APIKey())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	log.Info("daytonafake: stopping; removing the sandboxes")
	srv.Close()
	if v := srv.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "daytonafake: %d spec violations\n", len(v))
		os.Exit(3)
	}
}
