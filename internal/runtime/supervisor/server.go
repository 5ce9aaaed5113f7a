package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Defaults of `sandbox-supervisor serve`.
const (
	// DefaultBufferBytes is a background process's buffer per stream.
	DefaultBufferBytes = 1 << 20
	// DefaultMaxProcesses bounds background processes whose tree still runs.
	DefaultMaxProcesses = 64
	// foregroundWindow is how much unread output a foreground process may
	// have per stream before it waits for its reader.
	foregroundWindow = 256 << 10
	// keptExited is how many ended background processes stay listed.
	keptExited = 64
	// keptExec is how many ended exec processes (Spec.Exec) stay readable.
	keptExec = 16
	// drainGrace bounds the wait for output pipes once a tree has ended
	// (a descriptor passed to an unrelated process may hold them).
	drainGrace = 500 * time.Millisecond
	// idleShims is how many free shims are kept ready.
	idleShims = 2
	// maxReadWait bounds a read's wait.
	maxReadWait = 30 * time.Second
)

// server is `sandbox-supervisor serve`: the supervisor of one runtime.
type server struct {
	exe       string // re-executed as "shim"
	runtime   string
	layout    string
	bufBytes  int
	maxProcs  int
	pid1      bool
	startedMS int64
	inherit   []string   // the supervisor's own environment (InheritEnv)
	cgMode    string     // "", "v1" or "v2": how shims place commands in their cgroup
	cgFiles   []*os.File // its descriptors, handed to shims as 4 (and 5)
	idPrefix  string     // of the process ids (Info.ID)

	mu       sync.Mutex
	procs    map[string]*proc
	order    []string // background ids by start
	idle     []*shimHandle
	shims    map[int]*shimHandle // live shims by pid
	stopping bool
	conns    int       // open control connections
	lastUse  time.Time // when the last connection closed

	spawnMu sync.Mutex // shim creation vs. the orphan sweep
	idMu    sync.Mutex // starts naming their process (Spec.ID), one at a time
}

// proc is one process and its buffers; guarded by server.mu.
type proc struct {
	info     Info
	fg       bool
	bufs     [2]*ring
	open     [2]bool  // stream still open
	acked    [2]int64 // foreground and lossless: consumed up to here
	lossless bool
	lastRead time.Time // lossless: the last read that acknowledged
	changed  chan struct{}
	shim     *shimHandle
	stdin    *os.File // pipe write end or PTY master (nil: closed)
	master   *os.File // PTY master
	readers  [2]*os.File
	treeDone bool
	killed   string // reason of a kill in progress
	timer    *time.Timer
}

func (p *proc) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func serveMain(args []string) int {
	o, err := parseServe(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-supervisor serve:", err)
		return 2
	}
	// Nothing in the sandbox may attach to the supervisor or take its
	// descriptors (the control socket) through /proc.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	setName("sandbox-supervisor")
	s := &server{
		exe: "/proc/self/exe", runtime: o.runtime, layout: o.layout, bufBytes: max(o.buffer, 4096), maxProcs: max(o.maxProcs, 1),
		pid1: os.Getpid() == 1, startedMS: time.Now().UnixMilli(),
		procs: map[string]*proc{}, shims: map[int]*shimHandle{}, idPrefix: o.idPrefix,
		inherit: slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }),
	}
	if o.cgMode == "v1" || o.cgMode == "v2" {
		s.cgMode = o.cgMode
		for _, fd := range o.cgFDs {
			syscall.CloseOnExec(fd)
			s.cgFiles = append(s.cgFiles, os.NewFile(uintptr(fd), "cgroup"))
		}
	}
	if !s.pid1 {
		// Outside a pid namespace (the local runtime): orphans of a killed
		// shim still come here.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	if exe, err := os.Executable(); err == nil && !s.pid1 {
		s.exe = exe
	}
	ln, err := o.listen()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-supervisor serve: control socket:", err)
		return 1
	}
	if o.egressSocket != "" {
		eln, err := net.Listen("tcp", EgressListen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-supervisor serve: egress forwarder:", err)
			return 1
		}
		go ForwardEgress(eln, o.egressSocket)
	}
	reap := make(chan struct{}, 1)
	ignoreSignals(func() {
		select {
		case reap <- struct{}{}:
		default:
		}
	})
	go s.reaper(reap)
	s.mu.Lock()
	s.lastUse = time.Now()
	s.refillLocked()
	s.mu.Unlock()
	if o.idleExit > 0 {
		go s.exitWhenIdle(o.idleExit)
	}
	return s.accept(ln)
}

// serveOptions are the flags of `sandbox-supervisor serve`.
type serveOptions struct {
	ctlFD                  int    // inherited listening control socket, -1 for none
	abstract               string // abstract unix socket to listen on instead (Docker)
	runtime, layout        string
	buffer, maxProcs       int
	idleExit               time.Duration
	cgMode                 string // "v1", "v2" or "" (no cgroup)
	cgFDs                  []int  // --cgroup-fds, parsed when cgMode is v1 or v2
	egressSocket, idPrefix string
}

