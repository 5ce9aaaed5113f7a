package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimHandle is the supervisor's side of one shim.
type shimHandle struct {
	pid    int
	conn   *net.UnixConn
	events chan shimMsg // reports after "started"/"failed", closed when the shim dies
	first  chan shimMsg // the answer to a spawn
	mu     sync.Mutex
	dead   bool
	// lowered: it received a spawn with NoFileGrowth, lowered its own file
	// size limit for good and exits after that tree (never reused).
	lowered bool
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
	if m.NoFileGrowth {
		sh.mu.Lock()
		sh.lowered = true
		sh.mu.Unlock()
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

// recycleShimLocked takes back a shim whose command ended or failed to
// start (s.mu held): free again, unless it lowered its file size limit.
func (s *server) recycleShimLocked(sh *shimHandle) {
	sh.mu.Lock()
	lowered := sh.lowered
	sh.mu.Unlock()
	if lowered {
		s.retireShim(sh)
		return
	}
	s.idle = append(s.idle, sh)
	s.trimIdleLocked()
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
