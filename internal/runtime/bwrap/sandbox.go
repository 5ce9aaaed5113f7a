package bwrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// IdleExit is how long a sandbox with no process, no record of one and no
// control connection lives on (its worker may be gone for good); the next
// command builds a new one.
const IdleExit = 15 * time.Minute

// Sandbox start and stop bounds.
const (
	// startTimeout bounds building a sandbox until its supervisor answers.
	startTimeout = 30 * time.Second
	// stopGrace is how long a stopping supervisor waits for killed trees.
	stopGrace = 5 * time.Second
)

// egressMount is where a limited sandbox sees its runtime's egress
// directory, and egressSocket the proxy's socket in it.
const (
	egressMount  = "/.sandboxcore/egress"
	egressSocket = "egress.sock"
)

// sandboxProc is one of a runtime's long-lived sandboxes (one per network
// mode its commands use): bwrap with the supervisor as the init of its pid
// namespace.
type sandboxProc struct {
	client *supervisor.Client
	mode   sandboxapi.Network
	layout string // layoutOf(cfg, mode)
	base   string // cfg.base
	// done is closed when bwrap exits; nil for a sandbox this process
	// reattached to (started by an earlier worker).
	done chan struct{}
	cg   *cgroup // nil: no resource limits
}

// alive reports whether bwrap is known to run (always true for a
// reattached sandbox: its failures show on use).
func (sb *sandboxProc) alive() bool {
	if sb == nil {
		return false
	}
	if sb.done == nil {
		return true
	}
	select {
	case <-sb.done:
		return false
	default:
		return true
	}
}

// ctlPath is a runtime's control file with suffix (".archive" the
// processes of stopped sandboxes) in the provider's control directory,
// which no sandbox sees.
func (p *Provider) ctlPath(id, suffix string) string { return filepath.Join(p.ctl, id+suffix) }

// modePath is a control file of the runtime's sandbox of network mode
// (".sock" the control socket, ".log" the supervisor's stderr, ".pid" its
// host pid and start time).
func (p *Provider) modePath(id string, mode sandboxapi.Network, suffix string) string {
	return p.ctlPath(id, "."+string(mode)+suffix)
}