// parseServe parses serve's flags: exactly one of --ctl-fd and
// --listen-abstract, and with --cgroup v1 or v2 a comma-separated list of
// descriptors in --cgroup-fds. The error says what is wrong (exit 2).
func parseServe(args []string) (serveOptions, error) {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.IntVar(&o.ctlFD, "ctl-fd", -1, "inherited listening control socket")
	fs.StringVar(&o.abstract, "listen-abstract", "", "listen on this abstract unix socket instead (Docker)")
	fs.StringVar(&o.runtime, "runtime", "", "runtime id")
	fs.StringVar(&o.layout, "layout", "", "sandbox layout hash")
	fs.IntVar(&o.buffer, "buffer", DefaultBufferBytes, "background buffer bytes per stream")
	fs.IntVar(&o.maxProcs, "max-procs", DefaultMaxProcesses, "background processes at most")
	fs.DurationVar(&o.idleExit, "idle-exit", 0, "exit after this long with no process, no record and no connection (0: never)")
	fs.StringVar(&o.cgMode, "cgroup", "", "v2: --cgroup-fds is the commands' cgroup directory; v1: its tasks file and the supervisor's")
	cgFDs := fs.String("cgroup-fds", "", "inherited descriptors for --cgroup (comma-separated)")
	fs.StringVar(&o.egressSocket, "egress-socket", "", "relay connections to "+EgressListen+" to this unix socket (the worker's egress proxy)")
	fs.StringVar(&o.idPrefix, "id-prefix", "proc-", "prefix of the process ids this supervisor gives")
	if err := fs.Parse(args); err != nil || (o.ctlFD < 0) == (o.abstract == "") {
		return o, errors.New("one of --ctl-fd or --listen-abstract is required")
	}
	if o.cgMode == "v1" || o.cgMode == "v2" {
		for _, f := range strings.Split(*cgFDs, ",") {
			fd, err := strconv.Atoi(f)
			if err != nil {
				return o, fmt.Errorf("--cgroup-fds: %v", err)
			}
			o.cgFDs = append(o.cgFDs, fd)
		}
	}
	return o, nil
}

// listen returns the control socket's listener: the abstract socket, or
// the inherited descriptor (closed here once the listener holds its copy).
func (o serveOptions) listen() (net.Listener, error) {
	if o.abstract != "" {
		return net.Listen("unix", "@"+o.abstract)
	}
	f := os.NewFile(uintptr(o.ctlFD), "control")
	ln, err := net.FileListener(f)
	_ = f.Close()
	return ln, err
}

// accept serves every connection of ln until it is closed (exit 0);
// another accept error is retried after 10 ms.
func (s *server) accept(ln net.Listener) int {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return 0
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go s.serveConn(c)
	}
}

// reaper reaps every exited child of the supervisor (shims, and orphans of
// a shim killed from inside the sandbox) and then kills whatever such
// orphans left: nothing runs untracked.
func (s *server) reaper(wake <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-wake:
		case <-t.C:
		}
		lost := false
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
			s.mu.Lock()
			if _, ok := s.shims[p]; ok {
				delete(s.shims, p)
				lost = true
			}
			s.mu.Unlock()
		}
		if lost {
			s.sweepOrphans()
		}
	}
}

