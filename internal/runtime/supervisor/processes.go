package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Processes implements sandbox.ProcessRuntime over a runtime's
// supervisors, for the backends that run them (bubblewrap, local, Docker);
// the backend supplies the hooks. A backend with one supervisor per network
// mode (docs/SECURITY.md "Network modes") gives each the id prefix
// IDPrefix(mode), so that a process id names its supervisor. Processes of a
// supervisor that was shut down (Stop) are served from Archive afterwards.
type Processes struct {
	// Support is what ProcessSupport reports.
	Support sandboxapi.ProcessSupport
	// Client returns the runtime's supervisor client for processes of
	// network ("" for a backend with one supervisor). With start it starts
	// the runtime (and that supervisor) when needed (StartProcess); without,
	// it returns (nil, nil) when it does not run. Its errors are returned as
	// they are.
	Client func(ctx context.Context, start bool, network sandboxapi.Network) (*Client, error)
	// Prepare maps a validated spec onto the supervisor's (environment
	// layered on the runtime's, cwd resolved inside the workdir) and names
	// the network whose supervisor runs it; its errors are returned as they
	// are (ErrCommandRejected for a network above the runtime's).
	Prepare func(spec sandbox.ProcessSpec) (Spec, sandboxapi.Network, error)
	// Networks are the supervisors ListProcesses asks, in order; nil: one ("").
	Networks []sandboxapi.Network
	// Archive holds the processes of stopped supervisors.
	Archive *Archive

	// startMu makes a background start's count of live processes across
	// the supervisors and the start itself one step.
	startMu sync.Mutex
}

// IDPrefix is the prefix of the process ids of the supervisor of network
// ("proc-" for a backend with one supervisor): `serve --id-prefix`.
func IDPrefix(network sandboxapi.Network) string {
	if network == "" {
		return "proc-"
	}
	return "proc-" + string(network) + "-"
}

// NetworkOfID returns the network whose supervisor gave process id (""
// when the id names none).
func NetworkOfID(id string) sandboxapi.Network {
	for _, n := range sandboxapi.NetworkModes {
		if strings.HasPrefix(id, IDPrefix(n)) {
			return n
		}
	}
	return ""
}

var _ sandbox.ProcessRuntime = (*Processes)(nil)

// ProcessSupport returns p.Support.
func (p *Processes) ProcessSupport() sandboxapi.ProcessSupport { return p.Support }

// StartProcess validates spec (ValidateProcessSpec), then starts it; a
// spec.ID that names an archived process returns that one.
func (p *Processes) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandboxapi.ProcessInfo, error) {
	if err := ValidateProcessSpec(spec); err != nil {
		return sandboxapi.ProcessInfo{}, err
	}
	if spec.ID != "" {
		if out, ok := p.Archive.Read(spec.ID, 0, 0, 0); ok {
			return out.Process, nil
		}
	}
	s, network, err := p.Prepare(spec)
	if err != nil {
		return sandboxapi.ProcessInfo{}, err
	}
	s.ID, s.Exec, s.HeadBytes, s.Lossless = spec.ID, spec.Exec, spec.HeadBytes, spec.Lossless
	s.TimeoutMS = spec.Timeout.Milliseconds()
	if spec.StdinData != nil {
		s.Stdin = spec.StdinData
	}
	if !spec.Exec && len(p.Networks) > 1 {
		// Each supervisor caps its own; the runtime's cap is over all of
		// them (one per network mode), counted and started as one step.
		p.startMu.Lock()
		defer p.startMu.Unlock()
		if err := p.admit(ctx); err != nil {
			return sandboxapi.ProcessInfo{}, err
		}
	}
	c, err := p.Client(ctx, true, network)
	if err != nil {
		return sandboxapi.ProcessInfo{}, err
	}
	info, _, err := c.Start(ctx, s)
	if err != nil {
		return sandboxapi.ProcessInfo{}, MapError(err, "process_start")
	}
	return ToInfo(info), nil
}

// admit counts the background processes with a live tree across every
// network's supervisor: at Support.MaxProcesses a new one is
// sandboxapi.ErrResourceLimit, whichever network it asks for.
func (p *Processes) admit(ctx context.Context) error {
	live := 0
	for _, n := range p.Networks {
		c, err := p.Client(ctx, false, n)
		if err != nil {
			return err
		}
		if c == nil {
			continue
		}
		list, err := c.List(ctx)
		if err != nil {
			return MapError(err, "process_start")
		}
		for _, i := range list {
			if !i.Exec && (!i.Exited || i.TreeRunning) {
				live++
			}
		}
	}
	if live >= p.Support.MaxProcesses {
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "process_start: %d background processes are running in this workspace's runtime (all its networks together), the most it may have", p.Support.MaxProcesses)
	}
	return nil
}

