package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Background processes (sandbox.ProcessRuntime): the container's main
// process is the runtime's supervisor (SupervisorPath, the static
// sandbox-supervisor bind-mounted read-only), listening on an abstract unix
// socket in the container's network namespace; the worker reaches it
// through `sandbox-supervisor relay` processes it starts with exec (one per
// control connection, kept in a small pool). The supervisor keeps running,
// with its processes and their buffered output, while no worker does.
const (
	// SupervisorPath is where the supervisor binary is mounted.
	SupervisorPath = "/.sandboxcore/sandbox-supervisor"
	// supervisorSocket is the supervisor's abstract socket name.
	supervisorSocket = "sandboxcore-supervisor"
)

// installSupervisor copies the supervisor binary into the state directory
// (the daemon must see it at the same path: on a worker in a container,
// the data root is bind-mounted at the same absolute path).
func (p *Provider) installSupervisor(explicit string) error {
	src, err := supervisor.Find(explicit)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "docker: the runtime supervisor: %v", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "docker: the runtime supervisor: %v", err)
	}
	if err := os.MkdirAll(p.stateDir, 0o711); err != nil {
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "docker: state directory: %v", err)
	}
	sum := sha256.Sum256(data)
	dst := filepath.Join(p.stateDir, supervisor.BinaryName+"-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Stat(dst); err == nil && fi.Size() == int64(len(data)) {
		p.sup = dst
		return nil
	}
	tmp := dst + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o755); err != nil || os.Rename(tmp, dst) != nil {
		_ = os.Remove(tmp)
		return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "docker: cannot install the runtime supervisor in %s", p.stateDir)
	}
	p.sup = dst
	return nil
}

// procClients holds a provider's supervisor clients and archives by runtime id.
type procClients struct {
	mu       sync.Mutex
	clients  map[string]*supervisor.Client
	archives map[string]*supervisor.Archive
}

func (p *Provider) archive(id string) *supervisor.Archive {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	if p.procs.archives == nil {
		p.procs.archives = map[string]*supervisor.Archive{}
	}
	a, ok := p.procs.archives[id]
	if !ok {
		a = supervisor.LoadArchive(filepath.Join(p.stateDir, id+".archive"))
		p.procs.archives[id] = a
	}
	return a
}

// dropClient forgets the pooled control connections of runtime id (its
// container stopped or was replaced).
func (p *Provider) dropClient(id string) {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	if c, ok := p.procs.clients[id]; ok {
		c.Close()
		delete(p.procs.clients, id)
	}
}

func (p *Provider) clientFor(r *Runtime) *supervisor.Client {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	if p.procs.clients == nil {
		p.procs.clients = map[string]*supervisor.Client{}
	}
	c, ok := p.procs.clients[r.id]
	if !ok {
		c = supervisor.NewDialClient(r.relay)
		p.procs.clients[r.id] = c
	}
	return c
}

// processes returns r's sandbox.ProcessRuntime implementation.
func (r *Runtime) processes() *supervisor.Processes {
	return &supervisor.Processes{
		Support: sandbox.ProcessSupport{Durable: true, PTY: true, MaxProcesses: sandbox.MaxProcesses, BufferBytes: sandbox.ProcessBufferBytes},
		Client:  r.client,
		Prepare: r.prepare,
		Archive: r.p.archive(r.id),
	}
}

// ProcessSupport reports durable, PTY-capable background processes.
func (r *Runtime) ProcessSupport() sandbox.ProcessSupport { return r.processes().ProcessSupport() }

// StartProcess starts a background process in the container (see
// sandbox.ProcessRuntime); a stopped container is started first.
func (r *Runtime) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.ProcessInfo, error) {
	return r.processes().StartProcess(ctx, spec)
}

// ReadProcess reads a background process's output (sandbox.ProcessRuntime).
func (r *Runtime) ReadProcess(ctx context.Context, id string, req sandbox.ProcessReadRequest) (sandbox.ProcessOutput, error) {
	return r.processes().ReadProcess(ctx, id, req)
}

// WaitProcess waits for a process to end (sandbox.ProcessRuntime).
func (r *Runtime) WaitProcess(ctx context.Context, id string, wait time.Duration) (sandbox.ProcessInfo, error) {
	return r.processes().WaitProcess(ctx, id, wait)
}

// CancelProcess kills a process's tree as cancelled (sandbox.ProcessRuntime).
func (r *Runtime) CancelProcess(ctx context.Context, id string) error {
	return r.processes().CancelProcess(ctx, id)
}

// WriteProcess writes to a background process's stdin (sandbox.ProcessRuntime).
func (r *Runtime) WriteProcess(ctx context.Context, id string, data []byte, closeStdin bool) (int, error) {
	return r.processes().WriteProcess(ctx, id, data, closeStdin)
}