// sweepOrphans kills every child of the supervisor that is not a shim, and
// its descendants (they belonged to a shim that was killed).
func (s *server) sweepOrphans() {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	self := os.Getpid()
	parents := procParents()
	s.mu.Lock()
	shims := make(map[int]bool, len(s.shims))
	for p := range s.shims {
		shims[p] = true
	}
	s.mu.Unlock()
	for p, pp := range parents {
		if pp != self || shims[p] {
			continue
		}
		for _, d := range descendants(parents, p) {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// exitWhenIdle ends the supervisor (and so a sandbox whose init it is)
// once it has held no process, no record of one and no connection for
// idle: a sandbox whose worker never came back does not stay forever, and
// nothing is lost (the next command builds a new one).
func (s *server) exitWhenIdle(idle time.Duration) {
	for {
		time.Sleep(min(idle/4, 30*time.Second))
		s.mu.Lock()
		quiet := len(s.procs) == 0 && s.conns == 0 && time.Since(s.lastUse) >= idle
		s.mu.Unlock()
		if quiet {
			fmt.Fprintln(os.Stderr, "sandbox-supervisor: idle for", idle, "- exiting")
			os.Exit(0)
		}
	}
}

// serveConn answers the requests of one control connection in order. The
// foreground processes it started are killed when it closes.
func (s *server) serveConn(c net.Conn) {
	var owned []*proc
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.conns--
		s.lastUse = time.Now()
		s.mu.Unlock()
		_ = c.Close()
		for _, p := range owned {
			s.mu.Lock()
			if !p.info.Exited || !p.treeDone {
				s.killLocked(p, ReasonCanceled)
			}
			s.mu.Unlock()
			go s.forgetWhenDone(p)
		}
	}()
	type frame struct {
		req     Request
		payload []byte
	}
	frames := make(chan frame)
	gone := make(chan struct{}) // the client closed the connection
	go func() {
		defer close(gone)
		for {
			var req Request
			payload, err := readFrame(c, &req)
			if err != nil {
				return
			}
			select {
			case frames <- frame{req, payload}:
			case <-gone:
				return
			}
		}
	}()
	for {
		var f frame
		select {
		case f = <-frames:
		case <-gone:
			return
		}
		resp, out, p := s.handle(f.req, f.payload, gone)
		if p != nil {
			owned = append(owned, p)
		}
		werr := writeFrame(c, resp, out)
		if werr != nil && f.req.Op != "shutdown" {
			return
		}
		if f.req.Op == "shutdown" && resp.Error == nil {
			// Exit once the client has the answer (it closes the
			// connection): a relay in between must get it out first.
			select {
			case <-gone:
			case <-time.After(2 * time.Second):
			}
			os.Exit(0)
		}
	}
}

func (s *server) handle(req Request, payload []byte, gone <-chan struct{}) (Response, []byte, *proc) {
	fail := func(e *Error) (Response, []byte, *proc) { return Response{Error: e}, nil, nil }
	switch req.Op {
	case "hello":
		return Response{Hello: &HelloInfo{Version: Version, Runtime: s.runtime, Layout: s.layout, Pid: os.Getpid(), StartedMS: s.startedMS}}, nil, nil
	case "start":
		p, existing, err := s.start(req.Spec)
		if err != nil {
			return fail(err)
		}
		s.mu.Lock()
		info := p.info
		info.TreeRunning = info.Exited && !p.treeDone
		s.mu.Unlock()
		if p.fg {
			return Response{Info: &info}, nil, p
		}
		return Response{Info: &info, Existing: existing}, nil, nil
	case "read":
		resp, data, err := s.read(req, gone)
		if err != nil {
			return fail(err)
		}
		return resp, data, nil
	case "wait":
		info, err := s.wait(req.ID, req.WaitMS, gone)
		if err != nil {
			return fail(err)
		}
		return Response{Info: &info}, nil, nil
	case "write":
		n, err := s.write(req.ID, payload, req.Close)
		if err != nil {
			return fail(err)
		}
		return Response{Written: n}, nil, nil
	case "signal":
		if err := s.signal(req.ID, syscall.Signal(req.Signal), req.Reason); err != nil {
			return fail(err)
		}
		return Response{}, nil, nil
	case "resize":
		if err := s.resize(req.ID, req.Rows, req.Cols); err != nil {
			return fail(err)
		}
		return Response{}, nil, nil
	case "list":
		return Response{List: s.list()}, nil, nil
	case "shutdown":
		hs, payload := encodeFinals(s.shutdown(time.Duration(req.GraceMS) * time.Millisecond))
		return Response{Final: hs}, payload, nil
	}
	return fail(errorf(ErrInvalid, "unknown op %q", req.Op))
}

func (s *server) newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return s.idPrefix + hex.EncodeToString(b[:])
}

// start launches spec on a free shim; a spec naming a process the
// supervisor holds returns that one (existing).
func (s *server) start(spec *Spec) (p *proc, existing bool, e *Error) {
	if spec == nil || len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, false, errorf(ErrInvalid, "start: empty command")
	}
	if spec.ID != "" {
		if spec.Foreground || !IDPattern.MatchString(spec.ID) {
			return nil, false, errorf(ErrInvalid, "start: id %q: want %s on a background process", clipStr(spec.ID), IDPattern)
		}
		s.idMu.Lock()
		defer s.idMu.Unlock()
		s.mu.Lock()
		old, ok := s.procs[spec.ID]
		s.mu.Unlock()
		if ok {
			return old, true, nil
		}
	}
	p, e = s.launch(spec)
	return p, false, e
}

// launch starts spec on a free shim: admitted (admitLocked), given a shim,
// its stdio (openStdio) and buffers (bufferSizes), spawned; a command the
// shim could not start is recorded as ended (startFailed), a started one
// is followed (follow).
func (s *server) launch(spec *Spec) (*proc, *Error) {
	s.mu.Lock()
	if e := s.admitLocked(spec); e != nil {
		s.mu.Unlock()
		return nil, e
	}
	sh := s.takeShimLocked()
	s.mu.Unlock()
	if sh == nil {
		var err error
		if sh, err = s.newShim(); err != nil {
			return nil, errorf(ErrInternal, "start: %v", err)
		}
	}

	env := spec.Env
	if spec.InheritEnv {
		env = mergeEnv(s.inherit, spec.Env)
	}
	id := spec.ID
	if id == "" {
		id = s.newID()
	}
	p := &proc{
		info: Info{ID: id, Tag: spec.Tag, Argv: slices.Clone(spec.Argv), PTY: spec.PTY, Exec: spec.Exec, StartedMS: time.Now().UnixMilli()},
		fg:   spec.Foreground, changed: make(chan struct{}), shim: sh,
		lossless: spec.Lossless && !spec.Foreground, lastRead: time.Now(),
	}
	capacity, head := bufferSizes(spec, s.bufBytes)
	child, readers, e := openStdio(spec, p, capacity, head)
	if e != nil {
		s.releaseShim(sh)
		return nil, e
	}
	started, err := sh.spawn(shimMsg{Op: "spawn", Argv: spec.Argv, Env: env, Dir: spec.Dir, PTY: spec.PTY, KillOnExit: spec.Foreground || spec.Exec},
		[]int{int(child[0].Fd()), int(child[1].Fd()), int(child[2].Fd())})
	for i, f := range child {
		if f != nil && (i == 0 || f != child[i-1]) {
			_ = f.Close()
		}
	}
	if err != nil {
		for _, f := range readers {
			if f != nil && f != p.master {
				_ = f.Close()
			}
		}
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		s.retireShim(sh)
		return nil, errorf(ErrInternal, "start: %v", err)
	}
	s.mu.Lock()
	s.procs[p.info.ID] = p
	if !p.fg {
		s.order = append(s.order, p.info.ID)
	}
	s.mu.Unlock()
	if started.Ev == "failed" {
		s.startFailed(p, sh, spec, started, readers)
		return p, nil
	}
	p.info.Pid = started.Pid
	s.follow(p, sh, spec, readers)
	return p, nil
}