// ReadProcess reads one stream of process id, or both (req.Both).
func (p *Processes) ReadProcess(ctx context.Context, id string, req sandbox.ProcessReadRequest) (sandbox.ProcessOutput, error) {
	idx, err := streamIndex(req.Stream)
	if err != nil {
		return sandbox.ProcessOutput{}, err
	}
	if req.Offset < 0 || (req.Both && req.StderrOffset < 0) {
		return sandbox.ProcessOutput{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: offset %d is negative", min(req.Offset, req.StderrOffset))
	}
	if req.Both && idx != 0 {
		return sandbox.ProcessOutput{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: stderr_offset goes with stream stdout")
	}
	if req.MaxBytes < 0 || req.MaxBytes > sandboxapi.MaxProcessReadBytes {
		return sandbox.ProcessOutput{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: max_bytes %d is outside 0..%d", req.MaxBytes, sandboxapi.MaxProcessReadBytes)
	}
	if req.Wait < 0 || req.Wait > sandboxapi.MaxProcessReadWait {
		return sandbox.ProcessOutput{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: wait %v is outside 0..%v", req.Wait, sandboxapi.MaxProcessReadWait)
	}
	max := req.MaxBytes
	if max == 0 {
		max = sandboxapi.DefaultProcessReadBytes
	}
	if out, ok := p.archived(id, idx, req, max); ok {
		return out, nil
	}
	c, err := p.clientOf(ctx, id)
	if err != nil {
		return sandbox.ProcessOutput{}, err
	}
	if c == nil {
		return sandbox.ProcessOutput{}, notFound(id)
	}
	var offs [2]int64
	offs[idx], offs[1-idx] = req.Offset, NoStream
	if req.Both {
		offs[1] = req.StderrOffset
	}
	total := 0
	if req.Both {
		total = max // one read fits one payload
	}
	r, err := c.ReadTotal(ctx, id, offs, max, total, req.Wait, req.Peek)
	if err != nil {
		if out, ok := p.archived(id, idx, req, max); ok { // stopped meanwhile
			return out, nil
		}
		return sandbox.ProcessOutput{}, MapError(err, "process_read")
	}
	ch := r.Chunks[idx]
	out := sandbox.ProcessOutput{
		Data: r.Data[idx], Offset: ch.Offset, NextOffset: ch.Offset + int64(ch.Len), DroppedBytes: ch.Dropped,
		EOF: ch.EOF, Process: ToInfo(r.Info),
	}
	if req.Both {
		e := r.Chunks[1]
		out.Stderr = &sandboxapi.ProcessChunk{Data: r.Data[1], Offset: e.Offset, NextOffset: e.Offset + int64(e.Len), DroppedBytes: e.Dropped, EOF: e.EOF}
	}
	return out, nil
}

// archived serves a read of an archived process (both streams for a Both read).
func (p *Processes) archived(id string, idx int, req sandbox.ProcessReadRequest, max int) (sandbox.ProcessOutput, bool) {
	out, ok := p.Archive.Read(id, idx, req.Offset, max)
	if ok && req.Both {
		e, _ := p.Archive.Read(id, 1, req.StderrOffset, max-len(out.Data))
		out.Stderr = &sandboxapi.ProcessChunk{Data: e.Data, Offset: e.Offset, NextOffset: e.NextOffset, DroppedBytes: e.DroppedBytes, EOF: e.EOF}
	}
	return out, ok
}

// WaitProcess waits for process id to end (sandbox.ProcessRuntime).
func (p *Processes) WaitProcess(ctx context.Context, id string, wait time.Duration) (sandboxapi.ProcessInfo, error) {
	if wait < 0 || wait > sandboxapi.MaxProcessReadWait {
		return sandboxapi.ProcessInfo{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process wait %v is outside 0..%v", wait, sandboxapi.MaxProcessReadWait)
	}
	if out, ok := p.Archive.Read(id, 0, 0, 0); ok {
		return out.Process, nil
	}
	c, err := p.clientOf(ctx, id)
	if err != nil {
		return sandboxapi.ProcessInfo{}, err
	}
	if c == nil {
		return sandboxapi.ProcessInfo{}, notFound(id)
	}
	info, err := c.Wait(ctx, id, wait)
	if err != nil {
		if out, ok := p.Archive.Read(id, 0, 0, 0); ok { // stopped meanwhile
			return out.Process, nil
		}
		return sandboxapi.ProcessInfo{}, MapError(err, "process wait")
	}
	return ToInfo(info), nil
}

// CancelProcess kills process id's tree as cancelled (sandbox.ProcessRuntime).
func (p *Processes) CancelProcess(ctx context.Context, id string) error {
	if _, ok := p.Archive.Read(id, 0, 0, 0); ok {
		return nil // ended with the runtime's stop
	}
	c, err := p.clientOf(ctx, id)
	if err != nil {
		return err
	}
	if c == nil {
		return notFound(id)
	}
	return MapError(c.Cancel(ctx, id), "cancel")
}

// WriteProcess writes to process id's stdin.
func (p *Processes) WriteProcess(ctx context.Context, id string, data []byte, closeStdin bool) (int, error) {
	if len(data) > sandboxapi.MaxProcessWriteBytes {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_write: %d bytes, more than %d", len(data), sandboxapi.MaxStdinBytes)
	}
	c, err := p.live(ctx, id)
	if err != nil {
		return 0, err
	}
	n, err := c.Write(ctx, id, data, closeStdin)
	return n, MapError(err, "process_write")
}

// SignalProcess signals process id.
func (p *Processes) SignalProcess(ctx context.Context, id string, signal string) error {
	sig, err := SignalByName(signal)
	if err != nil {
		return err
	}
	c, err := p.live(ctx, id)
	if err != nil {
		return err
	}
	return MapError(c.Signal(ctx, id, sig), "process_signal")
}

// ResizeProcess resizes process id's terminal.
func (p *Processes) ResizeProcess(ctx context.Context, id string, rows, cols int) error {
	if rows < 1 || cols < 1 || rows > sandboxapi.MaxTerminalSize || cols > sandboxapi.MaxTerminalSize {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_resize: %d×%d is outside 1..%d", rows, cols, sandboxapi.MaxTerminalSize)
	}
	c, err := p.live(ctx, id)
	if err != nil {
		return err
	}
	return MapError(c.Resize(ctx, id, uint16(rows), uint16(cols)), "process_resize")
}

// ListProcesses lists the archived processes, then each live supervisor's
// (Networks order).
func (p *Processes) ListProcesses(ctx context.Context) ([]sandboxapi.ProcessInfo, error) {
	out := p.Archive.List()
	networks := p.Networks
	if networks == nil {
		networks = []sandboxapi.Network{""}
	}
	for _, n := range networks {
		c, err := p.Client(ctx, false, n)
		if err != nil {
			return out, err
		}
		if c == nil {
			continue
		}
		list, err := c.List(ctx)
		if err != nil {
			return nil, MapError(err, "process_list")
		}
		for _, i := range list {
			out = append(out, ToInfo(i))
		}
	}
	return out, nil
}

// live returns the client of a running supervisor for an operation on a
// live process; an archived one has ended (ErrCommandRejected).
func (p *Processes) live(ctx context.Context, id string) (*Client, error) {
	if _, ok := p.Archive.Read(id, 0, 0, 0); ok {
		return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "process %s has ended (the runtime was stopped)", sandboxapi.Clip(id, 64))
	}
	c, err := p.clientOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, notFound(id)
	}
	return c, nil
}

// clientOf returns the client of the running supervisor that holds process
// id, (nil, nil) when none runs. An id the supervisor gave names its
// network (IDPrefix); an id the caller chose (ProcessSpec.ID, an exec's
// command) names none, so each running supervisor is asked in Networks
// order, the runtime's own first; when none holds it, the runtime's own is
// returned and its not-found is what the caller reports.
func (p *Processes) clientOf(ctx context.Context, id string) (*Client, error) {
	n := NetworkOfID(id)
	own, err := p.Client(ctx, false, n)
	if err != nil || n != "" || len(p.Networks) < 2 {
		return own, err
	}
	if own != nil {
		if _, err := own.Wait(ctx, id, 0); err == nil {
			return own, nil
		} else if !isNotFound(err) {
			return nil, MapError(err, "process lookup")
		}
	}
	for _, net := range p.Networks {
		c, err := p.Client(ctx, false, net)
		if err != nil {
			return nil, err
		}
		if c == nil || c == own {
			continue
		}
		if _, err := c.Wait(ctx, id, 0); err == nil {
			return c, nil
		} else if !isNotFound(err) {
			return nil, MapError(err, "process lookup")
		}
	}
	return own, nil
}

// isNotFound: the supervisor holds no such process.
func isNotFound(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Kind == ErrNotFound
}

func notFound(id string) error {
	return sandboxapi.Errorf(sandboxapi.ErrNotFound, "no process %q in this runtime", sandboxapi.Clip(id, 64))
}

func streamIndex(s string) (int, error) {
	switch s {
	case "", sandboxapi.StreamStdout, sandboxapi.StreamPTY:
		return 0, nil
	case sandboxapi.StreamStderr:
		return 1, nil
	}
	return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: stream %q: want stdout, stderr or pty", sandboxapi.Clip(s, 64))
}
