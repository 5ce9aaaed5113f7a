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
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: the runtime supervisor: %v", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: the runtime supervisor: %v", err)
	}
	if err := os.MkdirAll(p.stateDir, 0o711); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: state directory: %v", err)
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
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "docker: cannot install the runtime supervisor in %s", p.stateDir)
	}
	p.sup = dst
	return nil
}

// procClients holds a provider's supervisor clients by container name and
// archives by runtime id.
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

// dropClient forgets the pooled control connections of runtime id's
// containers (they stopped or were replaced).
func (p *Provider) dropClient(id string) {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	for name, c := range p.procs.clients {
		if name == ContainerName(id) || strings.HasPrefix(name, ContainerName(id)+".") {
			c.Close()
			delete(p.procs.clients, name)
		}
	}
}

// dropContainerClient forgets the pooled control connections of one container.
func (p *Provider) dropContainerClient(name string) {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	if c, ok := p.procs.clients[name]; ok {
		c.Close()
		delete(p.procs.clients, name)
	}
}

func (p *Provider) clientFor(r *Runtime, name string) *supervisor.Client {
	p.procs.mu.Lock()
	defer p.procs.mu.Unlock()
	if p.procs.clients == nil {
		p.procs.clients = map[string]*supervisor.Client{}
	}
	c, ok := p.procs.clients[name]
	if !ok {
		c = supervisor.NewDialClient(func(ctx context.Context) (net.Conn, error) { return r.relay(ctx, name) })
		p.procs.clients[name] = c
	}
	return c
}

// processes returns r's sandbox.ProcessRuntime implementation.
func (r *Runtime) processes() *supervisor.Processes {
	ps := &supervisor.Processes{
		Support: sandboxapi.ProcessSupport{Durable: true, PTY: true, MaxProcesses: sandboxapi.MaxProcesses, BufferBytes: sandboxapi.ProcessBufferBytes},
		Client:  r.client,
		Prepare: r.prepare,
		Archive: r.p.archive(r.id),
	}
	if r.spec != nil {
		ps.Networks = sandboxapi.NetworkModes
	}
	return ps
}

// ProcessSupport reports durable, PTY-capable background processes.
func (r *Runtime) ProcessSupport() sandboxapi.ProcessSupport { return r.processes().ProcessSupport() }

// StartProcess starts a background process in the container (see
// sandbox.ProcessRuntime); a stopped container is started first.
func (r *Runtime) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandboxapi.ProcessInfo, error) {
	return r.processes().StartProcess(ctx, spec)
}

// ReadProcess reads a background process's output (sandbox.ProcessRuntime).
func (r *Runtime) ReadProcess(ctx context.Context, id string, req sandbox.ProcessReadRequest) (sandbox.ProcessOutput, error) {
	return r.processes().ReadProcess(ctx, id, req)
}