// admitLocked refuses a new process while the runtime is stopping
// (ErrState) and a background process beyond maxProcs live ones
// (ErrLimit; foreground commands and execs do not count, nor do processes
// whose tree has ended). s.mu is held.
func (s *server) admitLocked(spec *Spec) *Error {
	if s.stopping {
		return errorf(ErrState, "the runtime is stopping")
	}
	if spec.Foreground || spec.Exec {
		return nil
	}
	live := 0
	for _, p := range s.procs {
		if !p.fg && !p.info.Exec && !p.treeDone {
			live++
		}
	}
	if live >= s.maxProcs {
		return errorf(ErrLimit, "%d background processes are running, the most a runtime may have", s.maxProcs)
	}
	return nil
}

// bufferSizes returns the output ring's capacity and kept head of a
// process of spec on a supervisor buffering bufBytes per stream: a
// foreground command keeps a window of foregroundWindow (its reader drains
// it) and no head; a lossless process (an exec's) twice bufBytes; the head
// asked for is bounded by bufBytes.
func bufferSizes(spec *Spec, bufBytes int) (capacity, head int) {
	capacity = bufBytes
	switch {
	case spec.Foreground:
		capacity = foregroundWindow
	case spec.Lossless:
		capacity = 2 * bufBytes
	}
	if !spec.Foreground {
		head = min(max(spec.HeadBytes, 0), bufBytes)
	}
	return capacity, head
}

// openStdio makes p's standard streams: a terminal (sized spec.Rows ×
// spec.Cols, 24×80 when unset) as all three with its master as p's one
// output and stdin; otherwise a pipe per output stream, and a stdin pipe
// when spec gives stdin or keeps it open (a background process), else
// /dev/null. child are the ends the process gets, readers p's output ends.
// On an error everything opened is closed (ErrInternal).
func openStdio(spec *Spec, p *proc, capacity, head int) (child [3]*os.File, readers [2]*os.File, e *Error) {
	closeAll := func() {
		for _, f := range append(child[:], readers[:]...) {
			if f != nil {
				_ = f.Close()
			}
		}
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
	}
	if spec.PTY {
		master, slave, err := pty.Open()
		if err != nil {
			return child, readers, errorf(ErrInternal, "start: terminal: %v", err)
		}
		rows, cols := spec.Rows, spec.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		_ = pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols})
		child = [3]*os.File{slave, slave, slave}
		readers[0] = master
		p.master, p.stdin = master, master
		p.bufs[0] = newRing(capacity, head)
		p.open[0] = true
		return child, readers, nil
	}
	for i := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return child, readers, errorf(ErrInternal, "start: pipe: %v", err)
		}
		readers[i], child[i+1] = r, w
		p.bufs[i] = newRing(capacity, head)
		p.open[i] = true
	}
	if spec.Stdin != nil || (spec.OpenStdin && !spec.Foreground) {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return child, readers, errorf(ErrInternal, "start: pipe: %v", err)
		}
		child[0], p.stdin = r, w
		return child, readers, nil
	}
	dn, err := os.Open(os.DevNull)
	if err != nil {
		closeAll()
		return child, readers, errorf(ErrInternal, "start: %v", err)
	}
	child[0] = dn
	return child, readers, nil
}

