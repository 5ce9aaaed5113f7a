package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Preview URLs (docs/API.md "Preview URLs"). Docker publishes a container's
// ports only when the container is created, and a runtime's container lives
// as long as its workspace's runtime: so the provider publishes a port on
// demand the way Docker's own userland proxy does, on a loopback port of the
// worker's machine. A forwarder listens on 127.0.0.1:<ephemeral> and relays
// each connection to the container's address on its network (looked up per
// connection: a restarted container may have another). It lives until the
// runtime is stopped or destroyed through this provider, or the provider is
// closed. A container of the limited or default network (Docker's "none"
// network: its only way out is the egress proxy) has no address: each
// connection is relayed by `sandbox-supervisor connect PORT` run in it with
// docker exec, to its loopback. A runtime whose network is none cannot be
// previewed.

// MaxPreviewsPerRuntime bounds the forwarded ports of one runtime.
const MaxPreviewsPerRuntime = 16

// previewDialTimeout bounds one connection attempt to the container.
const previewDialTimeout = 5 * time.Second

type previewKey struct {
	id   string
	port int
}

// forwarder relays one loopback listener to one container port.
type forwarder struct {
	p    *Provider
	key  previewKey
	ln   net.Listener
	done chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// PreviewURL returns http://127.0.0.1:<loopback port>/, forwarded to port
// (1–65535) of runtime id's running container (the same URL again while its
// forwarder lives). Errors: sandboxapi.ErrInvalidArgument (port, id),
// sandboxapi.ErrNotFound (no such runtime), sandboxapi.ErrConflict (a container
// sandboxcore does not manage), sandboxapi.ErrCommandRejected (the container is
// not running, is on the "none" network, or has MaxPreviewsPerRuntime ports
// forwarded already), sandboxapi.ErrRuntimeUnavailable (the daemon, or no
// loopback port could be opened).
func (p *Provider) PreviewURL(ctx context.Context, id string, port int) (sandboxapi.PreviewURL, error) {
	if port < 1 || port > 65535 {
		return sandboxapi.PreviewURL{}, sandboxapi.FieldError("port", "port %d is outside 1–65535", port)
	}
	if err := sandboxapi.ValidateID("runtime id", id); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	info, err := p.cli.ContainerInspect(ctx, ContainerName(id))
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "docker: runtime %s does not exist (run a command first)", id)
		}
		return sandboxapi.PreviewURL{}, p.mapErr(err, "inspect runtime %s", id)
	}
	if err := ours(info.Config, id); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	if info.State == nil || !info.State.Running {
		return sandboxapi.PreviewURL{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "docker: runtime %s is not running, so nothing listens on port %d: start the server with exec first", id, port)
	}
	if _, err := containerAddr(info); err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	f, err := p.forwarderFor(previewKey{id, port})
	if err != nil {
		return sandboxapi.PreviewURL{}, err
	}
	return sandboxapi.PreviewURL{URL: "http://" + f.ln.Addr().String() + "/"}, nil
}

// containerAddr is the container's address on its network, or "" for a
// container of the limited network (Docker's none network, the egress proxy
// its only way out): its port is reached through `sandbox-supervisor
// connect` run in it (execConn). sandboxapi.ErrCommandRejected for a container
// of the none network, or one with no address.
func containerAddr(info container.InspectResponse) (string, error) {
	if info.HostConfig != nil && info.HostConfig.NetworkMode.IsNone() {
		if sandboxapi.Network(info.Config.Labels[LabelNetwork]) != sandboxapi.NetworkNone {
			return "", nil
		}
		return "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "docker: runtime %s has no network (network none): no port of it can be reached", info.Config.Labels[LabelRuntime])
	}
	if info.NetworkSettings != nil {
		mode := ""
		if info.HostConfig != nil {
			mode = string(info.HostConfig.NetworkMode)
		}
		if n, ok := info.NetworkSettings.Networks[mode]; ok && n != nil && n.IPAddress != "" {
			return n.IPAddress, nil
		}
		for _, n := range info.NetworkSettings.Networks {
			if n != nil && n.IPAddress != "" {
				return n.IPAddress, nil
			}
		}
	}
	return "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "docker: runtime %s has no network address: no port of it can be reached", info.Config.Labels[LabelRuntime])
}

// forwarderFor returns the live forwarder of k, opening one when needed.
func (p *Provider) forwarderFor(k previewKey) (*forwarder, error) {
	p.previewMu.Lock()
	defer p.previewMu.Unlock()
	if p.previews == nil {
		p.previews = map[previewKey]*forwarder{}
	}
	if f, ok := p.previews[k]; ok {
		return f, nil
	}
	n := 0
	for other := range p.previews {
		if other.id == k.id {
			n++
		}
	}
	if n >= MaxPreviewsPerRuntime {
		return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "docker: runtime %s has %d ports forwarded already (at most %d)", k.id, n, MaxPreviewsPerRuntime)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "docker: open a loopback port for runtime %s", k.id)
	}
	f := &forwarder{p: p, key: k, ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.previews[k] = f
	go f.serve()
	p.log.Info("preview port forwarded", "id", k.id, "port", k.port, "listen", ln.Addr().String())
	return f, nil
}

// closePreviews closes the forwarders of runtime id ("" = all) and their
// connections.
func (p *Provider) closePreviews(id string) {
	p.previewMu.Lock()
	var fs []*forwarder
	for k, f := range p.previews {
		if id == "" || k.id == id {
			fs = append(fs, f)
			delete(p.previews, k)
		}
	}
	p.previewMu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case <-f.done:
				return
			case <-time.After(50 * time.Millisecond): // e.g. out of file descriptors
			}
			continue
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		go f.relay(c)
	}
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
		return false
	default:
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// relay connects c to the container's port (its current address) and
// copies both ways until either side closes.
func (f *forwarder) relay(c net.Conn) {
	defer f.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), previewDialTimeout)
	defer cancel()
	info, err := f.p.cli.ContainerInspect(ctx, ContainerName(f.key.id))
	if err != nil || ours(info.Config, f.key.id) != nil || info.State == nil || !info.State.Running {
		return
	}
	addr, err := containerAddr(info)
	if err != nil {
		return
	}
	var up net.Conn
	if addr == "" { // the limited network: through the container's loopback
		up, err = f.p.execConn(ctx, ContainerName(f.key.id), SupervisorPath, "connect", strconv.Itoa(f.key.port))
	} else {
		var d net.Dialer
		up, err = d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(f.key.port)))
	}
	if err != nil {
		return
	}
	if !f.track(up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// close stops accepting and ends every relayed connection.
func (f *forwarder) close() {
	f.mu.Lock()
	select {
	case <-f.done:
		f.mu.Unlock()
		return
	default:
	}
	close(f.done)
	conns := f.conns
	f.conns = map[net.Conn]struct{}{}
	f.mu.Unlock()
	_ = f.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
}
