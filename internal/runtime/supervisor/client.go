package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client is the worker's side of one supervisor's control socket. Calls
// share a small pool of connections; Run uses a connection of its own,
// which ends the foreground process when it closes. It is safe for
// concurrent use.
type Client struct {
	path   string
	dialFn func(ctx context.Context) (net.Conn, error)
	mu     sync.Mutex
	idle   []net.Conn
}

// NewClient returns a client of the control socket at path (a host path,
// any length).
func NewClient(path string) *Client { return &Client{path: path} }

// NewDialClient returns a client whose connections dial makes (the Docker
// runtime's: a relay in the container).
func NewDialClient(dial func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{dialFn: dial}
}

// Close drops the pooled connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.idle {
		_ = k.Close()
	}
	c.idle = nil
}

// Listen creates the listening control socket at path (replacing a stale
// one) and returns it as a file to hand to the supervisor; the socket file
// stays when the returned file is closed.
func Listen(path string) (*os.File, error) {
	_ = os.Remove(path)
	var ln *net.UnixListener
	err := viaDir(path, func(p string) error {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		ln = l
		return err
	})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	_ = ln.Close()
	return f, err
}

// viaDir calls fn with path, or, when path is too long for a socket
// address, with /proc/self/fd/<dir>/<name> through a descriptor of its
// directory.
func viaDir(path string, fn func(string) error) error {
	if len(path) < 100 {
		return fn(path)
	}
	d, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn("/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + filepath.Base(path))
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.dialFn != nil {
		return c.dialFn(ctx)
	}
	var conn net.Conn
	err := viaDir(c.path, func(p string) error {
		var d net.Dialer
		k, err := d.DialContext(ctx, "unix", p)
		conn = k
		return err
	})
	return conn, err
}

// IsUnreachable reports whether err means that no supervisor listens (the
// socket is missing or refuses: the sandbox is gone).
func IsUnreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

func (c *Client) get(ctx context.Context) (net.Conn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		k := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return k, nil
	}
	c.mu.Unlock()
	return c.dial(ctx)
}

func (c *Client) put(k net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) < 4 {
		c.idle = append(c.idle, k)
		return
	}
	_ = k.Close()
}