// startFailed records p, which the shim could not start (command not
// found, not executable), as ended the way a shell reports it: the shim's
// code, and "sandbox: <cmd>: <reason>" on stderr (the terminal with a PTY).
// The shim goes back to the idle pool.
func (s *server) startFailed(p *proc, sh *shimHandle, spec *Spec, started shimMsg, readers [2]*os.File) {
	for _, f := range readers {
		if f != nil {
			_ = f.Close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	msg := "sandbox: " + spec.Argv[0] + ": " + started.Msg + "\n"
	idx := 1
	if spec.PTY {
		idx = 0
	}
	p.bufs[idx].write([]byte(msg))
	p.open = [2]bool{}
	p.info.Exited, p.info.ExitCode, p.info.Reason, p.info.Message = true, started.Code, ReasonStartErr, started.Msg
	p.info.EndedMS = time.Now().UnixMilli()
	p.treeDone, p.shim = true, nil
	p.info.Totals = [2]int64{p.bufs[0].end, p.totalLocked(1)}
	p.notify()
	s.pruneLocked()
	s.idle = append(s.idle, sh)
}

// follow runs the started process p: its output pumped into its buffers,
// spec.Stdin written (then stdin closed), its timeout armed (ReasonTimeout),
// its end watched on sh; the shim pool is refilled.
func (s *server) follow(p *proc, sh *shimHandle, spec *Spec, readers [2]*os.File) {
	p.readers = readers
	for i, r := range readers {
		if r != nil {
			go s.pump(p, i, r)
		}
	}
	if spec.Stdin != nil && p.stdin != nil && !spec.PTY {
		w := p.stdin
		s.mu.Lock()
		p.stdin = nil
		s.mu.Unlock()
		go func() {
			_, _ = w.Write(spec.Stdin) // EPIPE when the command does not read it all
			_ = w.Close()
		}()
	}
	if spec.TimeoutMS > 0 {
		p.timer = time.AfterFunc(time.Duration(spec.TimeoutMS)*time.Millisecond, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !p.info.Exited {
				s.killLocked(p, ReasonTimeout)
			}
		})
	}
	go s.watch(p, sh)
	s.mu.Lock()
	s.refillLocked()
	s.mu.Unlock()
}

func (p *proc) totalLocked(i int) int64 {
	if p.bufs[i] == nil {
		return 0
	}
	return p.bufs[i].end
}

// watch follows the shim's reports for p until its tree is empty.
func (s *server) watch(p *proc, sh *shimHandle) {
	for ev := range sh.events {
		s.mu.Lock()
		switch ev.Ev {
		case "exit":
			ws := syscall.WaitStatus(ev.Status)
			code, reason := ws.ExitStatus(), ReasonExited
			if ws.Signaled() {
				code, reason = 128+int(ws.Signal()), ReasonSignaled
			}
			if p.killed != "" {
				reason = p.killed
			}
			p.info.Exited, p.info.ExitCode, p.info.Reason = true, code, reason
			p.info.EndedMS = time.Now().UnixMilli()
			if p.timer != nil {
				p.timer.Stop()
			}
			p.notify()
		case "done":
			s.treeEndedLocked(p)
			s.idle = append(s.idle, sh)
			s.trimIdleLocked()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	// The shim died (killed from inside the sandbox): its tree is swept by
	// the reaper.
	s.mu.Lock()
	if !p.info.Exited {
		p.info.Exited, p.info.ExitCode, p.info.Reason = true, 137, ReasonLost
		p.info.EndedMS = time.Now().UnixMilli()
		if p.killed != "" {
			p.info.Reason = p.killed
		}
	}
	s.treeEndedLocked(p)
	s.mu.Unlock()
}

// treeEndedLocked records that p's tree is gone; its pipes get drainGrace
// to deliver what is left.
func (s *server) treeEndedLocked(p *proc) {
	p.treeDone, p.shim = true, nil
	if p.stdin != nil && p.stdin != p.master {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	p.notify()
	if p.open[0] || p.open[1] {
		time.AfterFunc(drainGrace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if p.open[0] || p.open[1] {
				for _, r := range p.readers {
					if r != nil {
						_ = r.Close() // ends a pump stuck on a pipe held elsewhere
					}
				}
				p.open = [2]bool{}
				p.notify()
			}
		})
	}
	s.pruneLocked()
}

// pump copies one output stream into p's buffer. A foreground stream waits
// while its unread part fills the window (so nothing is ever dropped).
func (s *server) pump(p *proc, i int, r *os.File) {
	defer func() {
		_ = r.Close()
		s.mu.Lock()
		p.open[i] = false
		p.info.Totals[i] = p.bufs[i].end
		p.notify()
		s.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n := len(buf)
		if p.fg || p.lossless {
			s.mu.Lock()
			for {
				room := int64(p.bufs[i].cap) - (p.bufs[i].end - p.acked[i])
				if room > 0 {
					n = int(min(room, int64(len(buf))))
					break
				}
				if p.treeDone && !p.open[i] {
					s.mu.Unlock()
					return
				}
				if p.lossless {
					left := LosslessIdle - time.Since(p.lastRead)
					if left <= 0 {
						break // nobody reads: drop the oldest bytes again
					}
					t := time.NewTimer(left)
					ch := p.changed
					s.mu.Unlock()
					select {
					case <-ch:
					case <-t.C:
					}
					t.Stop()
					s.mu.Lock()
					continue
				}
				ch := p.changed
				s.mu.Unlock()
				<-ch
				s.mu.Lock()
			}
			s.mu.Unlock()
		}
		k, err := r.Read(buf[:n])
		if k > 0 {
			s.mu.Lock()
			p.bufs[i].write(buf[:k])
			p.info.Totals[i] = p.bufs[i].end
			p.notify()
			s.mu.Unlock()
		}
		if err != nil {
			return // EOF, EIO from a PTY whose last holder exited, or closed
		}
	}
}

// read returns what p's streams hold from the requested offsets, waiting
// up to req.WaitMS for something new when there is nothing yet.
func (s *server) read(req Request, gone <-chan struct{}) (Response, []byte, *Error) {
	max := req.Max
	if max <= 0 || max > 4<<20 {
		max = 256 << 10
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, maxReadWait)
	deadline := time.Now().Add(wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[req.ID]
	if !ok {
		return Response{}, nil, errorf(ErrNotFound, "no process %q", clipStr(req.ID))
	}
	if (p.fg || p.lossless) && !req.Peek {
		p.ackLocked(req.Offsets)
	}
	if e := s.awaitOutputLocked(p, req.Offsets, deadline, gone); e != nil {
		return Response{}, nil, e
	}
	resp, data := p.chunksLocked(req.Offsets, max, req.MaxTotal)
	info := p.info
	info.TreeRunning = info.Exited && !p.treeDone
	resp.Info = &info
	return resp, data, nil
}

// ackLocked records that a reader of a foreground or lossless process has
// everything before offsets (bounded by what exists), so a pump waiting
// for room in its window may go on. s.mu is held.
func (p *proc) ackLocked(offsets [2]int64) {
	if p.lossless {
		p.lastRead = time.Now()
	}
	for i := range 2 {
		if b := p.bufs[i]; b != nil && offsets[i] != NoStream && offsets[i] > p.acked[i] {
			p.acked[i] = min(offsets[i], b.end)
			p.notify() // a waiting pump may go on
		}
	}
}

// awaitOutputLocked waits, releasing s.mu meanwhile, until p has bytes
// past offsets, has ended with everything it started, has exited since the
// call began, or deadline passes. ErrState when gone closes first (the
// client went away). s.mu is held on entry and on return.
func (s *server) awaitOutputLocked(p *proc, offsets [2]int64, deadline time.Time, gone <-chan struct{}) *Error {
	exitedBefore := p.info.Exited
	for {
		has := false
		for i := range 2 {
			if b := p.bufs[i]; b != nil && offsets[i] != NoStream && b.end > offsets[i] {
				has = true
			}
		}
		ended := !p.open[0] && !p.open[1] && p.info.Exited && p.treeDone
		if has || ended || (p.info.Exited && !exitedBefore) {
			return nil
		}
		if more, e := s.awaitChangeLocked(p, deadline, gone); !more {
			return e
		}
	}
}

// awaitChangeLocked waits, releasing s.mu meanwhile, until p changes
// (more is true: look again), deadline passes (more false, no error) or
// gone closes (the client went away: ErrState). s.mu is held on entry and
// on return.
func (s *server) awaitChangeLocked(p *proc, deadline time.Time, gone <-chan struct{}) (more bool, e *Error) {
	left := time.Until(deadline)
	if left <= 0 {
		return false, nil
	}
	ch := p.changed
	s.mu.Unlock()
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-gone:
		s.mu.Lock()
		return false, errorf(ErrState, "the client went away")
	}
	s.mu.Lock()
	return true, nil
}

// chunksLocked reads p's two streams from offsets: at most max bytes each
// and maxTotal (when > 0) together, a NoStream offset reported at the
// stream's end without data. Each chunk says what was dropped before it
// and whether nothing can follow (EOF). s.mu is held.
func (p *proc) chunksLocked(offsets [2]int64, max, maxTotal int) (Response, []byte) {
	resp := Response{}
	var data []byte
	for i := range 2 {
		b := p.bufs[i]
		c := Chunk{Offset: offsets[i]}
		if b != nil {
			var d []byte
			n := max
			if maxTotal > 0 {
				n = min(n, maxTotal-len(data))
			}
			if c.Offset == NoStream {
				c.Offset = b.end
			} else {
				d, c.Offset, c.Dropped = b.readAt(c.Offset, n)
			}
			c.Len = len(d)
			data = append(data, d...)
			// Nothing follows: the stream is closed, the process ended (its
			// exit is known before its last byte is reported read) and so
			// did everything it started (an exec returns once its whole
			// tree is gone).
			c.EOF = !p.open[i] && p.info.Exited && p.treeDone && c.Offset+int64(c.Len) == b.end
		} else {
			c.EOF = p.info.Exited && p.treeDone
		}
		resp.Chunks[i] = c
	}
	return resp, data
}

func (s *server) write(id string, data []byte, closeIn bool) (int, *Error) {
	s.mu.Lock()
	p, ok := s.procs[id]
	var w *os.File
	if ok {
		w = p.stdin
	}
	isPTY := ok && p.master != nil
	s.mu.Unlock()
	if !ok {
		return 0, errorf(ErrNotFound, "no process %q", clipStr(id))
	}
	if w == nil {
		return 0, errorf(ErrState, "process %s: stdin is closed (start it with stdin open)", id)
	}
	_ = w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	n, err := w.Write(data)
	if err == nil && closeIn {
		if isPTY {
			_, err = w.Write([]byte{4}) // end of file for the terminal's reader
		} else {
			s.mu.Lock()
			if p.stdin == w {
				p.stdin = nil
			}
			s.mu.Unlock()
			err = w.Close()
		}
	}
	if err != nil {
		return n, errorf(ErrState, "process %s: stdin: %v", id, err)
	}
	return n, nil
}

func (s *server) signal(id string, sig syscall.Signal, reason string) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return errorf(ErrNotFound, "no process %q", clipStr(id))
	}
	if reason != "" && (reason != ReasonCanceled || sig != syscall.SIGKILL) {
		return errorf(ErrInvalid, "signal: reason %q: only %q, with SIGKILL", clipStr(reason), ReasonCanceled)
	}
	if p.treeDone || p.shim == nil {
		return nil // nothing left to signal
	}
	if sig == syscall.SIGKILL {
		s.killLocked(p, reason)
		return nil
	}
	p.shim.send(shimMsg{Op: "signal", Sig: int(sig)}, nil)
	return nil
}

func (s *server) resize(id string, rows, cols uint16) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return errorf(ErrNotFound, "no process %q", clipStr(id))
	}
	if p.master == nil {
		return errorf(ErrState, "process %s has no terminal", id)
	}
	if rows == 0 || cols == 0 {
		return errorf(ErrInvalid, "rows and cols must be positive")
	}
	if err := pty.Setsize(p.master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return errorf(ErrState, "process %s: resize: %v", id, err)
	}
	return nil
}

