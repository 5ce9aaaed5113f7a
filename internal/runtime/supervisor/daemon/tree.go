package daemon

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procParents reads every live process's parent from /proc (pid → ppid);
// zombies are left out (dead already: they only wait to be reaped, and
// their children were reparented when they died). A process's
// /proc/<pid>/stat is readable whatever it did to itself (non-dumpable,
// another session), so nothing can hide from it.
func procParents() map[int]int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make(map[int]int, len(names))
	var buf [512]byte
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		fd, err := syscall.Open("/proc/"+n+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		k, _ := syscall.Read(fd, buf[:])
		_ = syscall.Close(fd)
		if k <= 0 {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces and parentheses.
		s := buf[:k]
		i := bytes.LastIndexByte(s, ')')
		if i < 0 || i+4 > len(s) {
			continue
		}
		f := bytes.Fields(s[i+1:])
		if len(f) < 2 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if pp, err := strconv.Atoi(string(f[1])); err == nil {
			out[pid] = pp
		}
	}
	return out
}

// descendants returns every process below root in parents.
func descendants(parents map[int]int, root int) []int {
	kids := map[int][]int{}
	for p, pp := range parents {
		kids[pp] = append(kids[pp], p)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// maxStopPasses bounds the passes killDescendants makes stopping a tree
// before it kills what it found.
const maxStopPasses = 64

// killDescendants ends every process below root and returns how many it
// found. It freezes the tree first: SIGSTOP to every descendant, pass after
// pass, until a pass finds no process it had not stopped (a stopped process
// cannot fork), then SIGKILL to all of them at once. Killing as it went
// would free the pids a fork bomb's running members fill again at once
// under a pids limit, so a scan could chase the bomb for minutes; stopped
// members keep theirs. Killed processes' children are reparented to the
// nearest subreaper (root itself for a shim), so calling it again after
// reaping finds whatever escaped.
func killDescendants(root int) int {
	stopped := map[int]bool{}
	for pass := 0; pass < maxStopPasses; pass++ {
		fresh := 0
		for _, p := range descendants(procParents(), root) {
			if !stopped[p] {
				_ = syscall.Kill(p, syscall.SIGSTOP)
				stopped[p] = true
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	ds := descendants(procParents(), root)
	for _, p := range ds {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return len(ds)
}

// signalDescendants sends sig to every process below root.
func signalDescendants(root int, sig syscall.Signal) {
	for _, p := range descendants(procParents(), root) {
		_ = syscall.Kill(p, sig)
	}
}
