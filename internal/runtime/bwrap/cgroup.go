package bwrap

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// DefaultPidsLimit is a sandbox's process limit when ResourceHints.Pids is
// zero (the Docker runtime's default too): a fork bomb stops there.
const DefaultPidsLimit = 4096

// limits are a sandbox's resource limits (RuntimeSpec.Resources).
type limits struct {
	CPU      float64 // cores; 0: none
	MemoryMB int64   // 0: none
	Pids     int64
	DiskGB   int64 // the worktree's and /tmp's quota in GiB (quota.go); 0: none
}

func (l limits) any() bool { return l.CPU > 0 || l.MemoryMB > 0 || l.Pids > 0 }

// DefaultMemoryMB is a sandbox's memory limit in MiB (all its network
// modes' sandboxes together, no swap beyond it) when ResourceHints.MemoryMB
// is zero: a runaway command is killed (exit 137) before it takes the host.
const DefaultMemoryMB = 4096

// limitsOf returns the limits of r: CPU as given, memory, pids and disk as
// given or DefaultMemoryMB, DefaultPidsLimit and DefaultDiskGB. A negative
// hint is an error.
func limitsOf(r *sandbox.ResourceHints) (limits, error) {
	l := limits{Pids: DefaultPidsLimit, MemoryMB: DefaultMemoryMB, DiskGB: DefaultDiskGB}
	if r == nil {
		return l, nil
	}
	if r.CPU < 0 || r.MemoryMB < 0 || r.Pids < 0 || r.DiskGB < 0 {
		return l, errors.New("negative resource hint")
	}
	l.CPU = r.CPU
	if r.MemoryMB > 0 {
		l.MemoryMB = r.MemoryMB
	}
	if r.Pids > 0 {
		l.Pids = r.Pids
	}
	if r.DiskGB > 0 {
		l.DiskGB = r.DiskGB
	}
	return l, nil
}

// cgroups creates one cgroup per sandbox below the worker's own cgroup:
// with cgroup v2 in <own>/<name>/<runtime id> (pids, memory and cpu
// controllers enabled on the way; when the worker's own cgroup holds
// processes, which cgroup v2 forbids for a cgroup whose children have
// controllers, the worker first moves itself into <own>/<name>-worker);
// with cgroup v1 in <mount of each controller>/<own>/<name>/<runtime id>.
// name is derived from the scratch directory, so two providers never share
// one. A nil *cgroups applies no limit.
type cgroups struct {
	v2     string            // parent directory (cgroup v2), or ""
	v1     map[string]string // controller → parent directory (cgroup v1)
	scheme string            // "cgroup v2" or "cgroup v1"
}

var neededControllers = []string{"pids", "memory", "cpu"}

// newCgroups finds a writable hierarchy with the pids, memory and cpu
// controllers; nil and the reason when there is none (not root and no
// delegated subtree, a read-only cgroupfs, controllers missing).
func newCgroups(scratch string) (*cgroups, string) {
	sum := sha256.Sum256([]byte(scratch))
	name := "sandboxcore-" + hex.EncodeToString(sum[:5])
	own, mounts := selfCgroups()
	var why []string
	if path, ok := own[""]; ok && mounts["cgroup2"] != "" {
		parent := filepath.Join(mounts["cgroup2"], path)
		dir, err := setupV2(parent, name)
		if err == nil {
			return &cgroups{v2: dir, scheme: "cgroup v2"}, ""
		}
		why = append(why, "cgroup v2: "+err.Error())
	} else {
		why = append(why, "cgroup v2: no unified hierarchy")
	}
	v1 := map[string]string{}
	for _, c := range neededControllers {
		mnt, path := mounts[c], own[c]
		if mnt == "" {
			why = append(why, "cgroup v1: no "+c+" controller")
			return nil, strings.Join(why, "; ")
		}
		dir := filepath.Join(mnt, path, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			why = append(why, fmt.Sprintf("cgroup v1: %s: %v", c, errText(err)))
			return nil, strings.Join(why, "; ")
		}
		v1[c] = dir
	}
	if mem := v1["memory"]; mem != "" {
		_ = os.WriteFile(filepath.Join(mem, "memory.use_hierarchy"), []byte("1"), 0)
	}
	return &cgroups{v1: v1, scheme: "cgroup v1"}, ""
}