// killLocked kills p's whole tree, recording reason (when not empty) as
// why it ended.
func (s *server) killLocked(p *proc, reason string) {
	if reason != "" && p.killed == "" && !p.info.Exited {
		p.killed = reason
	}
	if p.shim != nil && !p.treeDone {
		p.shim.send(shimMsg{Op: "kill"}, nil)
	}
}

// wait waits up to waitMS (at most maxReadWait) for process id's tree to
// end and its streams to close, and returns the process as it is then.
func (s *server) wait(id string, waitMS int64, gone <-chan struct{}) (Info, *Error) {
	deadline := time.Now().Add(min(time.Duration(waitMS)*time.Millisecond, maxReadWait))
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return Info{}, errorf(ErrNotFound, "no process %q", clipStr(id))
	}
	for !(p.info.Exited && p.treeDone && !p.open[0] && !p.open[1]) {
		more, e := s.awaitChangeLocked(p, deadline, gone)
		if e != nil {
			return Info{}, e
		}
		if !more {
			break
		}
	}
	info := p.info
	info.TreeRunning = info.Exited && !p.treeDone
	return info, nil
}

// list returns the background processes (exec processes are not listed).
func (s *server) list() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Info{}
	for _, id := range s.order {
		p := s.procs[id]
		if p.info.Exec {
			continue
		}
		info := p.info
		info.TreeRunning = info.Exited && !p.treeDone
		out = append(out, info)
	}
	return out
}