// WaitProcess waits for a process to end (sandbox.ProcessRuntime).
func (r *Runtime) WaitProcess(ctx context.Context, id string, wait time.Duration) (sandboxapi.ProcessInfo, error) {
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
func (r *Runtime) ListProcesses(ctx context.Context) ([]sandboxapi.ProcessInfo, error) {
	return r.processes().ListProcesses(ctx)
}

// client is supervisor.Processes.Client: the supervisor of the container
// of network mode ("" = the runtime's own), created and started first when
// start.
func (r *Runtime) client(ctx context.Context, start bool, mode sandboxapi.Network) (*supervisor.Client, error) {
	if !start && mode != "" && r.spec == nil {
		return nil, nil // no container of another mode
	}
	if !start && mode != "" && !mode.Within(r.policy()) {
		return nil, nil
	}
	name, err := r.container(ctx, mode, start)
	if err != nil {
		return nil, err
	}
	if start {
		if err := r.start(ctx, name); err != nil {
			return nil, err
		}
	} else {
		st, err := r.containerState(ctx, name)
		if err != nil {
			return nil, err
		}
		switch {
		case st == sandbox.RuntimeMissing && name == r.name:
			return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s does not exist (destroyed?)", r.id)
		case st != sandbox.RuntimeRunning:
			return nil, nil
		}
	}
	return r.p.clientFor(r, name), nil
}

// prepare is supervisor.Processes.Prepare: the container's environment
// plus spec.Env, the cwd inside the workdir, the network asked for.
func (r *Runtime) prepare(spec sandbox.ProcessSpec) (supervisor.Spec, sandboxapi.Network, error) {
	mode := spec.Network
	if policy := r.policy(); policy != "" {
		m, err := procexec.CommandNetwork("process_start", policy, spec.Network)
		if err != nil {
			return supervisor.Spec{}, "", err
		}
		mode = m
	} else if mode != "" {
		return supervisor.Spec{}, "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "runtime %s was built by an earlier version: it runs every process with its own network; recreate it to choose one per process", r.id)
	}
	cwd, err := r.cwd(spec.Cwd)
	if err != nil {
		return supervisor.Spec{}, "", err
	}
	extra := map[string]string{}
	if spec.PTY != nil {
		extra["TERM"] = "xterm-256color"
	}
	s := supervisor.Spec{Argv: spec.Cmd, Env: procexec.EnvList(extra, spec.Env), InheritEnv: true, Dir: cwd, Tag: spec.Tag, OpenStdin: spec.Stdin}
	if spec.PTY != nil {
		s.PTY, s.Rows, s.Cols = true, uint16(spec.PTY.Rows), uint16(spec.PTY.Cols)
	}
	if spec.Exec && spec.ID != "" {
		r.p.notes.Put(r.id+"/"+spec.ID, time.Now())
	}
	return s, mode, nil
}

// ExecNotice is sandbox.ExecNotices: what the network policy refused while
// exec process id ran (as Exec's stderr ends with), when this worker
// started it.
func (r *Runtime) ExecNotice(id string, _ sandboxapi.ProcessInfo) string {
	since, ok := r.p.notes.Get(r.id + "/" + id)
	if !ok || r.p.egress == nil || r.spec == nil {
		return ""
	}
	return r.p.egress.RefusalNotice(r.spec.WorkspaceID, since)
}

// relay opens one control connection to container name's supervisor: a
// `sandbox-supervisor relay` exec there, its stdin and (demultiplexed)
// stdout as the stream.
func (r *Runtime) relay(ctx context.Context, name string) (net.Conn, error) {
	c, err := r.p.execConn(ctx, name, SupervisorPath, "relay", supervisorSocket)
	if err != nil {
		return nil, r.p.mapErr(err, "control connection to %s", name)
	}
	return c, nil
}

// execConn runs cmd in container name with docker exec and returns its
// stdin and (demultiplexed) stdout as one stream; stderr is dropped.
// Closing the stream's write side (CloseWrite) closes the command's stdin.
func (p *Provider) execConn(ctx context.Context, name string, cmd ...string) (net.Conn, error) {
	resp, err := p.cli.ContainerExecCreate(ctx, name, container.ExecOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: cmd,
	})
	if err != nil {
		return nil, err
	}
	hj, err := p.cli.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, err
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
func (c *relayConn) CloseWrite() error           { return c.hj.CloseWrite() }
func (c *relayConn) Close() error {
	c.once.Do(func() { c.hj.Close(); _ = c.r.Close() })
	return nil
}
func (c *relayConn) LocalAddr() net.Addr                { return c.hj.Conn.LocalAddr() }
func (c *relayConn) RemoteAddr() net.Addr               { return c.hj.Conn.RemoteAddr() }
func (c *relayConn) SetDeadline(t time.Time) error      { return c.hj.Conn.SetDeadline(t) }
func (c *relayConn) SetReadDeadline(t time.Time) error  { return c.hj.Conn.SetReadDeadline(t) }
func (c *relayConn) SetWriteDeadline(t time.Time) error { return c.hj.Conn.SetWriteDeadline(t) }

// stopProcesses asks the supervisor of the runtime's running container
// name to end its processes (exit reason runtime_stopped) and archives
// them (unless drop); the supervisor exits, and with it the container.
func (r *Runtime) stopProcesses(ctx context.Context, name string, drop bool) {
	defer r.p.dropContainerClient(name)
	if st, err := r.containerState(ctx, name); err != nil || st != sandbox.RuntimeRunning {
		if drop {
			r.p.archive(r.id).Clear()
		}
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	finals, err := supervisor.NewDialClient(func(ctx context.Context) (net.Conn, error) { return r.relay(ctx, name) }).Shutdown(sctx, 3*time.Second)
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
