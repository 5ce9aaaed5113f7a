package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
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
		return nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "process %s has ended (the runtime was stopped)", clipStr(id))
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
	return sandboxapi.Errorf(sandboxapi.ErrNotFound, "no process %q in this runtime", clipStr(id))
}

func streamIndex(s string) (int, error) {
	switch s {
	case "", sandboxapi.StreamStdout, sandboxapi.StreamPTY:
		return 0, nil
	case sandboxapi.StreamStderr:
		return 1, nil
	}
	return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_read: stream %q: want stdout, stderr or pty", clipStr(s))
}

// ValidateProcessSpec checks spec's backend-independent rules and returns
// an error wrapping sandboxapi.ErrInvalidArgument on the first violation: Cmd,
// Cwd and Env as in an ExecRequest (runspec.ValidateCmd, runspec.ValidateEnv), Tag at most sandboxapi.MaxProcessTagBytes
// of valid text without control characters, a terminal size within
// 1..sandbox.MaxTerminalSize, an ID matching IDPattern, Timeout within
// 0..sandbox.MaxExecTimeout, HeadBytes within 0..sandbox.MaxProcessHeadBytes,
// StdinData at most sandboxapi.MaxStdinBytes and not with a PTY.
func ValidateProcessSpec(spec sandbox.ProcessSpec) error {
	bad := func(format string, args ...any) error {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_start: "+format, args...)
	}
	if spec.ID != "" && !IDPattern.MatchString(spec.ID) {
		return bad("id %q: want %s", clipStr(spec.ID), IDPattern)
	}
	if spec.Timeout < 0 || spec.Timeout > sandboxapi.MaxExecTimeout {
		return bad("timeout %v is outside 0..%v", spec.Timeout, sandboxapi.MaxExecTimeout)
	}
	if spec.HeadBytes < 0 || spec.HeadBytes > sandbox.MaxProcessHeadBytes {
		return bad("head bytes %d is outside 0..%d", spec.HeadBytes, sandbox.MaxProcessHeadBytes)
	}
	if len(spec.StdinData) > sandboxapi.MaxStdinBytes || (spec.StdinData != nil && spec.PTY != nil) {
		return bad("stdin data: at most %d bytes, and not for a terminal", sandboxapi.MaxStdinBytes)
	}
	if err := runspec.ValidateCmd("process_start", spec.Cmd); err != nil {
		return err
	}
	if _, err := sandboxapi.CleanRelPath(spec.Cwd); err != nil {
		return bad("cwd: %s", sandboxapi.Message(err))
	}
	if err := runspec.ValidateEnv(spec.Env); err != nil {
		return bad("%s", sandboxapi.Message(err))
	}
	if len(spec.Tag) > sandboxapi.MaxProcessTagBytes || strings.ContainsFunc(spec.Tag, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
		return bad("tag must be at most %d bytes of text without control characters", sandboxapi.MaxProcessTagBytes)
	}
	if t := spec.PTY; t != nil && (t.Rows < 1 || t.Cols < 1 || t.Rows > sandboxapi.MaxTerminalSize || t.Cols > sandboxapi.MaxTerminalSize) {
		return bad("pty %d×%d is outside 1..%d", t.Rows, t.Cols, sandboxapi.MaxTerminalSize)
	}
	return nil
}

// SignalByName maps a name of sandboxapi.ProcessSignals (with or without
// "SIG", any case) to its signal; others are sandboxapi.ErrInvalidArgument.
func SignalByName(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	sigs := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "WINCH": syscall.SIGWINCH}
	if s, ok := sigs[n]; ok {
		return s, nil
	}
	return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "process_signal: signal %q: want one of %s", clipStr(name), strings.Join(sandboxapi.ProcessSignals, ", "))
}

// ToInfo maps a supervisor Info onto sandboxapi.ProcessInfo.
func ToInfo(i Info) sandboxapi.ProcessInfo {
	out := sandboxapi.ProcessInfo{
		ID: i.ID, Tag: i.Tag, Cmd: i.Argv, PTY: i.PTY, StartedAt: time.UnixMilli(i.StartedMS).UTC(),
		Exited: i.Exited, ExitCode: i.ExitCode, Lingering: i.TreeRunning,
		StdoutBytes: i.Totals[0], StderrBytes: i.Totals[1],
	}
	if i.Exited {
		out.EndedAt = time.UnixMilli(i.EndedMS).UTC()
		switch i.Reason {
		case ReasonExited:
			out.ExitReason = sandboxapi.ExitReasonExited
		case ReasonSignaled:
			out.ExitReason = sandboxapi.ExitReasonSignaled
		case ReasonTimeout:
			out.ExitReason = sandboxapi.ExitReasonTimeout
		case ReasonCanceled:
			out.ExitReason = sandboxapi.ExitReasonCancelled
		case ReasonStopped:
			out.ExitReason = sandboxapi.ExitReasonRuntimeStopped
		case ReasonStartErr:
			out.ExitReason = sandboxapi.ExitReasonStartFailed
		default:
			out.ExitReason = sandboxapi.ExitReasonLost
		}
	}
	return out
}