// pruneLocked forgets the oldest ended background processes beyond
// keptExited, and the oldest ended exec processes beyond keptExec.
func (s *server) pruneLocked() {
	var ended, execs []string
	for _, id := range s.order {
		if p := s.procs[id]; p.treeDone && !p.open[0] && !p.open[1] {
			if p.info.Exec {
				execs = append(execs, id)
			} else {
				ended = append(ended, id)
			}
		}
	}
	var drop []string
	if n := len(ended) - keptExited; n > 0 {
		drop = append(drop, ended[:n]...)
	}
	if n := len(execs) - keptExec; n > 0 {
		drop = append(drop, execs[:n]...)
	}
	for _, id := range drop {
		delete(s.procs, id)
	}
	if len(drop) > 0 {
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return slices.Contains(drop, x) })
	}
}

// forgetWhenDone drops a foreground process once its tree and streams end.
func (s *server) forgetWhenDone(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !(p.treeDone && !p.open[0] && !p.open[1]) {
		// Its owner is gone: nobody reads, so let the pumps run on.
		p.acked = [2]int64{p.bufs[0].end, p.totalLocked(1)}
		p.notify()
		ch := p.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	delete(s.procs, p.info.ID)
}

// shutdown kills every tree (recording ReasonStopped), waits up to grace
// for them and their output, and returns the background processes with
// their buffers. The caller exits after replying.
func (s *server) shutdown(grace time.Duration) []Final {
	if grace <= 0 || grace > time.Minute {
		grace = 5 * time.Second
	}
	s.mu.Lock()
	s.stopping = true
	for _, p := range s.procs {
		s.killLocked(p, ReasonStopped)
	}
	deadline := time.Now().Add(grace)
	for _, p := range s.procs {
		for !(p.treeDone && !p.open[0] && !p.open[1]) && time.Now().Before(deadline) {
			ch := p.changed
			s.mu.Unlock()
			select {
			case <-ch:
			case <-time.After(time.Until(deadline)):
			}
			s.mu.Lock()
		}
	}
	out := []Final{}
	ids := slices.Clone(s.order)
	sort.SliceStable(ids, func(i, j int) bool { return s.procs[ids[i]].info.StartedMS < s.procs[ids[j]].info.StartedMS })
	for _, id := range ids {
		p := s.procs[id]
		f := Final{Info: p.info}
		if !f.Info.Exited {
			f.Info.Exited, f.Info.ExitCode, f.Info.Reason = true, 137, ReasonStopped
			f.Info.EndedMS = time.Now().UnixMilli()
		}
		for i, b := range p.bufs {
			if b != nil {
				from := max(b.start, b.end-ArchiveTailBytes)
				f.Starts[i] = from
				f.Data[i] = b.read(from, int(b.end-from))
				f.Info.Totals[i] = b.end
				if len(b.head) > 0 && from > 0 {
					f.Heads[i] = slices.Clone(b.head)
				}
			}
		}
		out = append(out, f)
	}
	s.mu.Unlock()
	return out
}

// --- shims -----------------------------------------------------------------

// shimHandle is the supervisor's side of one shim.
type shimHandle struct {
	pid    int
	conn   *net.UnixConn
	events chan shimMsg // reports after "started"/"failed", closed when the shim dies
	first  chan shimMsg // the answer to a spawn
	mu     sync.Mutex
	dead   bool
}

func (s *server) newShim() (*shimHandle, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine := os.NewFile(uintptr(fds[0]), "shim")
	theirs := os.NewFile(uintptr(fds[1]), "shim")
	defer theirs.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		_ = mine.Close()
		return nil, err
	}
	defer devnull.Close()
	files := []uintptr{devnull.Fd(), devnull.Fd(), os.Stderr.Fd(), theirs.Fd()}
	argv := []string{"sandbox-supervisor", "shim"}
	if s.cgMode != "" {
		for _, f := range s.cgFiles {
			files = append(files, f.Fd()) // descriptors 4 (and 5)
		}
		argv = append(argv, "--cgroup", s.cgMode)
	}
	s.spawnMu.Lock()
	pid, err := syscall.ForkExec(s.exe, argv, &syscall.ProcAttr{
		// Few threads: under a pids limit every thread counts.
		Env:   []string{"GOMAXPROCS=1"},
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: pdeathsig(s.pid1)},
	})
	if err == nil {
		sh := &shimHandle{pid: pid, events: make(chan shimMsg, 8), first: make(chan shimMsg, 1)}
		s.mu.Lock()
		s.shims[pid] = sh
		s.mu.Unlock()
		s.spawnMu.Unlock()
		c, cerr := net.FileConn(mine)
		_ = mine.Close()
		if cerr != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return nil, cerr
		}
		sh.conn = c.(*net.UnixConn)
		go sh.readLoop()
		return sh, nil
	}
	s.spawnMu.Unlock()
	_ = mine.Close()
	return nil, err
}

