package supervisor

import (
	"fmt"
	"io"
	"net"
	"os"
)

// relayMain is `sandbox-supervisor relay NAME`: it connects to the abstract
// unix socket NAME and copies its standard input there and what comes back
// to its standard output (the Docker runtime's control connection, run with
// docker exec), until either side ends.
func relayMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-supervisor relay NAME")
		return 2
	}
	c, err := net.Dial("unix", "@"+args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-supervisor relay:", err)
		return 1
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c, os.Stdin); done <- struct{}{} }()
	go func() { _, _ = io.Copy(os.Stdout, c); done <- struct{}{} }()
	<-done
	return 0
}

// Main is the sandbox-supervisor program (see the package documentation):
// `serve --ctl-fd N …` runs a runtime's supervisor, `shim` one of its
// helpers. It returns the exit code.
func Main(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serveMain(args[1:])
		case "shim":
			return shimMain(args[1:])
		case "relay":
			return relayMain(args[1:])
		}
	}
	fmt.Fprintln(os.Stderr, "usage: sandbox-supervisor serve --ctl-fd N [--runtime ID] [--layout HASH] [--buffer BYTES] [--max-procs N]")
	return 2
}
