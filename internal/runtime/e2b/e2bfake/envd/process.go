package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/process"
)

// proc is one process envd started.
type proc struct {
	pid    uint32
	tag    string
	config *process.ProcessConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser

	mu   sync.Mutex
	subs map[chan *process.ProcessEvent]bool
	end  *process.ProcessEvent_EndEvent
	done chan struct{}
}

// subscribe returns a channel of the process's events from now on (data,
// then its end); closed after the end.
func (p *proc) subscribe() (chan *process.ProcessEvent, func()) {
	ch := make(chan *process.ProcessEvent, 256)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		ch <- &process.ProcessEvent{Event: &process.ProcessEvent_End{End: p.end}}
		close(ch)
		return ch, func() {}
	}
	p.subs[ch] = true
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.subs[ch] {
			delete(p.subs, ch)
			close(ch)
		}
	}
}

// publish hands an event to every subscriber; a subscriber that does not
// keep up (its stream is stuck) is dropped rather than blocking the process.
func (p *proc) publish(ev *process.ProcessEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- ev:
		case <-time.After(5 * time.Second):
			delete(p.subs, ch)
			close(ch)
		}
	}
}

type table struct {
	mu    sync.Mutex
	byPid map[uint32]*proc
}

func newTable() *table { return &table{byPid: map[uint32]*proc{}} }

func (t *table) find(sel *process.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := t.byPid[s.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *process.ProcessSelector_Tag:
		for _, p := range t.byPid {
			if p.tag == s.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", s.Tag))
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("invalid process selector"))
}

type processService struct{ s *server }

func (ps *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	t := ps.s.procs
	t.mu.Lock()
	defer t.mu.Unlock()
	out := &process.ListResponse{}
	for _, p := range t.byPid {
		info := &process.ProcessInfo{Config: p.config, Pid: p.pid}
		if p.tag != "" {
			tag := p.tag
			info.Tag = &tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// launch starts a process as the request's user and returns it with a
// subscription to its events taken before it started (as envd forks the
// process's data and end events before starting it, start.go): none of
// its output can come before the subscriber.
func (ps *processService) launch(ctx context.Context, req *process.StartRequest, timeout time.Duration) (*proc, chan *process.ProcessEvent, func(), error) {
	if req.GetPty() != nil {
		return nil, nil, nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported by this envd"))
	}
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return nil, nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no command"))
	}
	u := userOf(ctx)
	dir, err := workDir(u.HomeDir, cfg.Cwd)
	if err != nil {
		return nil, nil, nil, err
	}
	pctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout > 0 {
		pctx, cancel = context.WithTimeout(pctx, timeout)
	}
	cmd := command(pctx, cfg, u, dir, ps.s.environment())
	// Pipes of our own (not StdoutPipe): Wait never closes them under a
	// reader, so nothing written before the process ended is lost.
	stdout, outW, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, nil, nil, connect.NewError(connect.CodeInternal, err)
	}
	stderr, errW, err := os.Pipe()
	if err != nil {
		cancel()
		stdout.Close()
		outW.Close()
		return nil, nil, nil, connect.NewError(connect.CodeInternal, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	p := &proc{config: cfg, cmd: cmd, subs: map[chan *process.ProcessEvent]bool{}, done: make(chan struct{})}
	if req.Stdin == nil || req.GetStdin() {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			cancel()
			return nil, nil, nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	if req.Tag != nil {
		p.tag = *req.Tag
	}
	ch, unsub := p.subscribe()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		cancel()
		unsub()
		stdout.Close()
		stderr.Close()
		return nil, nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process '%s': %w", cfg.GetCmd(), err))
	}
	p.pid = uint32(cmd.Process.Pid)
	t := ps.s.procs
	t.mu.Lock()
	t.byPid[p.pid] = p
	t.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go p.pump(&wg, stdout, func(b []byte) *process.ProcessEvent_DataEvent {
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}}
	})
	go p.pump(&wg, stderr, func(b []byte) *process.ProcessEvent_DataEvent {
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: b}}
	})
	go p.wait(t, cancel, &wg, stdout, stderr)
	return p, ch, unsub, nil
}

// workDir resolves a process's cwd: the user's home when unset, a relative
// one below it. Errors: connect.CodeInvalidArgument (not an existing
// directory), as envd answers.
func workDir(home string, cwd *string) (string, error) {
	dir := home
	if cwd != nil && *cwd != "" {
		dir = *cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(home, dir)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", dir))
	}
	return dir, nil
}