// pdeathsig: outside a pid namespace shims die with the supervisor; inside
// one, its end kills every process anyway.
func pdeathsig(pid1 bool) syscall.Signal {
	if pid1 {
		return 0
	}
	return syscall.SIGKILL
}

func (sh *shimHandle) readLoop() {
	defer close(sh.events)
	buf := make([]byte, 64<<10)
	for {
		n, err := sh.conn.Read(buf)
		if err != nil || n == 0 {
			sh.mu.Lock()
			sh.dead = true
			sh.mu.Unlock()
			select {
			case sh.first <- shimMsg{Ev: "lost"}:
			default:
			}
			return
		}
		var m shimMsg
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		switch m.Ev {
		case "started", "failed":
			sh.first <- m
		default:
			sh.events <- m
		}
	}
}

// spawn sends a spawn request with fds and waits for its answer.
// A request too large for the control socket (EMSGSIZE: arguments and
// environment over the socket's send buffer, about 200 KiB) is answered as
// execve answers arguments over its limits: the command fails to start with
// code 126 and E2BIG's message, and the shim, which received nothing, stays
// usable.
func (sh *shimHandle) spawn(m shimMsg, fds []int) (shimMsg, error) {
	if err := sh.send(m, fds); err != nil {
		if errors.Is(err, syscall.EMSGSIZE) {
			return shimMsg{Ev: "failed", Code: 126, Msg: syscall.E2BIG.Error()}, nil
		}
		return shimMsg{}, err
	}
	select {
	case r := <-sh.first:
		if r.Ev == "lost" {
			return shimMsg{}, errors.New("the shim died")
		}
		return r, nil
	case <-time.After(30 * time.Second):
		return shimMsg{}, errors.New("the shim does not answer")
	}
}

func (sh *shimHandle) send(m shimMsg, fds []int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.dead || sh.conn == nil {
		return io.ErrClosedPipe
	}
	_, _, err = sh.conn.WriteMsgUnix(b, oob, nil)
	return err
}

func (sh *shimHandle) alive() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return !sh.dead
}

// takeShimLocked returns a free live shim, or nil.
func (s *server) takeShimLocked() *shimHandle {
	for len(s.idle) > 0 {
		sh := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if sh.alive() {
			return sh
		}
	}
	return nil
}

// refillLocked starts shims in the background until idleShims are free.
func (s *server) refillLocked() {
	if s.stopping {
		return
	}
	need := idleShims - len(s.idle)
	for range need {
		go func() {
			sh, err := s.newShim()
			if err != nil {
				fmt.Fprintln(os.Stderr, "sandbox-supervisor: shim:", err)
				return
			}
			s.mu.Lock()
			s.idle = append(s.idle, sh)
			s.trimIdleLocked()
			s.mu.Unlock()
		}()
	}
}

// trimIdleLocked retires free shims beyond a few.
func (s *server) trimIdleLocked() {
	for len(s.idle) > 2*idleShims {
		sh := s.idle[0]
		s.idle = s.idle[1:]
		s.retireShim(sh)
	}
}

// releaseShim puts an unused shim back.
func (s *server) releaseShim(sh *shimHandle) {
	s.mu.Lock()
	s.idle = append(s.idle, sh)
	s.mu.Unlock()
}

// retireShim ends a shim (closing its socket makes it exit).
func (s *server) retireShim(sh *shimHandle) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.conn != nil {
		_ = sh.conn.Close()
	}
	sh.dead = true
}

// mergeEnv returns base overridden by over (KEY=value lists).
func mergeEnv(base, over []string) []string {
	m := map[string]string{}
	var keys []string
	for _, l := range [][]string{base, over} {
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
			m[k] = v
		}
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out
}

func clipStr(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
