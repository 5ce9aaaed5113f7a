// Command sandbox-supervisor is the process that lives inside each runtime
// of the bubblewrap, local and Docker backends and spawns its commands
// (internal/runtime/supervisor/daemon; its protocol and the worker's side
// of it: internal/runtime/supervisor; docs/SECURITY.md "Process model").
// The worker starts it; it is not meant to be run by hand. Build it next to
// the worker (make build: bin/sandbox-supervisor), statically
// (CGO_ENABLED=0), so that it runs inside any Linux image of the same
// architecture.
package main

import (
	"os"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/daemon"
)

func main() { os.Exit(daemon.Main(os.Args[1:])) }
