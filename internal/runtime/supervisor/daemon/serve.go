package daemon

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
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
	// drainGrace bounds the wait for output pipes once a tree has ended
	// (a descriptor passed to an unrelated process may hold them).
	drainGrace = 500 * time.Millisecond
	// idleShims is how many free shims are kept ready.
	idleShims = 2
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
	info     supervisor.Info
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
	if o.fileSizeLimit > 0 {
		// Before any shim exists: every command inherits it, and without
		// CAP_SYS_RESOURCE none can raise it again.
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: o.fileSizeLimit, Max: o.fileSizeLimit}); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-supervisor serve: file size limit:", err)
			return 1
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
		eln, err := net.Listen("tcp", supervisor.EgressListen)
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
	fileSizeLimit          uint64 // RLIMIT_FSIZE of every command in bytes; 0: unchanged
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
	fs.StringVar(&o.egressSocket, "egress-socket", "", "relay connections to "+supervisor.EgressListen+" to this unix socket (the worker's egress proxy)")
	fs.StringVar(&o.idPrefix, "id-prefix", "proc-", "prefix of the process ids this supervisor gives")
	fs.Uint64Var(&o.fileSizeLimit, "file-size-limit", 0, "largest file a command may write, in bytes (RLIMIT_FSIZE; 0: unchanged)")
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
				s.killLocked(p, supervisor.ReasonCanceled)
			}
			s.mu.Unlock()
			go s.forgetWhenDone(p)
		}
	}()
	type frame struct {
		req     supervisor.Request
		payload []byte
	}
	frames := make(chan frame)
	gone := make(chan struct{}) // the client closed the connection
	go func() {
		defer close(gone)
		for {
			var req supervisor.Request
			payload, err := supervisor.ReadFrame(c, &req)
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
		werr := supervisor.WriteFrame(c, resp, out)
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

func (s *server) handle(req supervisor.Request, payload []byte, gone <-chan struct{}) (supervisor.Response, []byte, *proc) {
	fail := func(e *supervisor.Error) (supervisor.Response, []byte, *proc) {
		return supervisor.Response{Error: e}, nil, nil
	}
	switch req.Op {
	case "hello":
		return supervisor.Response{Hello: &supervisor.HelloInfo{Version: supervisor.Version, Runtime: s.runtime, Layout: s.layout, Pid: os.Getpid(), StartedMS: s.startedMS}}, nil, nil
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
			return supervisor.Response{Info: &info}, nil, p
		}
		return supervisor.Response{Info: &info, Existing: existing}, nil, nil
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
		return supervisor.Response{Info: &info}, nil, nil
	case "write":
		n, err := s.write(req.ID, payload, req.Close)
		if err != nil {
			return fail(err)
		}
		return supervisor.Response{Written: n}, nil, nil
	case "signal":
		if err := s.signal(req.ID, syscall.Signal(req.Signal), req.Reason); err != nil {
			return fail(err)
		}
		return supervisor.Response{}, nil, nil
	case "resize":
		if err := s.resize(req.ID, req.Rows, req.Cols); err != nil {
			return fail(err)
		}
		return supervisor.Response{}, nil, nil
	case "list":
		return supervisor.Response{List: s.list()}, nil, nil
	case "shutdown":
		hs, payload := supervisor.EncodeFinals(s.shutdown(time.Duration(req.GraceMS) * time.Millisecond))
		return supervisor.Response{Final: hs}, payload, nil
	}
	return fail(errorf(supervisor.ErrInvalid, "unknown op %q", req.Op))
}

func errorf(kind, format string, args ...any) *supervisor.Error {
	return &supervisor.Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
