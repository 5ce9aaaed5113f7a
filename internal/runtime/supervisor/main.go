package supervisor

import (
	"fmt"
	"os"
)

// Main is the sandbox-supervisor program (see the package documentation):
// `serve --ctl-fd N …` runs a runtime's supervisor, `shim` one of its
// helpers. It returns the exit code.
func Main(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serveMain(args[1:])
		case "shim":
			return shimMain()
		}
	}
	fmt.Fprintln(os.Stderr, "usage: sandbox-supervisor serve --ctl-fd N [--runtime ID] [--layout HASH] [--buffer BYTES] [--max-procs N]")
	return 2
}
