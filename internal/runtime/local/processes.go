package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// hostSupervisor is a runtime's supervisor of background processes: a host
// process outside the worker's process tree (its own session, no
// parent-death signal), started on the first StartProcess.
type hostSupervisor struct {
	client *supervisor.Client
	done   chan struct{} // nil when reattached (started by an earlier worker)
}

func (h *hostSupervisor) alive() bool {
	if h == nil {
		return false
	}
	if h.done == nil {
		return true
	}
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// procState is the background-process part of a Runtime.
type procState struct {
	mu      sync.Mutex
	sv      *hostSupervisor
	archive *supervisor.Archive
}

func (p *Provider) statePath(id, suffix string) string { return filepath.Join(p.stateDir, id+suffix) }

// stateDirFor is Options.StateDir or its default.
func stateDirFor(dir string) string {
	if dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "sandboxcore-local-"+strconv.Itoa(os.Getuid()))
}

func (r *Runtime) initProcesses() {
	r.ps.archive = supervisor.LoadArchive(r.p.statePath(r.ID(), ".archive"))
	r.Processes = supervisor.Processes{
		Support: sandboxapi.ProcessSupport{Durable: true, PTY: true, MaxProcesses: sandboxapi.MaxProcesses, BufferBytes: sandboxapi.ProcessBufferBytes},
		Client:  r.client,
		Prepare: r.prepare,
		Archive: r.ps.archive,
	}
	// Reattach to the supervisor an earlier worker left running.
	sock := r.p.statePath(r.ID(), ".sock")
	if _, err := os.Lstat(sock); err == nil {
		c := supervisor.NewClient(sock)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if h, err := c.Hello(ctx); err == nil && h.Runtime == r.ID() && h.Version == supervisor.Version {
			r.ps.sv = &hostSupervisor{client: c}
			r.p.log.Info("reattached to a runtime's background processes", "id", r.ID())
		} else {
			_ = os.Remove(sock)
		}
	}
}

// client is supervisor.Processes.Client.
func (r *Runtime) client(ctx context.Context, start bool, _ sandboxapi.Network) (*supervisor.Client, error) {
	if start {
		if err := r.life.Start(r.ready); err != nil {
			return nil, err
		}
	} else if r.life.State() == sandbox.RuntimeMissing {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s was destroyed", r.ID())
	}
	r.ps.mu.Lock()
	defer r.ps.mu.Unlock()
	if r.ps.sv.alive() {
		return r.ps.sv.client, nil
	}
	if !start {
		return nil, nil
	}
	bin, err := supervisor.Find(r.p.supervisor)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "local runtime %s: background processes need the runtime supervisor: %v", r.ID(), err)
	}
	if err := os.MkdirAll(r.p.stateDir, 0o700); err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "local runtime %s: state directory: %v", r.ID(), err)
	}
	l, err := supervisor.Launch(ctx, bin, r.p.statePath(r.ID(), ".sock"), r.p.statePath(r.ID(), ".log"), r.ID(), "local")
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "local runtime %s: start the supervisor: %v", r.ID(), err)
	}
	r.ps.sv = &hostSupervisor{client: l.Client, done: l.Done}
	return l.Client, nil
}

// prepare is supervisor.Processes.Prepare: a background process gets a
// command's environment and cwd (its network is checked against the
// runtime's, though not enforced: the local runtime has one supervisor).
func (r *Runtime) prepare(spec sandbox.ProcessSpec) (supervisor.Spec, sandboxapi.Network, error) {
	if _, err := procexec.CommandNetwork("process_start", procexec.RuntimeNetwork(r.life.Spec()), spec.Network); err != nil {
		return supervisor.Spec{}, "", err
	}
	root := r.life.Root()
	dir, _, err := procexec.ResolveCwd(root, spec.Cwd)
	if err != nil {
		return supervisor.Spec{}, "", err
	}
	extra := map[string]string{}
	if spec.PTY != nil {
		extra["TERM"] = "xterm-256color"
	}
	s := supervisor.Spec{
		Argv: spec.Cmd, Env: procexec.EnvList(procexec.BaseEnv(root), r.p.baseEnv, r.life.Spec().Env, extra, spec.Env),
		Dir: dir, Tag: spec.Tag, OpenStdin: spec.Stdin,
	}
	if spec.PTY != nil {
		s.PTY, s.Rows, s.Cols = true, uint16(spec.PTY.Rows), uint16(spec.PTY.Cols)
	}
	return s, "", nil
}

// stopProcesses ends the supervisor (its processes end with exit reason
// runtime_stopped), archiving them unless drop.
func (r *Runtime) stopProcesses(ctx context.Context, drop bool) {
	r.ps.mu.Lock()
	defer r.ps.mu.Unlock()
	if r.ps.sv != nil {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		finals, err := r.ps.sv.client.Shutdown(sctx, 5*time.Second)
		cancel()
		if err != nil && !supervisor.IsUnreachable(err) && !errors.Is(err, io.EOF) {
			r.p.log.Warn("runtime supervisor did not shut down", "id", r.ID(), "error", err)
		}
		if !drop {
			if err := r.ps.archive.Add(finals); err != nil {
				r.p.log.Warn("runtime process archive not written", "id", r.ID(), "error", err)
			}
		}
		if r.ps.sv.done != nil {
			select {
			case <-r.ps.sv.done:
			case <-time.After(5 * time.Second):
			}
		}
		r.ps.sv = nil
	}
	_ = os.Remove(r.p.statePath(r.ID(), ".sock"))
	if drop {
		r.ps.archive.Clear()
		_ = os.Remove(r.p.statePath(r.ID(), ".log"))
	}
}
