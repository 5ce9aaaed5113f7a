package daemon

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
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

// connectMain is `sandbox-supervisor connect PORT`: it connects to TCP port
// PORT (1–65535) of the loopback of the network namespace it runs in
// (127.0.0.1, then ::1) and copies its standard input there and what comes
// back to its standard output until both directions ended; the end of its
// input is passed on as a half-close. The Docker runtime runs it with docker
// exec to forward a preview URL into a container that has no address
// (docs/SECURITY.md "Preview URLs"). Exit 2 for a bad argument, 1 when
// nothing listens.
func connectMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-supervisor connect PORT")
		return 2
	}
	port, err := strconv.ParseUint(args[0], 10, 16)
	if err != nil || port == 0 {
		fmt.Fprintln(os.Stderr, "sandbox-supervisor connect: bad port", strconv.Quote(args[0]))
		return 2
	}
	var c net.Conn
	for _, host := range []string{"127.0.0.1", "::1"} {
		if c, err = net.DialTimeout("tcp", net.JoinHostPort(host, args[0]), 5*time.Second); err == nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-supervisor connect:", err)
		return 1
	}
	defer c.Close()
	go func() {
		_, _ = io.Copy(c, os.Stdin)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(os.Stdout, c)
	return 0
}

// Main is the sandbox-supervisor program (see the package documentation):
// `serve --ctl-fd N …` runs a runtime's supervisor, `shim` one of its
// helpers, `relay` and `connect` the Docker runtime's streams into a
// container (its control connection, a preview URL's connection). It
// returns the exit code.
func Main(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serveMain(args[1:])
		case "shim":
			return shimMain(args[1:])
		case "relay":
			return relayMain(args[1:])
		case "connect":
			return connectMain(args[1:])
		}
	}
	fmt.Fprintln(os.Stderr, "usage: sandbox-supervisor serve --ctl-fd N [--runtime ID] [--layout HASH] [--buffer BYTES] [--max-procs N]")
	return 2
}
