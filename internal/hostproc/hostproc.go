// Package hostproc starts the worker's host-side child processes (git and
// everything git runs: git-remote-https, git-lfs, ssh, shell aliases …) so
// that nothing outlives the worker and nothing outlives its call
// (docs/SECURITY.md "Host-side processes"). The runtimes' sandboxes and
// supervisors are not started here: they outlive the worker on purpose.
//
// Three mechanisms, each covering what the one before cannot:
//
//   - Pdeathsig SIGKILL on the child, set from one OS thread that is locked
//     for the life of the process (Go delivers the parent-death signal when
//     the forking *thread* exits, and a thread whose goroutine ends while
//     locked does exit: forking from an arbitrary goroutine's thread could
//     kill a child early, or from a thread that already left, never);
//   - every child leads its own process group, and the whole group is
//     SIGKILLed when its leader exits (Wait), before the leader is reaped,
//     so no helper it left behind keeps running, or keeps the call's
//     credential in its environment, after the call;
//   - a reaper process (this binary, re-executed; see init) in a session of
//     its own holds the read end of a pipe whose write end only the worker
//     holds. When the worker dies, however it dies (kill -9 included), the
//     pipe reads end-of-file and the reaper SIGKILLs every process group
//     still registered and every process whose environment carries this
//     worker's tag (a child that left its group, or one started in the
//     instant before its group was registered), then exits. The parent-death
//     signal alone reaches only the direct child, never git's own children.
package hostproc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TagEnv is the environment variable every host-side child carries, with
// the value that identifies the worker (process) that started it; the
// reaper kills every process that carries its worker's value.
const TagEnv = "SANDBOXCORE_HOST_CHILD"

// reaperEnv, set in the reaper's environment to its worker's tag, makes a
// binary that links this package run as the reaper (init).
const reaperEnv = "SANDBOXCORE_HOSTPROC_REAPER"

func init() {
	if tag := os.Getenv(reaperEnv); tag != "" {
		os.Exit(runReaper(os.Stdin, tag))
	}
}

// spawnReq is one Start handed to the spawner thread.
type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq

	tagOnce  sync.Once
	tagValue string

	reaperMu   sync.Mutex
	reaperW    *os.File         // write end of the reaper's pipe; nil: none running
	reaperDown bool             // the last start failed (warned once)
	live       = map[int]bool{} // registered process groups, re-sent to a new reaper
)

// tag is this process's TagEnv value: random, fixed for the process's life.
func tag() string {
	tagOnce.Do(func() {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		tagValue = hex.EncodeToString(b)
	})
	return tagValue
}

// spawner starts the goroutine that performs every Start, locked to its OS
// thread and never unlocked: that thread exists as long as the process, so
// the parent-death signal of a child fires exactly when the worker dies.
func spawner() chan spawnReq {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must not exit
			for req := range spawnCh {
				err := req.cmd.Start()
				if err == nil {
					register(req.cmd.Process.Pid)
				}
				req.done <- err
			}
		}()
	})
	return spawnCh
}

// Start starts cmd as a host-side child that dies with the worker: the
// leader of its own process group, SIGKILLed when the worker process dies
// (parent-death signal from a thread that never exits, and the reaper for
// every process it starts), its environment (cmd.Environ()) tagged with
// TagEnv. cmd.SysProcAttr's other fields are kept. A child started by Start
// must be waited for with Wait. Errors are cmd.Start's.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Setsid = false
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Env = append(cmd.Environ(), TagEnv+"="+tag())
	ensureReaper()
	req := spawnReq{cmd: cmd, done: make(chan error, 1)}
	spawner() <- req
	return <-req.done
}

// Run is Start followed by Wait.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return Wait(cmd)
}

// Wait waits for a child started by Start to exit, then SIGKILLs what is
// left of its process group (helpers it started and did not wait for)
// before reaping it — the group id cannot have been reused while its
// leader is unreaped — and returns cmd.Wait's error.
func Wait(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	unregister(pid)
	return cmd.Wait()
}

// ensureReaper starts the reaper when none runs (the first Start, or after
// the last one was lost). Without one, children still die with the worker
// through their parent-death signal, but their own children would not: a
// warning is logged once.
func ensureReaper() {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if reaperW != nil {
		return
	}
	w, err := startReaper()
	if err != nil {
		if !reaperDown {
			slog.Warn("hostproc: the reaper could not be started; host-side children's own children may outlive a killed worker", "err", err)
		}
		reaperDown = true
		return
	}
	reaperDown = false
	reaperW = w
	for pg := range live {
		writeLocked("+", pg)
	}
}

// startReaper re-executes this binary (/proc/self/exe) as the reaper: its
// stdin the read end of a fresh pipe, in a session of its own (so a signal
// to the worker's process group does not reach it), no parent-death
// signal. It returns the pipe's write end (close-on-exec: no other child
// inherits it, so only the worker's death closes it).
func startReaper() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"sandboxcore-hostproc-reaper"}
	cmd.Env = []string{reaperEnv + "=" + tag()}
	cmd.Dir = "/"
	cmd.Stdin = r
	// stdout and stderr: /dev/null (it prints nothing, and holding the
	// worker's own output open would delay whoever reads it to its end).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }() // it exits only when w is closed or it is killed
	return w, nil
}

// register and unregister tell the reaper about a process group.
func register(pg int)   { send("+", pg) }
func unregister(pg int) { send("-", pg) }

func send(op string, pg int) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if op == "+" {
		live[pg] = true
	} else {
		delete(live, pg)
	}
	if reaperW != nil {
		writeLocked(op, pg)
	}
}

// writeLocked writes one registration; a reaper that is gone is forgotten
// (the next Start starts another and re-sends every live group).
func writeLocked(op string, pg int) {
	if _, err := io.WriteString(reaperW, op+strconv.Itoa(pg)+"\n"); err != nil {
		reaperW.Close()
		reaperW = nil
	}
}

// runReaper is the reaper's whole life: it follows the registrations on in
// until end-of-file (the worker died, or closed it), then kills every
// registered group and every process tagged with tagValue until none is
// left (at most about 2 s), and returns the exit code.
func runReaper(in io.Reader, tagValue string) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pg, err := strconv.Atoi(line[1:])
		if err != nil || pg <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pg] = true
		case '-':
			delete(groups, pg)
		}
	}
	killAll(groups, tagValue)
	return 0
}

// killAll SIGKILLs the process groups in groups and every process whose
// environment holds TagEnv=tagValue, again until a pass after the first
// finds no live tagged process (one forked during a pass is found by the
// next), for at most about 2 s. It is what the reaper does when its worker
// is gone. (A group's zombies, which an init that does not reap may keep,
// still take signals: so a group alone never prolongs the passes.)
func killAll(groups map[int]bool, tagValue string) {
	self := os.Getpid()
	needle := []byte(TagEnv + "=" + tagValue + "\x00")
	for round := 0; round < 100; round++ {
		for pg := range groups {
			if syscall.Kill(-pg, syscall.SIGKILL) != nil {
				delete(groups, pg) // ESRCH: the group is gone
			}
		}
		found := 0
		for _, pid := range tagged(needle, self) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			found++
		}
		if found == 0 && round > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tagged lists the processes (other than self) whose environment holds
// needle ("NAME=value\x00"); a zombie's environment reads empty.
func tagged(needle []byte, self int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + n + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(env, needle) || bytes.Contains(env, append([]byte{0}, needle...)) {
			out = append(out, pid)
		}
	}
	return out
}
