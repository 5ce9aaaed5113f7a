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
	"os"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
)

func main() {
	f := remotefake.RegisterFlags(fake.DefaultImage)
	templates := flag.String("templates", "base", "comma-separated template ids a create may name")
	streamLimit := flag.Duration("stream-limit", 0, "cut envd streams older than this, as E2B's proxies do (0: never)")
	maxLength := flag.Duration("max-instance-length", fake.DefaultMaxInstanceLength, "the team's max instance length (E2B: 1h Hobby, 24h Pro)")
	maxSandboxes := flag.Int("max-sandboxes", 0, "the team's concurrent sandboxes (0: no limit)")
	flag.Parse()
	log := f.Logger()
	srv, err := fake.New(fake.Options{APIKey: *f.APIKey, Image: *f.Image, Templates: strings.Split(*templates, ","), StreamLimit: *streamLimit,
		MaxInstanceLength: *maxLength, MaxSandboxes: *maxSandboxes, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	remotefake.Serve("e2bfake", srv, log, *f.Addr, "E2B_API_URL", "E2B_API_KEY", 60*time.Second)
}