// selfCgroups returns the worker's cgroup path per v1 controller (and ""
// for v2) and the mount point per controller ("cgroup2" for v2).
func selfCgroups() (own, mounts map[string]string) {
	own, mounts = map[string]string{}, map[string]string{}
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			parts := strings.SplitN(s.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[1] == "" {
				own[""] = parts[2]
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				own[c] = parts[2]
			}
		}
		_ = f.Close()
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			// id parent maj:min root mountpoint opts … - fstype source superopts
			l := s.Text()
			i := strings.Index(l, " - ")
			if i < 0 {
				continue
			}
			pre, post := strings.Fields(l[:i]), strings.Fields(l[i+3:])
			if len(pre) < 5 || len(post) < 3 || pre[3] != "/" {
				continue
			}
			switch post[0] {
			case "cgroup2":
				if mounts["cgroup2"] == "" {
					mounts["cgroup2"] = pre[4]
				}
			case "cgroup":
				for _, o := range strings.Split(post[2], ",") {
					if mounts[o] == "" {
						mounts[o] = pre[4]
					}
				}
			}
		}
		_ = f.Close()
	}
	return own, mounts
}

// setupV2 makes parent/name with the needed controllers enabled for its
// children and returns it.
func setupV2(parent, name string) (string, error) {
	ctrls, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return "", errors.New(errText(err))
	}
	have := strings.Fields(string(ctrls))
	for _, c := range neededControllers {
		if !contains(have, c) {
			return "", fmt.Errorf("the %s controller is not available in %s", c, parent)
		}
	}
	enable := func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids +memory +cpu"), 0)
	}
	if err := enable(parent); errors.Is(err, syscall.EBUSY) {
		// The worker's own cgroup holds processes: move the worker into a
		// leaf of its own first.
		leaf := filepath.Join(parent, name+"-worker")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return "", errors.New(errText(err))
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return "", errors.New(errText(err))
		}
		err = enable(parent)
		if err != nil {
			return "", errors.New(errText(err))
		}
	} else if err != nil {
		return "", errors.New(errText(err))
	}
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errors.New(errText(err))
	}
	if err := enable(dir); err != nil {
		return "", errors.New(errText(err))
	}
	return dir, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroup is one sandbox's cgroup (one directory per v1 controller). Its
// commands are born in the child cgroup "cmds" (pids controller), which has
// the pids limit: a fork bomb fills that one and cannot keep the supervisor
// or its shims from creating threads. The supervisor lives in
// the runtime's cgroup itself (v1) or in its child "infra" (v2, whose
// cgroups with children may hold no process). The memory and CPU limits
// are the runtime's, for all of it.
type cgroup struct {
	dirs []string // the runtime's directories (v1: pids, memory, cpu)
	v2   bool
	mem  string // directory of the memory controller
	cmds string // the commands' cgroup (pids controller)
	home string // where bwrap and the supervisor go (v2: infra)
}

// infraPids bounds the supervisor's and shims' own tasks beyond the
// commands' limit (the runtime cgroup's pids.max is the sum).
const infraPids = 512

func (m *cgroups) dirsFor(id string) (*cgroup, bool) {
	if m == nil {
		return nil, false
	}
	if m.v2 != "" {
		d := filepath.Join(m.v2, id)
		return &cgroup{dirs: []string{d}, v2: true, mem: d, cmds: filepath.Join(d, "cmds"), home: filepath.Join(d, "infra")}, true
	}
	cg := &cgroup{}
	for _, c := range neededControllers {
		cg.dirs = append(cg.dirs, filepath.Join(m.v1[c], id))
	}
	cg.mem = filepath.Join(m.v1["memory"], id)
	cg.cmds = filepath.Join(cg.dirs[0], "cmds")
	cg.home = cg.dirs[0]
	return cg, true
}

// existing returns runtime id's cgroup when it exists (a reattached sandbox).
func (m *cgroups) existing(id string) *cgroup {
	cg, ok := m.dirsFor(id)
	if !ok {
		return nil
	}
	if _, err := os.Stat(cg.dirs[0]); err != nil {
		return nil
	}
	return cg
}