// SignalProcess signals a background process (sandbox.ProcessRuntime).
func (r *Runtime) SignalProcess(ctx context.Context, id string, signal string) error {
	return r.processes().SignalProcess(ctx, id, signal)
}

// ResizeProcess resizes a PTY process's terminal (sandbox.ProcessRuntime).
func (r *Runtime) ResizeProcess(ctx context.Context, id string, rows, cols int) error {
	return r.processes().ResizeProcess(ctx, id, rows, cols)
}

// ListProcesses lists the background processes (sandbox.ProcessRuntime).
func (r *Runtime) ListProcesses(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	return r.processes().ListProcesses(ctx)
}

// client is supervisor.Processes.Client.
func (r *Runtime) client(ctx context.Context, start bool) (*supervisor.Client, error) {
	if start {
		if err := r.Start(ctx); err != nil {
			return nil, err
		}
	} else {
		st, err := r.State(ctx)
		if err != nil {
			return nil, err
		}
		switch st {
		case sandbox.RuntimeMissing:
			return nil, sandbox.Errorf(sandbox.ErrNotFound, "runtime %s does not exist (destroyed?)", r.id)
		case sandbox.RuntimeRunning:
		default:
			return nil, nil
		}
	}
	return r.p.clientFor(r), nil
}

// prepare is supervisor.Processes.Prepare: the container's environment
// plus spec.Env, the cwd inside the workdir.
func (r *Runtime) prepare(spec sandbox.ProcessSpec) (supervisor.Spec, error) {
	cwd, err := r.cwd(spec.Cwd)
	if err != nil {
		return supervisor.Spec{}, err
	}
	extra := map[string]string{}
	if spec.PTY != nil {
		extra["TERM"] = "xterm-256color"
	}
	s := supervisor.Spec{Argv: spec.Cmd, Env: procexec.EnvList(extra, spec.Env), InheritEnv: true, Dir: cwd, Tag: spec.Tag, OpenStdin: spec.Stdin}
	if spec.PTY != nil {
		s.PTY, s.Rows, s.Cols = true, uint16(spec.PTY.Rows), uint16(spec.PTY.Cols)
	}
	return s, nil
}

// relay opens one control connection: a `sandbox-supervisor relay` exec
// in the container, its stdin and (demultiplexed) stdout as the stream.
func (r *Runtime) relay(ctx context.Context) (net.Conn, error) {
	resp, err := r.p.cli.ContainerExecCreate(ctx, r.name, container.ExecOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{SupervisorPath, "relay", supervisorSocket},
	})
	if err != nil {
		return nil, r.p.mapErr(err, "control connection to %s", r.name)
	}
	hj, err := r.p.cli.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, r.p.mapErr(err, "control connection to %s", r.name)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, hj.Reader)
		if err == nil {
			err = io.EOF
		}
		_ = pw.CloseWithError(err)
	}()
	return &relayConn{hj: hj, r: pr}, nil
}

// relayConn is a net.Conn over an exec's hijacked stream.
type relayConn struct {
	hj   types.HijackedResponse
	r    *io.PipeReader
	once sync.Once
}

func (c *relayConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *relayConn) Write(b []byte) (int, error) { return c.hj.Conn.Write(b) }
func (c *relayConn) Close() error {
	c.once.Do(func() { c.hj.Close(); _ = c.r.Close() })
	return nil
}
func (c *relayConn) LocalAddr() net.Addr                { return c.hj.Conn.LocalAddr() }
func (c *relayConn) RemoteAddr() net.Addr               { return c.hj.Conn.RemoteAddr() }
func (c *relayConn) SetDeadline(t time.Time) error      { return c.hj.Conn.SetDeadline(t) }
func (c *relayConn) SetReadDeadline(t time.Time) error  { return c.hj.Conn.SetReadDeadline(t) }
func (c *relayConn) SetWriteDeadline(t time.Time) error { return c.hj.Conn.SetWriteDeadline(t) }

// stopProcesses asks a running container's supervisor to end its
// processes (exit reason runtime_stopped) and archives them (unless drop);
// the supervisor exits, and with it the container.
func (r *Runtime) stopProcesses(ctx context.Context, drop bool) {
	defer r.p.dropClient(r.id)
	if st, err := r.State(ctx); err != nil || st != sandbox.RuntimeRunning {
		if drop {
			r.p.archive(r.id).Clear()
		}
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	finals, err := supervisor.NewDialClient(r.relay).Shutdown(sctx, 3*time.Second)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		r.p.log.Warn("runtime supervisor did not shut down", "id", r.id, "error", err)
	}
	a := r.p.archive(r.id)
	if drop {
		a.Clear()
		return
	}
	if err := a.Add(finals); err != nil {
		r.p.log.Warn("runtime process archive not written", "id", r.id, "error", err)
	}
}
