package remotefake

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Lifecycle is what a fake runs in the background: its HTTP server and
// its loops (auto-stop, expiry), stopped together by Close.
type Lifecycle struct {
	stop chan struct{}
	wg   sync.WaitGroup
	srv  *http.Server
}

// NewLifecycle returns a lifecycle with nothing running yet.
func NewLifecycle() *Lifecycle { return &Lifecycle{stop: make(chan struct{})} }

// Go runs loop in the background; loop must return once stop is closed
// (Close waits for it).
func (l *Lifecycle) Go(loop func(stop <-chan struct{})) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		loop(l.stop)
	}()
}

// Serve serves h on ln in the background (request headers within 10 s).
// Call it once, before Close.
func (l *Lifecycle) Serve(ln net.Listener, h http.Handler) {
	l.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
}

// Close stops the loops and the server (requests in flight get 2 s, then
// their connections are closed) and waits for the loops to return. It
// reports false when the lifecycle was already closed (nothing done).
func (l *Lifecycle) Close() bool {
	select {
	case <-l.stop:
		return false
	default:
		close(l.stop)
	}
	if l.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = l.srv.Shutdown(ctx)
		cancel()
		_ = l.srv.Close()
	}
	l.wg.Wait()
	return true
}