// create makes runtime id's cgroup with limits l (a leftover one is
// emptied and reused).
func (m *cgroups) create(id string, l limits) (*cgroup, error) {
	cg, ok := m.dirsFor(id)
	if !ok {
		return nil, errors.New("no cgroup hierarchy")
	}
	for _, d := range cg.dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errors.New(errText(err))
		}
	}
	cg.killAll()
	w := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			return fmt.Errorf("%s: %s", file, errText(err))
		}
		return nil
	}
	var err error
	total := "max"
	if l.Pids > 0 {
		total = strconv.FormatInt(l.Pids+infraPids, 10)
	}
	if cg.v2 {
		d := cg.dirs[0]
		err = errors.Join(
			w(d, "cgroup.subtree_control", "+pids +memory +cpu"),
			w(d, "pids.max", total),
			w(d, "memory.max", limitOr(l.MemoryMB<<20, "max")),
			w(d, "cpu.max", cpuMax(l.CPU)),
		)
		if l.MemoryMB > 0 {
			_ = w(d, "memory.swap.max", "0") // absent without swap accounting
		}
		for _, sub := range []string{cg.home, cg.cmds} {
			if merr := os.MkdirAll(sub, 0o755); merr != nil {
				err = errors.Join(err, errors.New(errText(merr)))
			}
		}
		if err == nil {
			err = w(cg.cmds, "pids.max", limitOr(l.Pids, "max"))
		}
	} else {
		pids, mem, cpu := cg.dirs[0], cg.dirs[1], cg.dirs[2]
		memLimit := "-1"
		if l.MemoryMB > 0 {
			memLimit = strconv.FormatInt(l.MemoryMB<<20, 10)
		}
		quota := "-1"
		if l.CPU > 0 {
			quota = strconv.FormatInt(int64(l.CPU*100000), 10)
		}
		err = errors.Join(
			w(pids, "pids.max", total),
			w(mem, "memory.limit_in_bytes", memLimit),
			w(cpu, "cpu.cfs_period_us", "100000"),
			w(cpu, "cpu.cfs_quota_us", quota),
		)
		if _, serr := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); serr == nil && err == nil {
			_ = w(mem, "memory.memsw.limit_in_bytes", memLimit) // no swap beyond the memory limit
		}
		if merr := os.MkdirAll(cg.cmds, 0o755); merr != nil {
			err = errors.Join(err, errors.New(errText(merr)))
		} else if err == nil {
			err = w(cg.cmds, "pids.max", limitOr(l.Pids, "max"))
		}
	}
	if err != nil {
		_ = cg.remove()
		return nil, err
	}
	return cg, nil
}

func limitOr(v int64, none string) string {
	if v <= 0 {
		return none
	}
	return strconv.FormatInt(v, 10)
}

func cpuMax(cpu float64) string {
	if cpu <= 0 {
		return "max 100000"
	}
	return strconv.FormatInt(int64(cpu*100000), 10) + " 100000"
}

// add moves processes into the cgroup (every controller's directory; for
// v2 its "infra" child).
func (cg *cgroup) add(pids ...int) error {
	dirs := cg.dirs
	if cg.v2 {
		dirs = []string{cg.home}
	}
	for _, d := range dirs {
		for _, p := range pids {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(p)), 0); err != nil {
				return errors.New(errText(err))
			}
		}
	}
	return nil
}

// procs lists the processes in the cgroup and its children.
func (cg *cgroup) procs() []int {
	var out []int
	for _, d := range []string{cg.dirs[0], cg.cmds, cg.home} {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// killCommands kills every process of the commands' cgroup (the commands
// and background processes, not the supervisor): at once with cgroup v2's
// cgroup.kill, else by signalling them until none is left (a pass at most
// every 10 ms, for up to a second: the pids limit bounds what refills).
func (cg *cgroup) killCommands() {
	if cg.v2 && os.WriteFile(filepath.Join(cg.cmds, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for range 100 {
		b, err := os.ReadFile(filepath.Join(cg.cmds, "cgroup.procs"))
		if err != nil || len(strings.Fields(string(b))) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (cg *cgroup) killAll() {
	if cg.v2 {
		if os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	for _, p := range cg.procs() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// remove kills what is left in the cgroup and deletes it.
func (cg *cgroup) remove() error {
	if cg == nil {
		return nil
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		cg.killAll()
		err = nil
		subs := []string{cg.cmds}
		if cg.v2 {
			subs = append(subs, cg.home)
		}
		for _, d := range append(subs, cg.dirs...) {
			if rerr := syscall.Rmdir(d); rerr != nil && !errors.Is(rerr, syscall.ENOENT) {
				err = rerr
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// mode is how the supervisor places commands in the cgroup ("v1", "v2").
func (cg *cgroup) mode() string {
	if cg.v2 {
		return "v2"
	}
	return "v1"
}

// spawnFiles opens what the supervisor's shims need to create each command
// in the commands' cgroup (see supervisor: --cgroup): the cgroup's directory
// (v2), or the tasks files of the commands' and of the supervisor's pids
// cgroups (v1). The sandbox cannot open cgroupfs itself.
func (cg *cgroup) spawnFiles() ([]*os.File, error) {
	if cg.v2 {
		d, err := os.Open(cg.cmds)
		if err != nil {
			return nil, errors.New(errText(err))
		}
		return []*os.File{d}, nil
	}
	var out []*os.File
	for _, d := range []string{cg.cmds, cg.home} {
		f, err := os.OpenFile(filepath.Join(d, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			for _, o := range out {
				_ = o.Close()
			}
			return nil, errors.New(errText(err))
		}
		out = append(out, f)
	}
	return out, nil
}

// oomKills returns how many processes the memory limit has killed so far.
func (cg *cgroup) oomKills() int64 {
	if cg == nil {
		return 0
	}
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(cg.mem, file))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
