package bwrap

import (
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// args returns bwrap's arguments up to and including "--" for cfg's sandbox
// of network mode; the command follows. env is the complete environment. A
// long-lived sandbox (the supervisor's) runs its command as the pid
// namespace's init and does not die with the worker. Modes: none, a new
// network namespace (loopback only); limited, the same with the runtime's
// egress directory mounted read-only at egressMount (the supervisor's
// forwarder reaches the proxy through it); default, the same with its own
// egress directory (every public destination).
func (p *Provider) args(cfg sandboxConfig, env []string, long bool, mode sandboxapi.Network) []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		// No user namespace inside (a kernel attack surface, and a way to
		// regain capabilities over one's own namespaces), no capability.
		"--disable-userns", "--cap-drop", "ALL",
		"--new-session", "--hostname", "sandbox", "--clearenv",
	}
	if long {
		a = append(a, "--as-pid-1")
	} else {
		a = append(a, "--die-with-parent")
	}
	// Every mode has a network namespace of its own: never the host's,
	// where the worker's, Temporal's and the Web UI's ports listen.
	a = append(a, "--unshare-net")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--proc", "/proc")
	// The kernel's settings and triggers under /proc, read-only whoever
	// the sandbox's user is (bwrap covers them only when they are writable
	// to it while it builds the sandbox). The sysctls shown are still the
	// reader's own namespaces'.
	for _, k := range procCovered {
		if _, err := os.Lstat(k); err == nil {
			a = append(a, "--ro-bind", k, k)
		}
	}
	// /dev/shm: a tmpfs of ShmBytes (the memory it holds counts toward
	// the memory limit too, but not where there is no cgroup); /dev itself
	// read-only (a tmpfs of half the machine's memory otherwise; its
	// device nodes and /dev/pts are mounts of their own and stay usable).
	a = append(a, "--dev", "/dev", "--perms", "1777", "--size", strconv.Itoa(ShmBytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--bind", cfg.scratch, "/tmp")
	var visible []string
	for _, ro := range p.roPaths {
		fi, err := os.Lstat(ro)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(ro); err == nil {
				a = append(a, "--symlink", target, ro)
			}
		default:
			a = append(a, "--ro-bind", ro, ro)
			visible = append(visible, ro)
		}
	}
	var remount []string // read-only once the spec's mounts below them exist
	var maskedDirs []string
	for _, h := range p.hidden {
		if !under(h, visible) || under(h, maskedDirs) { // inside a masked directory: gone already
			continue
		}
		fi, err := os.Lstat(h)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", h)
			remount = append(remount, "--remount-ro", h)
			maskedDirs = append(maskedDirs, h)
		default:
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	if !under("/var", visible) {
		a = append(a, "--symlink", "../tmp", "/var/tmp")
	}
	for _, m := range cfg.mounts {
		if m.rw {
			a = append(a, "--bind", m.src, m.target)
		} else {
			a = append(a, "--ro-bind", m.src, m.target)
		}
	}
	if dir := cfg.egressDirOf(mode); dir != "" {
		a = append(a, "--ro-bind", dir, egressMount)
	}
	a = append(a, remount...)
	a = append(a, "--remount-ro", "/", "--chdir", cfg.cwd, "--")
	return a
}

// under reports whether p is one of roots or below one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
