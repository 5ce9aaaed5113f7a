package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procParents reads every process's parent from /proc (pid → ppid). A
// process's /proc/<pid>/stat is readable whatever it did to itself
// (non-dumpable, another session), so nothing can hide from it.
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
		if len(f) < 2 {
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

// killDescendants sends SIGKILL to every process below root and returns
// how many it found. Killed processes' children are reparented to the
// nearest subreaper (root itself for a shim), so calling it again after
// reaping finds whatever was forked in between.
func killDescendants(root int) int {
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
