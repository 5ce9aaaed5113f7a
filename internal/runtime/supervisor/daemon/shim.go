package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A shim is the supervisor's helper for one process tree at a time: a
// subreaper (PR_SET_CHILD_SUBREAPER), so every process the command starts,
// however it daemonizes (setsid, double fork), stays below it; it reports
// the leader's exit and, once no descendant is left, that it is free again
// (the supervisor reuses it for the next command, so a command costs one
// fork/exec, not two). It is the supervisor binary re-executed with "shim",
// its control socket (SOCK_SEQPACKET) on descriptor 3.

// shimMsg is one packet between the supervisor and a shim.
type shimMsg struct {
	Op string `json:"op,omitempty"` // supervisor → shim: spawn, signal, kill
	Ev string `json:"ev,omitempty"` // shim → supervisor: started, failed, exit, done

	// spawn (the three descriptors ride along as SCM_RIGHTS)
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	PTY  bool     `json:"pty,omitempty"`
	// KillOnExit kills the rest of the tree when the leader exits.
	KillOnExit bool `json:"kill_on_exit,omitempty"`
	// NoFileGrowth: the shim sets its file size limit to zero before the
	// spawn (the command inherits it) and exits after the tree (a shim is
	// never reused with a lowered limit).
	NoFileGrowth bool `json:"no_file_growth,omitempty"`

	// signal
	Sig  int  `json:"sig,omitempty"`
	Tree bool `json:"tree,omitempty"` // every descendant, not only the leader's group

	// started
	Pid int `json:"pid,omitempty"`
	// failed: a shell-style code (127 not found, 126 cannot execute) and why
	Code int    `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// exit: the leader's wait status
	Status int `json:"status,omitempty"`
}

// ignoreSignals keeps the process alive whatever a sandboxed command sends
// it (SIGKILL and SIGSTOP excepted; a pid namespace's init never receives
// those from inside). Signals are relayed to a channel that is drained.
func ignoreSignals(onChild func()) {
	c := make(chan os.Signal, 64)
	signal.Notify(c)
	go func() {
		for s := range c {
			if s == syscall.SIGCHLD && onChild != nil {
				onChild()
			}
		}
	}()
}

// setName sets the process name (its main thread's comm, what ps shows).
func setName(name string) {
	_ = os.WriteFile("/proc/self/task/"+strconv.Itoa(os.Getpid())+"/comm", []byte(name), 0)
}

// shimMain is `sandbox-supervisor shim`.
func shimMain(args []string) int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	setName("sandbox-shim")
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// Commands become the preferred victims of an out-of-memory kill in the
	// runtime's cgroup, ahead of the supervisor.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("500"), 0)
	ignoreSignals(nil)
	// Into the commands' cgroup (the runtime's pids limit), when the
	// supervisor has one: the shim's tasks count as its command's.
	// The commands' cgroup (the runtime's pids limit), when the supervisor
	// has one: each command is born in it, the shim itself stays out (a
	// fork bomb that fills the limit cannot keep it from making threads).
	var cg cmdCgroup
	if len(args) == 2 && args[0] == "--cgroup" {
		cg.mode = args[1]
		syscall.CloseOnExec(4)
		syscall.CloseOnExec(5)
	}
	f := os.NewFile(3, "supervisor")
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return 1
	}
	conn := c.(*net.UnixConn)
	msgs := make(chan shimIn, 8)
	go func() {
		defer close(msgs)
		buf := make([]byte, 1<<20)
		oob := make([]byte, unix.CmsgSpace(3*4))
		for {
			n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				return
			}
			var in shimIn
			if oobn > 0 {
				in.fds = parseRights(oob[:oobn])
			}
			if json.Unmarshal(buf[:n], &in.m) != nil {
				closeFDs(in.fds)
				continue
			}
			msgs <- in
		}
	}()
	send := func(m shimMsg) {
		b, _ := json.Marshal(m)
		_, _ = conn.Write(b)
	}
	for in := range msgs {
		if in.m.Op != "spawn" || len(in.fds) != 3 {
			closeFDs(in.fds)
			continue
		}
		if in.m.NoFileGrowth {
			if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{}); err != nil {
				closeFDs(in.fds)
				send(shimMsg{Ev: "failed", Code: 126, Msg: "cannot limit the file size: " + err.Error()})
				break
			}
		}
		if !runTree(in, msgs, send, cg) || in.m.NoFileGrowth {
			break
		}
	}
	// The supervisor is gone: nothing may outlive it.
	for killDescendants(os.Getpid()) > 0 {
		reapAll()
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

type shimIn struct {
	m   shimMsg
	fds []int
}

// runTree starts one command and serves it until its tree is empty; false
// when the supervisor went away meanwhile.
func runTree(in shimIn, msgs <-chan shimIn, send func(shimMsg), cg cmdCgroup) bool {
	m := in.m
	pid, code, msg := spawn(m, in.fds, cg)
	closeFDs(in.fds)
	if pid <= 0 {
		send(shimMsg{Ev: "failed", Code: code, Msg: msg})
		return true
	}
	send(shimMsg{Ev: "started", Pid: pid})
	exits := reapChildren()
	leaderAlive, killing, alive := true, false, true
	// swept: a kill's scan found no live descendant; none can appear
	// after that (only a live process forks), so the ticker stops
	// rescanning while the dead are reaped.
	swept := false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	kill := func() {
		killing = true
		if hasChildren() {
			swept = killDescendants(os.Getpid()) == 0
		}
	}
	for {
		select {
		case r, ok := <-exits:
			if !ok {
				send(shimMsg{Ev: "done"})
				return alive
			}
			if r.pid == pid {
				leaderAlive = false
				send(shimMsg{Ev: "exit", Status: int(r.status)})
				if m.KillOnExit {
					kill()
				}
			}
			// While killing, the ticker rescans: a scan per reaped child
			// would cost a whole tree's worth of /proc reads per member.
		case <-tick.C:
			if killing && !swept && hasChildren() {
				swept = killDescendants(os.Getpid()) == 0
			}
		case c, ok := <-msgs:
			if !ok {
				// The supervisor died: end the tree, then report nothing.
				msgs, alive = nil, false
				kill()
				continue
			}
			closeFDs(c.fds)
			signalTree(c.m, pid, leaderAlive, kill)
		}
	}
}

// reaped is one child reaped by reapChildren: its pid and wait status.
type reaped struct {
	pid    int
	status syscall.WaitStatus
}

// reapChildren reaps every child of this process (the shim is a
// subreaper: the tree's orphans are its children) as it exits, and closes
// the channel once none is left (ECHILD).
func reapChildren() <-chan reaped {
	exits := make(chan reaped, 16)
	go func() {
		defer close(exits)
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: no descendant left
			}
			exits <- reaped{p, ws}
		}
	}()
	return exits
}

// signalTree applies a "kill" or "signal" message to the tree of leader
// pid: kill (and SIGKILL) ends the whole tree through kill; another signal
// goes to the leader's process group while the leader lives and m.Tree is
// false, else to every descendant. Other operations are ignored.
func signalTree(m shimMsg, pid int, leaderAlive bool, kill func()) {
	switch m.Op {
	case "kill":
		kill()
	case "signal":
		sig := syscall.Signal(m.Sig)
		switch {
		case sig == syscall.SIGKILL:
			kill()
		case leaderAlive && !m.Tree:
			_ = syscall.Kill(-pid, sig) // the leader's process group
		default:
			signalDescendants(os.Getpid(), sig)
		}
	}
}

// spawn starts m.Argv on fds (stdin, stdout, stderr) in its own session
// (with fds[0] as controlling terminal for a PTY process). It resolves the
// command like execvp against m's own PATH, and runs a file that is not a
// binary nor has a #! line with /bin/sh, as shells do. On failure it
// returns pid 0 with a shell-style code and message.
func spawn(m shimMsg, fds []int, cg cmdCgroup) (pid, code int, msg string) {
	if len(m.Argv) == 0 || m.Argv[0] == "" {
		return 0, 127, "empty command"
	}
	pathEnv := ""
	for _, kv := range m.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	file, err := lookPath(m.Argv[0], pathEnv, m.Dir)
	if err != nil {
		return 0, 127, "command not found"
	}
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: m.PTY, Ctty: 0},
	}
	pid, err = cg.forkExec(file, m.Argv, attr)
	if errors.Is(err, syscall.ENOEXEC) {
		pid, err = cg.forkExec("/bin/sh", append([]string{"sh", file}, m.Argv[1:]...), attr)
	}
	switch {
	case err == nil:
		return pid, 0, ""
	case errors.Is(err, syscall.ENOENT):
		return 0, 127, "No such file or directory"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return 0, 126, "Permission denied"
	case errors.Is(err, syscall.EAGAIN):
		return 0, 126, "Resource temporarily unavailable (the runtime's process limit)"
	}
	return 0, 126, err.Error()
}

// cmdCgroup places a command in the commands' cgroup as it is created.
// Mode "v2": descriptor 4 is the cgroup's directory (clone3 with
// CLONE_INTO_CGROUP). Mode "v1": descriptors 4 and 5 are the "tasks" files
// of the commands' and of the supervisor's pids cgroups; the forking thread
// alone moves into the first for the fork (a child is born in its parent
// thread's cgroup) and back. Mode "": no cgroup.
type cmdCgroup struct{ mode string }

func (c cmdCgroup) forkExec(file string, argv []string, attr *syscall.ProcAttr) (int, error) {
	switch c.mode {
	case "v2":
		sys := *attr.Sys
		sys.UseCgroupFD, sys.CgroupFD = true, 4
		a := *attr
		a.Sys = &sys
		return syscall.ForkExec(file, argv, &a)
	case "v1":
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := []byte(strconv.Itoa(unix.Gettid()))
		if _, err := syscall.Write(4, tid); err != nil {
			return 0, err
		}
		pid, err := syscall.ForkExec(file, argv, attr)
		_, _ = syscall.Write(5, tid)
		return pid, err
	}
	return syscall.ForkExec(file, argv, attr)
}

// lookPath resolves name like execvp against pathEnv (never the
// supervisor's own): a name containing '/' is taken relative to dir;
// otherwise the first regular file with an execute bit in a PATH entry
// (relative entries relative to dir). A name found but not executable is
// returned so that executing it fails with EACCES (126), as in a shell.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if filepath.IsAbs(name) {
			return name, nil
		}
		return filepath.Join(dir, name), nil
	}
	denied := ""
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
		if denied == "" {
			denied = p
		}
	}
	if denied != "" {
		return denied, nil
	}
	return "", syscall.ENOENT
}

// hasChildren reports whether the process has a child (running or not yet
// reaped): without one it has no descendant at all (a subreaper's
// descendants all hang below its children), and /proc need not be scanned.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, syscall.ECHILD)
}

// reapAll reaps every exited child without blocking.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if p <= 0 || err != nil {
			return
		}
	}
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}
