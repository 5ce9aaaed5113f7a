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
	"os"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
)

func main() {
	f := remotefake.RegisterFlags(fake.DefaultImage)
	minute := flag.Duration("minute", time.Minute, "how long one Daytona minute lasts (auto-stop, auto-archive)")
	quota := flag.Int("disk-quota-gib", 0, "organization disk quota in GiB (0: none)")
	flag.Parse()
	log := f.Logger()
	srv, err := fake.New(fake.Options{APIKey: *f.APIKey, Image: *f.Image, Minute: *minute, MaxDiskGiB: *quota, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	remotefake.Serve("daytonafake", srv, log, *f.Addr, "DAYTONA_API_URL", "DAYTONA_API_KEY", 0)
}
