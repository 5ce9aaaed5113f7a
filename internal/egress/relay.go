package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
)

// dial connects to host:port after deciding it; a refusal is a *Denial.
func (e *endpoint) dial(ctx context.Context, pol Policy, host string, port uint16) (net.Conn, error) {
	addrs, d, err := e.decide(ctx, pol, host, port)
	if d != nil {
		return nil, d
	}
	if err != nil {
		return nil, err
	}
	var last error
	for _, ap := range addrs {
		c, err := e.p.dialAddr(ctx, ap)
		if err == nil {
			e.p.log.Debug("egress", "workspace", pol.WorkspaceID, "runtime", pol.RuntimeID, "destination", net.JoinHostPort(host, strconv.Itoa(int(port))), "address", ap.String())
			return c, nil
		}
		last = err
	}
	return nil, dialErr(last)
}

// connect serves CONNECT: a tunnel to the checked destination.
func (e *endpoint) connect(w http.ResponseWriter, r *http.Request, pol Policy, host string, port uint16) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	up, err := e.dial(r.Context(), pol, host, port)
	var d *Denial
	switch {
	case errors.As(err, &d):
		e.deny(w, pol, "CONNECT", dest, d)
		return
	case err != nil:
		e.failed(w, pol, "CONNECT", dest, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		e.answer(w, http.StatusInternalServerError, "cannot tunnel")
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if !e.track(down) {
		return
	}
	defer e.untrack(down)
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	splice(down, buf, up)
}

// splice copies both ways until both directions ended (half-closes passed on).
func splice(down net.Conn, buf *bufio.ReadWriter, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var src io.Reader = down
		if n := buf.Reader.Buffered(); n > 0 {
			src = io.MultiReader(io.LimitReader(buf.Reader, int64(n)), down)
		}
		_, _ = io.Copy(up, src)
		closeWrite(up)
	}()
	_, _ = io.Copy(down, up)
	closeWrite(down)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// forward serves a plain HTTP request by absolute URL.
func (e *endpoint) forward(w http.ResponseWriter, r *http.Request, pol Policy, host string, port uint16) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	// Decide before anything of the request is sent on (the dial decides
	// again, for every connection the transport opens).
	if _, d, _ := e.decide(r.Context(), pol, host, port); d != nil {
		e.deny(w, pol, r.Method, dest, d)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport:     e.transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var d *Denial
			if errors.As(err, &d) {
				e.deny(w, pol, r.Method, dest, d)
				return
			}
			e.failed(w, pol, r.Method, dest, err)
		},
	}
	rp.ServeHTTP(w, r)
}

func dialErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