// baseLayoutOf hashes everything all of a runtime's sandboxes are built
// from (mounts, identity, limits, the supervisor binary), so that sandboxes
// built from another one are replaced, all together (they share a cgroup).
func (p *Provider) baseLayoutOf(cfg sandboxConfig) string {
	h := sha256.New()
	for _, a := range p.args(cfg, nil, true, sandboxapi.NetworkNone) {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	_, filter, _ := seccompFilter()
	fmt.Fprintf(h, "%v|%v|%s|%d|%v|%s", cfg.cred, cfg.idmap, p.supHash, supervisor.Version, cfg.limits, filter)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// layoutOf hashes the base layout and the sandbox of network mode.
func (p *Provider) layoutOf(cfg sandboxConfig, mode sandboxapi.Network) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|", cfg.base, mode)
	for _, a := range p.args(cfg, nil, true, mode) {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// startSandbox builds the sandbox of network mode of runtime id and waits
// until its supervisor answers. shared is the runtime's cgroup when another
// of its sandboxes runs (this one joins it), nil to create it. Errors wrap
// sandboxapi.ErrRuntimeUnavailable (with bwrap's own message when it could not
// build the sandbox).
func (p *Provider) startSandbox(ctx context.Context, id string, cfg sandboxConfig, mode sandboxapi.Network, shared *cgroup) (*sandboxProc, error) {
	layout := p.layoutOf(cfg, mode)
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	fail := func(format string, args ...any) (*sandboxProc, error) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap: runtime %s: "+format, append([]any{id}, args...)...)
	}
	if cfg.egressDirOf(mode) != "" {
		if err := p.attachEgress(id, cfg, mode); err != nil {
			return fail("egress proxy: %v", err)
		}
	}
	sock := p.modePath(id, mode, ".sock")
	ln, err := supervisor.Listen(sock)
	if err != nil {
		return fail("control socket: %v", err)
	}
	defer ln.Close()
	exe, err := os.OpenFile(p.sup, unixOPath, 0)
	if err != nil {
		return fail("supervisor binary: %v", err)
	}
	defer exe.Close()
	logf, err := os.OpenFile(p.modePath(id, mode, ".log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fail("log: %v", err)
	}
	defer logf.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		return fail("pipe: %v", err)
	}
	defer stR.Close()
	filter, err := seccompFile()
	if err != nil {
		return fail("%v", err)
	}
	defer filter.Close()
	// A root worker's sandbox is built from idmapped mounts staged for
	// it, released once it holds its own (the deferred call runs after
	// bootSandbox, built or not).
	st, staged, err := p.stage(id, cfg)
	defer st.release()
	if err != nil {
		return fail("%v", err)
	}
	cj, err := p.cgroupFor(id, cfg, shared)
	if err != nil {
		return fail("%v", err)
	}
	defer cj.closeFiles()

	staged.cwd = staged.workdir
	// Descriptors 3, 4, 5 (then 6, 7, 8 with a cgroup), and last the
	// seccomp filter: see sandboxArgs.
	files := []*os.File{ln, exe, stW}
	if cj.blockR != nil {
		files = append(files, cj.blockR)
		files = append(files, cj.files...)
	}
	files = append(files, filter)
	cmd := exec.Command(p.bin, p.sandboxArgs(id, staged, mode, layout, cj, 2+len(files))...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = files
	// Its own session and no parent-death signal: the sandbox, its
	// background processes and their output outlive a worker killed with
	// SIGKILL (or its whole process group); a restarted worker reattaches
	// through the control socket.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cfg.cred}
	err = cmd.Start()
	_ = stW.Close()
	if cj.blockR != nil {
		_ = cj.blockR.Close()
		defer cj.blockW.Close()
	}
	if err != nil {
		cj.remove()
		return fail("start bwrap: %v", err)
	}
	sb := &sandboxProc{client: supervisor.NewClient(sock), mode: mode, layout: layout, base: cfg.base, done: make(chan struct{}), cg: cj.cg}
	go func() {
		_ = cmd.Wait()
		close(sb.done)
	}()
	return p.bootSandbox(ctx, id, cmd, sb, stR, cj, fail)
}

// bootSandbox follows the sandbox sb that bwrap (cmd, started) is
// building until its supervisor answers: the host pid of its init read
// from bwrap's status (stR), the init and bwrap moved into the cgroup of
// cj, the pid file written. A failure kills what was started and removes
// a cgroup created for it; when bwrap itself failed, its error is its log
// (sandboxapi.ErrRuntimeUnavailable).
func (p *Provider) bootSandbox(ctx context.Context, id string, cmd *exec.Cmd, sb *sandboxProc, stR *os.File, cj *cgroupJoin,
	fail func(format string, args ...any) (*sandboxProc, error)) (*sandboxProc, error) {
	mode := sb.mode
	bwrapFailed := func() (*sandboxProc, error) {
		select {
		case <-sb.done:
		case <-time.After(2 * time.Second):
		}
		msg, _ := os.ReadFile(p.modePath(id, mode, ".log"))
		cj.remove()
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "bubblewrap could not build the %s sandbox of runtime %s: %s",
			mode, id, clipN(strings.TrimSpace(string(msg)), 400))
	}
	// bwrap reports the host pid of the sandbox's init first.
	initPid, err := readChildPid(stR)
	if err != nil {
		_ = cmd.Process.Kill()
		return bwrapFailed()
	}
	if cj.cg != nil {
		if err := cj.admit(cmd.Process.Pid, initPid); err != nil {
			_ = syscall.Kill(initPid, syscall.SIGKILL)
			_ = cmd.Process.Kill()
			if startTime(initPid) == "" {
				return bwrapFailed() // bwrap gave up while setting up
			}
			<-sb.done
			cj.remove()
			return fail("cgroup: %v", err)
		}
	}
	_ = writePidFile(p.modePath(id, mode, ".pid"), initPid)
	return awaitSupervisor(ctx, sb, initPid, fail, bwrapFailed)
}

// sandboxArgs is bwrap's command line for the sandbox of network mode of
// runtime id: the long-lived layout of cfg (Provider.args), bwrap's status
// on descriptor 5, and the supervisor (descriptor 4) serving the control
// socket on descriptor 3 for layout; with a cgroup to join (cj.blockR set),
// the shims block on descriptor 6 until the sandbox's init is in it and
// move themselves in through descriptors 7 (and 8); in the limited network
// the supervisor forwards to the egress socket. filterFD is the descriptor
// of the seccomp filter (DeniedSyscalls), loaded last, so that it holds the
// supervisor and every command.
func (p *Provider) sandboxArgs(id string, cfg sandboxConfig, mode sandboxapi.Network, layout string, cj *cgroupJoin, filterFD int) []string {
	args := p.args(cfg, nil, true, mode)
	args = args[: len(args)-1 : len(args)-1] // before "--"
	// Few threads: under a pids limit every thread counts.
	args = append(args, "--json-status-fd", "5", "--setenv", "GOMAXPROCS", "2", "--seccomp", strconv.Itoa(filterFD))
	if cj.blockR != nil {
		// The shims move themselves into the commands' cgroup through this
		// descriptor (opened here: the sandbox cannot open cgroupfs).
		args = append(args, "--block-fd", "6")
	}
	args = append(args, "--", "/proc/self/fd/4", "serve", "--ctl-fd", "3", "--runtime", id, "--layout", layout,
		"--buffer", strconv.Itoa(sandboxapi.ProcessBufferBytes), "--max-procs", strconv.Itoa(sandboxapi.MaxProcesses),
		"--idle-exit", IdleExit.String(), "--id-prefix", supervisor.IDPrefix(mode))
	args = append(args, cfg.fileSizeArgs()...)
	if cfg.egressDirOf(mode) != "" {
		args = append(args, "--egress-socket", egressMount+"/"+egressSocket)
	}
	if len(cj.files) > 0 {
		fds := []string{"7", "8"}[:len(cj.files)]
		args = append(args, "--cgroup", cj.cg.mode(), "--cgroup-fds", strings.Join(fds, ","))
	}
	return args
}

// cgroupJoin is how a new sandbox enters its runtime's cgroup: cg (nil
// without limits or without a cgroup hierarchy the worker can write), the
// pipe the sandbox's shims block on until its init is in cg, and the
// cgroup descriptors the shims move themselves in through.
type cgroupJoin struct {
	cg, shared     *cgroup
	blockR, blockW *os.File
	files          []*os.File
}

// cgroupFor prepares the cgroup a new sandbox of runtime id joins: shared
// when another of its sandboxes runs, else one created for cfg.limits;
// none without limits or cgroups, or when creating it fails (logged: the
// limits are then not applied). Errors ("pipe: …", "cgroup: …") remove a
// cgroup this call created.
func (p *Provider) cgroupFor(id string, cfg sandboxConfig, shared *cgroup) (*cgroupJoin, error) {
	cj := &cgroupJoin{shared: shared}
	if !cfg.limits.any() || p.cgroups == nil {
		return cj, nil
	}
	cj.cg = shared
	if cj.cg == nil {
		cg, err := p.cgroups.create(id, cfg.limits)
		if err != nil {
			p.log.Warn("runtime resource limits not applied", "id", id, "error", err)
			return cj, nil
		}
		cj.cg = cg
	}
	var err error
	if cj.blockR, cj.blockW, err = os.Pipe(); err != nil {
		cj.remove()
		return nil, fmt.Errorf("pipe: %v", err)
	}
	if cj.files, err = cj.cg.spawnFiles(); err != nil {
		_ = cj.blockR.Close()
		_ = cj.blockW.Close()
		cj.remove()
		return nil, fmt.Errorf("cgroup: %v", err)
	}
	return cj, nil
}

// admit moves bwrap (pid) and the sandbox's init into the cgroup, then
// unblocks the shims waiting on the block pipe.
func (cj *cgroupJoin) admit(pid, initPid int) error {
	if err := cj.cg.add(pid, initPid); err != nil {
		return err
	}
	_, err := cj.blockW.Write([]byte{1})
	return err
}

// remove removes the cgroup when this sandbox created it (never a shared one).
func (cj *cgroupJoin) remove() {
	if cj.cg != nil && cj.cg != cj.shared {
		_ = cj.cg.remove()
	}
}

// closeFiles closes the cgroup descriptors (bwrap holds its own copies once started).
func (cj *cgroupJoin) closeFiles() {
	for _, f := range cj.files {
		_ = f.Close()
	}
}

// awaitSupervisor waits until sb's supervisor answers Hello for its layout.
// bwrap ending first is failed(); ctx ending kills the sandbox's init and
// is fail's error, and so is a supervisor answering for another layout.
func awaitSupervisor(ctx context.Context, sb *sandboxProc, initPid int,
	fail func(format string, args ...any) (*sandboxProc, error), failed func() (*sandboxProc, error)) (*sandboxProc, error) {
	for {
		hctx, hcancel := context.WithTimeout(ctx, time.Second)
		h, err := sb.client.Hello(hctx)
		hcancel()
		if err == nil {
			if h.Layout != sb.layout {
				return fail("the supervisor answers for another layout")
			}
			return sb, nil
		}
		select {
		case <-sb.done:
			return failed()
		case <-ctx.Done():
			_ = syscall.Kill(initPid, syscall.SIGKILL)
			return fail("the supervisor did not answer: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// readChildPid reads bwrap's first JSON status line, {"child-pid": N, …}.
func readChildPid(r io.Reader) (int, error) {
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for len(buf) < 4096 {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := strings.Index(string(buf), `"child-pid":`); i >= 0 {
			rest := strings.TrimLeft(string(buf[i+len(`"child-pid":`):]), " ")
			end := strings.IndexAny(rest, ",}")
			if end > 0 {
				return strconv.Atoi(strings.TrimSpace(rest[:end]))
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no child-pid in bwrap's status")
}

// attachSandbox returns the live sandbox of network mode of runtime id
// started by an earlier worker when it answers for layout; one built from
// another layout is shut down. nil when there is none.
func (p *Provider) attachSandbox(ctx context.Context, id string, mode sandboxapi.Network, layout, base string, archive *supervisor.Archive) *sandboxProc {
	sock := p.modePath(id, mode, ".sock")
	if _, err := os.Lstat(sock); err != nil {
		return nil
	}
	c := supervisor.NewClient(sock)
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := c.Hello(hctx)
	switch {
	case err != nil:
		if !supervisor.IsUnreachable(err) {
			p.killInit(id, mode) // alive but not answering
		}
		_ = os.Remove(sock)
		return nil
	case h.Runtime != id || h.Layout != layout || h.Version != supervisor.Version:
		p.log.Info("replacing a runtime sandbox built from another layout", "id", id, "network", mode)
		p.shutdown(ctx, id, mode, &sandboxProc{client: c}, archive)
		return nil
	}
	p.log.Info("reattached to a running runtime sandbox", "id", id, "network", mode)
	return &sandboxProc{client: c, mode: mode, layout: layout, base: base, cg: p.cgroups.existing(id)}
}

// retireLegacy shuts down a sandbox an earlier version left at the
// runtime's mode-less control socket (archiving its processes).
func (p *Provider) retireLegacy(ctx context.Context, id string, archive *supervisor.Archive) {
	sock := p.ctlPath(id, ".sock")
	if _, err := os.Lstat(sock); err != nil {
		return
	}
	sb := &sandboxProc{client: supervisor.NewClient(sock)}
	sctx, cancel := context.WithTimeout(ctx, stopGrace+5*time.Second)
	defer cancel()
	if finals, err := sb.client.Shutdown(sctx, stopGrace); err == nil && archive != nil {
		_ = archive.Add(finals)
	}
	sb.client.Close()
	for _, s := range []string{".sock", ".log", ".pid"} {
		_ = os.Remove(p.ctlPath(id, s))
	}
}

// attachEgress serves runtime id's egress endpoint of network mode (limited
// or default) in its directory (cfg.egressDirOf; 0700, owned by the
// sandbox's user) with cfg's allow-list: limited reaches only the list,
// default every public destination besides (egress.Policy.AnyPublic).
func (p *Provider) attachEgress(id string, cfg sandboxConfig, mode sandboxapi.Network) error {
	dir := cfg.egressDirOf(mode)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if cfg.cred != nil && !cfg.idmap { // idmapped: root's, shown as the sandbox's
		if err := os.Chown(dir, int(cfg.cred.Uid), int(cfg.cred.Gid)); err != nil {
			return err
		}
	}
	pol := egress.Policy{WorkspaceID: cfg.workspaceID, RuntimeID: id, Allow: cfg.allow}
	if mode == sandboxapi.NetworkDefault {
		pol.RuntimeID, pol.AnyPublic = id+defaultSuffix, true
	}
	return p.egress.Attach(pol, filepath.Join(dir, egressSocket))
}

// detachEgress stops serving runtime id's egress endpoints of the modes
// above keep (the widest mode the runtime's policy allows; "" or none:
// every one) and removes their directories.
func (p *Provider) detachEgress(id string, keep sandboxapi.Network) {
	if p.egress == nil || sandboxapi.ValidateID("runtime id", id) != nil {
		return
	}
	if keep != sandboxapi.NetworkLimited && keep != sandboxapi.NetworkDefault {
		p.egress.Detach(id)
		_ = os.RemoveAll(filepath.Join(p.egressRoot, id))
	}
	if keep != sandboxapi.NetworkDefault {
		p.egress.Detach(id + defaultSuffix)
		_ = os.RemoveAll(filepath.Join(p.egressRoot, id+defaultSuffix))
	}
}

// shutdown stops a runtime's sandbox of network mode: the supervisor kills
// every process (exit reason runtime_stopped) and hands back the background
// ones, which go to archive (nil: dropped); then the sandbox ends. A
// supervisor that does not answer is killed. It returns once the sandbox
// is gone (bounded).
func (p *Provider) shutdown(ctx context.Context, id string, mode sandboxapi.Network, sb *sandboxProc, archive *supervisor.Archive) {
	sctx, cancel := context.WithTimeout(ctx, stopGrace+5*time.Second)
	defer cancel()
	finals, err := sb.client.Shutdown(sctx, stopGrace)
	if err != nil && !supervisor.IsUnreachable(err) && !errors.Is(err, io.EOF) {
		p.log.Warn("runtime supervisor did not shut down: killing it", "id", id, "error", err)
	}
	if archive != nil {
		if aerr := archive.Add(finals); aerr != nil {
			p.log.Warn("runtime process archive not written", "id", id, "error", aerr)
		}
	}
	if sb.done != nil {
		select {
		case <-sb.done:
		case <-time.After(2 * time.Second):
			p.killInit(id, mode)
			<-sb.done
		}
	} else if err != nil {
		p.killInit(id, mode)
	}
	sb.client.Close()
	_ = os.Remove(p.modePath(id, mode, ".sock"))
	_ = os.Remove(p.modePath(id, mode, ".pid"))
}

// killInit kills the init of the runtime's sandbox of network mode recorded
// in its pid file when it is still the same process (pid and start time).
func (p *Provider) killInit(id string, mode sandboxapi.Network) {
	b, err := os.ReadFile(p.modePath(id, mode, ".pid"))
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	pid, _ := strconv.Atoi(f[0])
	if pid > 0 && startTime(pid) == f[1] {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func writePidFile(path string, pid int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+" "+startTime(pid)+"\n"), 0o600)
}

// startTime returns field 22 of /proc/<pid>/stat (start time in ticks), ""
// when the process does not exist.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// removeControl deletes every control file of runtime id.
func (p *Provider) removeControl(id string) {
	for _, s := range []string{".sock", ".log", ".pid", ".archive", ".archive.tmp"} {
		_ = os.Remove(p.ctlPath(id, s))
	}
	for _, m := range sandboxapi.NetworkModes {
		for _, s := range []string{".sock", ".log", ".pid"} {
			_ = os.Remove(p.modePath(id, m, s))
		}
	}
}

// stage returns cfg with every bind source (the scratch /tmp, the spec's
// mounts, the egress directory) replaced by an idmapped mount of it staged
// for one sandbox start of runtime id, when cfg.idmap; else cfg as it is
// and no staging. The caller releases the staging (nil-safe) once bwrap
// has built the sandbox or failed.
func (p *Provider) stage(id string, cfg sandboxConfig) (*staging, sandboxConfig, error) {
	if !cfg.idmap || p.idmap == nil {
		return nil, cfg, nil
	}
	st, err := p.idmap.begin(id)
	if err != nil {
		return nil, cfg, err
	}
	out := cfg
	if out.scratch, err = p.idmap.mount(st, cfg.scratch, false); err != nil {
		return st, cfg, err
	}
	out.mounts = make([]bindMount, len(cfg.mounts))
	for i, m := range cfg.mounts {
		out.mounts[i] = m
		if out.mounts[i].src, err = p.idmap.mount(st, m.src, !m.rw); err != nil {
			return st, cfg, err
		}
	}
	for _, d := range []*string{&out.egressDir, &out.egressDefault} {
		if *d == "" {
			continue
		}
		if _, serr := os.Stat(*d); serr == nil {
			if *d, err = p.idmap.mount(st, *d, true); err != nil {
				return st, cfg, err
			}
		}
	}
	return st, out, nil
}