// MapError maps a supervisor error onto the sandbox kinds (nil stays nil).
func MapError(err error, op string) error {
	if err == nil {
		return nil
	}
	var pe *Error
	switch {
	case errors.As(err, &pe):
		kind := sandboxapi.ErrRuntimeUnavailable
		switch pe.Kind {
		case ErrInvalid:
			kind = sandboxapi.ErrInvalidArgument
		case ErrNotFound:
			kind = sandboxapi.ErrNotFound
		case ErrLimit:
			kind = sandboxapi.ErrResourceLimit
		case ErrState:
			kind = sandboxapi.ErrCommandRejected
		}
		return sandboxapi.Errorf(kind, "%s: %s", op, pe.Msg)
	case errors.Is(err, context.DeadlineExceeded):
		return sandboxapi.Wrap(sandboxapi.ErrTimeout, err, "%s", op)
	}
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s: the runtime's supervisor", op)
}

// Archive keeps the background processes of stopped supervisors (their
// last Info and buffered output) so they stay readable, in memory and in a
// file that a restarted worker loads. It is safe for concurrent use; a nil
// *Archive is empty.
type Archive struct {
	path  string
	mu    sync.Mutex
	procs map[string]Final
	order []string
}

// LoadArchive returns the archive kept at path (empty when missing or
// unreadable).
func LoadArchive(path string) *Archive {
	a := &Archive{path: path, procs: map[string]Final{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return a
	}
	var fs []Final
	if json.Unmarshal(b, &fs) == nil {
		a.add(fs)
	}
	return a
}

func (a *Archive) add(fs []Final) {
	for _, f := range fs {
		if _, ok := a.procs[f.Info.ID]; !ok {
			a.order = append(a.order, f.Info.ID)
		}
		a.procs[f.Info.ID] = f
	}
	// The newest KeptExited background and KeptExec exec processes stay.
	var bg, ex int
	// A new slice: filling a.order[:0] while reading a.order backwards
	// overwrote ids not read yet (one process listed twice, another lost).
	keep := make([]string, 0, len(a.order))
	for i := len(a.order) - 1; i >= 0; i-- {
		id := a.order[i]
		n := &bg
		limit := KeptExited
		if a.procs[id].Info.Exec {
			n, limit = &ex, KeptExec
		}
		if *n < limit {
			*n++
			keep = append(keep, id)
		} else {
			delete(a.procs, id)
		}
	}
	slices.Reverse(keep)
	a.order = keep
}

// Add records fs and writes the archive file (0600).
func (a *Archive) Add(fs []Final) error {
	if a == nil || len(fs) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.add(fs)
	all := make([]Final, 0, len(a.order))
	for _, id := range a.order {
		all = append(all, a.procs[id])
	}
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.path)
}

// Clear forgets everything and removes the file.
func (a *Archive) Clear() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.procs, a.order = map[string]Final{}, nil
	_ = os.Remove(a.path)
}

// Read serves a read of an archived process; false when id is not archived.
func (a *Archive) Read(id string, idx int, off int64, max int) (sandbox.ProcessOutput, bool) {
	if a == nil {
		return sandbox.ProcessOutput{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.procs[id]
	if !ok {
		return sandbox.ProcessOutput{}, false
	}
	start, data, head := f.Starts[idx], f.Data[idx], f.Heads[idx]
	end := start + int64(len(data))
	out := sandbox.ProcessOutput{Offset: off, Process: ToInfo(f.Info)}
	if off < start && off < int64(len(head)) {
		n := min(int64(max), int64(len(head))-off)
		out.Data = slices.Clone(head[off : off+n])
		out.NextOffset = off + n
		return out, true
	}
	if off < start {
		out.DroppedBytes, out.Offset = start-off, start
	}
	out.Offset = min(out.Offset, end)
	n := min(int64(max), end-out.Offset)
	out.Data = slices.Clone(data[out.Offset-start : out.Offset-start+n])
	out.NextOffset = out.Offset + n
	out.EOF = out.NextOffset == end
	return out, true
}

// List returns the archived processes, oldest first.
func (a *Archive) List() []sandboxapi.ProcessInfo {
	out := []sandboxapi.ProcessInfo{}
	if a == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range a.order {
		if f := a.procs[id]; !f.Info.Exec {
			out = append(out, ToInfo(f.Info))
		}
	}
	return out
}

// clipStr bounds a string a caller gave, quoted in an error (package
// daemon clips the supervisor's messages alike).
func clipStr(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