// exchange sends one request on k and reads its response, bounded by ctx
// (a cancelled ctx closes k).
func exchange(ctx context.Context, k net.Conn, req Request, payload []byte) (Response, []byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = k.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp Response
	if err := WriteFrame(k, req, payload); err != nil {
		return resp, nil, ctxErr(ctx, err)
	}
	data, err := ReadFrame(k, &resp)
	if err != nil {
		return resp, nil, ctxErr(ctx, err)
	}
	if resp.Error != nil {
		return resp, data, resp.Error
	}
	return resp, data, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// call runs one request on a pooled connection.
func (c *Client) call(ctx context.Context, req Request, payload []byte) (Response, []byte, error) {
	for attempt := 0; ; attempt++ {
		k, err := c.get(ctx)
		if err != nil {
			return Response{}, nil, err
		}
		resp, data, err := exchange(ctx, k, req, payload)
		var pe *Error
		switch {
		case err == nil, errors.As(err, &pe):
			c.put(k)
			return resp, data, err
		}
		_ = k.Close()
		// A pooled connection may have been closed by a restarted
		// supervisor: retry once on a fresh one.
		if attempt > 0 || ctx.Err() != nil || (req.Op != "hello" && req.Op != "list" && req.Op != "read" && req.Op != "wait" && (req.Op != "start" || req.Spec == nil || req.Spec.ID == "")) {
			return resp, data, err
		}
	}
}

// Hello identifies the supervisor.
func (c *Client) Hello(ctx context.Context) (HelloInfo, error) {
	resp, _, err := c.call(ctx, Request{Op: "hello"}, nil)
	if err != nil {
		return HelloInfo{}, err
	}
	if resp.Hello == nil {
		return HelloInfo{}, errors.New("supervisor: empty hello")
	}
	return *resp.Hello, nil
}

// Start starts a background process (or, when spec.ID names a process the
// supervisor holds, returns that one with existing set).
func (c *Client) Start(ctx context.Context, spec Spec) (info Info, existing bool, err error) {
	spec.Foreground = false
	resp, _, err := c.call(ctx, Request{Op: "start", Spec: &spec}, nil)
	if err != nil {
		return Info{}, false, err
	}
	if resp.Info == nil {
		return Info{}, false, errors.New("supervisor: empty start response")
	}
	return *resp.Info, resp.Existing, nil
}

// ReadResult is one read: per stream (stdout or terminal; stderr) its
// chunk and data, and the process as it is.
type ReadResult struct {
	Chunks [2]Chunk
	Data   [2][]byte
	Info   Info
}

// Read reads from the given offsets (NoStream: nothing of that stream),
// waiting up to wait for something new; peek reads without acknowledging.
func (c *Client) Read(ctx context.Context, id string, offsets [2]int64, max int, wait time.Duration, peek bool) (ReadResult, error) {
	return c.ReadTotal(ctx, id, offsets, max, 0, wait, peek)
}

// ReadTotal is Read with both streams' data bounded by total together
// (0: no bound beyond max each).
func (c *Client) ReadTotal(ctx context.Context, id string, offsets [2]int64, max, total int, wait time.Duration, peek bool) (ReadResult, error) {
	resp, data, err := c.call(ctx, Request{Op: "read", ID: id, Offsets: offsets, Max: max, MaxTotal: total, WaitMS: wait.Milliseconds(), Peek: peek}, nil)
	if err != nil {
		return ReadResult{}, err
	}
	return splitRead(resp, data)
}

// Wait waits up to wait for the process's tree to end and its streams to
// close, and returns the process as it is then.
func (c *Client) Wait(ctx context.Context, id string, wait time.Duration) (Info, error) {
	resp, _, err := c.call(ctx, Request{Op: "wait", ID: id, WaitMS: wait.Milliseconds()}, nil)
	if err != nil {
		return Info{}, err
	}
	if resp.Info == nil {
		return Info{}, errors.New("supervisor: empty wait response")
	}
	return *resp.Info, nil
}

func splitRead(resp Response, data []byte) (ReadResult, error) {
	var r ReadResult
	if resp.Info == nil || resp.Chunks[0].Len+resp.Chunks[1].Len != len(data) {
		return r, errors.New("supervisor: malformed read response")
	}
	r.Chunks, r.Info = resp.Chunks, *resp.Info
	r.Data[0] = data[:resp.Chunks[0].Len]
	r.Data[1] = data[resp.Chunks[0].Len:]
	return r, nil
}

// Write writes data to the process's stdin (and closes it when closeIn).
func (c *Client) Write(ctx context.Context, id string, data []byte, closeIn bool) (int, error) {
	resp, _, err := c.call(ctx, Request{Op: "write", ID: id, Close: closeIn}, data)
	return resp.Written, err
}

// Signal sends sig to the process (SIGKILL: its whole tree).
func (c *Client) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	_, _, err := c.call(ctx, Request{Op: "signal", ID: id, Signal: int(sig)}, nil)
	return err
}

// Cancel kills the process's whole tree, recording ReasonCanceled.
func (c *Client) Cancel(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, Request{Op: "signal", ID: id, Signal: int(syscall.SIGKILL), Reason: ReasonCanceled}, nil)
	return err
}

// Resize sets the terminal size of a PTY process.
func (c *Client) Resize(ctx context.Context, id string, rows, cols uint16) error {
	_, _, err := c.call(ctx, Request{Op: "resize", ID: id, Rows: rows, Cols: cols}, nil)
	return err
}

// List returns the background processes.
func (c *Client) List(ctx context.Context) ([]Info, error) {
	resp, _, err := c.call(ctx, Request{Op: "list"}, nil)
	return resp.List, err
}

