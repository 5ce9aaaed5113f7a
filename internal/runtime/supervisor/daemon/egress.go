package daemon

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The egress forwarder (docs/SECURITY.md "Network modes"): in a runtime's
// limited network namespace, whose only interface is loopback, the
// supervisor listens on a loopback TCP address (what HTTP_PROXY names) and
// relays every connection to the worker's egress proxy through a unix
// socket mounted into the sandbox. Nothing else leaves the namespace; the
// proxy decides every destination.

// ForwardEgress accepts on ln and relays each connection to the unix
// socket sock (the egress proxy's endpoint), until ln is closed: the
// forwarder of `serve --egress-socket` (benchmarks measure it).
func ForwardEgress(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		go relayEgress(c, sock)
	}
}

func relayEgress(c net.Conn, sock string) {
	defer c.Close()
	up, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		// Say so, as an HTTP answer the client can show.
		fmt.Fprintf(os.Stderr, "sandbox-supervisor: egress proxy: %v\n", err)
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"+
			"sandboxcore: the worker's egress proxy cannot be reached (is the worker running?)\n")
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, c)
		if u, ok := up.(*net.UnixConn); ok {
			_ = u.CloseWrite()
		}
	}()
	_, _ = io.Copy(c, up)
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.CloseWrite()
	}
	wg.Wait()
}