// command returns the command of cfg run as user u in dir: PATH, HOME,
// USER and LOGNAME of u, then the sandbox's variables sandboxEnv (set by
// /init), then cfg's, the last value of a name winning — envd's order
// (handler.New in packages/envd/internal/services/process/handler of
// e2b-dev/infra); killed when ctx ends.
func command(ctx context.Context, cfg *process.ProcessConfig, u *user.User, dir string, sandboxEnv []string) *exec.Cmd {
	uid, gid := ids(u)
	cmd := exec.CommandContext(ctx, cfg.GetCmd(), cfg.GetArgs()...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
	cmd.Env = append(cmd.Env, sandboxEnv...)
	for k, v := range cfg.GetEnvs() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	return cmd
}

// pump publishes what r yields as data events (mk wraps a chunk of at
// most 32 KiB) until r ends; then wg.Done.
func (p *proc) pump(wg *sync.WaitGroup, r io.Reader, mk func([]byte) *process.ProcessEvent_DataEvent) {
	defer wg.Done()
	for {
		buf := make([]byte, 32<<10)
		n, err := r.Read(buf)
		if n > 0 {
			p.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: mk(buf[:n])}})
		}
		if err != nil {
			return
		}
	}
}

// wait waits for the process to end, drains its output (pumps counted by
// wg; cut after 300 ms when a process of the command's keeps the pipes
// open), removes it from t and hands its end event to every subscriber
// (each given at most 5 s), then closes p.done.
func (p *proc) wait(t *table, cancel context.CancelFunc, wg *sync.WaitGroup, stdout, stderr *os.File) {
	cmd := p.cmd
	err := cmd.Wait()
	cancel()
	// The output left in the pipes, unless a process of the command's
	// keeps them open: then they are cut.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(300 * time.Millisecond):
	}
	stdout.Close()
	stderr.Close()
	<-drained
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(cmd.ProcessState.ExitCode()), Exited: cmd.ProcessState.Exited(), Status: cmd.ProcessState.String()}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	t.mu.Lock()
	delete(t.byPid, p.pid)
	t.mu.Unlock()
	p.mu.Lock()
	p.end = end
	subs := p.subs
	p.subs = map[chan *process.ProcessEvent]bool{}
	p.mu.Unlock()
	ev := &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
	for ch := range subs {
		select {
		case ch <- ev:
		case <-time.After(5 * time.Second):
		}
		close(ch)
	}
	close(p.done)
}

// keepalive is the interval a request asks for (Keepalive-Ping-Interval, s).
func keepalive(h http.Header) time.Duration {
	n, err := strconv.ParseInt(h.Get("Keepalive-Ping-Interval"), 10, 64)
	if err != nil || n <= 0 || n > 1<<31 {
		return 90 * time.Second
	}
	return time.Duration(n) * time.Second
}

// pipe streams a subscription until the end event or ctx's end.
func pipe(ctx context.Context, ch chan *process.ProcessEvent, every time.Duration, send func(*process.ProcessEvent) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case ev, ok := <-ch:
			if !ok {
				return connect.NewError(connect.CodeUnknown, errors.New("the process's events ended"))
			}
			if err := send(ev); err != nil {
				return err
			}
			t.Reset(every)
			if ev.GetEnd() != nil {
				return nil
			}
		}
	}
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	var timeout time.Duration
	if v := req.Header().Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	p, ch, unsub, err := ps.launch(ctx, req.Msg, timeout)
	if err != nil {
		return err
	}
	defer unsub()
	if err := stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}}); err != nil {
		return err
	}
	return pipe(ctx, ch, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	ch, unsub := p.subscribe()
	defer unsub()
	if err := stream.Send(&process.ConnectResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}}); err != nil {
		return err
	}
	return pipe(ctx, ch, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

func (ps *processService) Update(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported by this envd"))
}

func (ps *processService) StreamInput(context.Context, *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("StreamInput is not supported by this envd"))
}

func (ps *processService) SendInput(_ context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("stdin not enabled or closed"))
	}
	if _, err := p.stdin.Write(req.Msg.GetInput().GetStdin()); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps *processService) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid signal: %s", req.Msg.GetSignal()))
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error sending signal: %w", err))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}