// Shutdown kills every process, waits up to grace for them, and returns the
// background processes with their buffers; the supervisor then exits.
func (c *Client) Shutdown(ctx context.Context, grace time.Duration) ([]Final, error) {
	k, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	resp, payload, err := exchange(ctx, k, Request{Op: "shutdown", GraceMS: grace.Milliseconds()}, nil)
	c.Close()
	if err != nil {
		return nil, err
	}
	return decodeFinals(resp.Final, payload)
}

// Run runs a foreground process on a connection of its own and hands every
// byte of its output to onData (stream 0 stdout, 1 stderr), in order and
// exactly once, until it has ended; the process waits when onData is
// slower than it writes. When ctx ends first the connection is closed,
// which kills the process's whole tree, and ctx's error is returned with
// what was known.
func (c *Client) Run(ctx context.Context, spec Spec, onData func(stream int, data []byte)) (Info, error) {
	spec.Foreground = true
	k, err := c.dial(ctx)
	if err != nil {
		return Info{}, err
	}
	defer k.Close()
	resp, _, err := exchange(ctx, k, Request{Op: "start", Spec: &spec}, nil)
	if err != nil {
		return Info{}, err
	}
	info := *resp.Info
	var off [2]int64
	for {
		resp, data, err := exchange(ctx, k, Request{Op: "read", ID: info.ID, Offsets: off, Max: 256 << 10, WaitMS: MaxReadWait.Milliseconds()}, nil)
		if err != nil {
			return info, err
		}
		r, err := splitRead(resp, data)
		if err != nil {
			return info, err
		}
		info = r.Info
		for i := range 2 {
			if r.Chunks[i].Dropped > 0 {
				return info, fmt.Errorf("supervisor: %d bytes of a foreground stream were dropped", r.Chunks[i].Dropped)
			}
			if len(r.Data[i]) > 0 && onData != nil {
				onData(i, r.Data[i])
			}
			off[i] = r.Chunks[i].Offset + int64(r.Chunks[i].Len)
		}
		if info.Exited && r.Chunks[0].EOF && r.Chunks[1].EOF {
			return info, nil
		}
	}
}

// BinaryName is the supervisor program's file name.
const BinaryName = "sandbox-supervisor"

// Find returns the absolute path of the sandbox-supervisor binary: explicit
// when non-empty (it must exist), else BinaryName next to the running
// executable (make build puts bin/sandbox-supervisor beside
// bin/sandbox-worker), else BinaryName on PATH.
func Find(explicit string) (string, error) {
	check := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return "", err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("%s is not an executable file", abs)
		}
		return abs, nil
	}
	if explicit != "" {
		return check(explicit)
	}
	if exe, err := os.Executable(); err == nil {
		if p, err := check(filepath.Join(filepath.Dir(exe), BinaryName)); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath(BinaryName)
	if err != nil {
		return "", fmt.Errorf("%s is neither next to %s nor on PATH (make build puts it in bin/; or set SANDBOX_SUPERVISOR_BINARY)", BinaryName, filepath.Base(os.Args[0]))
	}
	return check(p)
}

// Launched is a supervisor started on the host (the local runtime's): in a
// session of its own and without a parent-death signal, so it outlives the
// worker.
type Launched struct {
	Client *Client
	// Done is closed when the process exits (Launch reaps it).
	Done chan struct{}
	Pid  int
}

// Launch starts `bin serve` on the host with a new control socket at sock
// and its stderr in logPath, and waits until it answers.
func Launch(ctx context.Context, bin, sock, logPath, runtimeID, layout string) (*Launched, error) {
	ln, err := Listen(sock)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--ctl-fd", "3", "--runtime", runtimeID, "--layout", layout)
	cmd.Env = []string{"GOMAXPROCS=2"}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{ln}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &Launched{Client: NewClient(sock), Done: make(chan struct{}), Pid: cmd.Process.Pid}
	go func() {
		_ = cmd.Wait()
		close(l.Done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := l.Client.Hello(hctx)
		cancel()
		if err == nil {
			return l, nil
		}
		select {
		case <-l.Done:
			msg, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the supervisor exited: %s", strings.TrimSpace(string(msg)))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the supervisor does not answer: %v", err)
		}
	}
}
