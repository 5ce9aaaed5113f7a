package bwrap

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls are the system calls every sandbox's seccomp filter refuses
// with EPERM (docs/SECURITY.md "What each runtime isolates"), in the spirit
// of Docker's default profile: what Docker allows only with a capability a
// sandbox never has, or refuses outright — kernel keyrings, modules, kexec,
// mounts and the new mount API, namespaces, BPF, perf events, userfaultfd,
// io_uring (a path around this filter), clocks, swap, reboot, accounting,
// quotas, raw I/O ports, handle-based opens (a way around mount confinement),
// the kernel log. Names the machine's architecture does not have are
// skipped. Every other system call of the native ABI is allowed; calls of
// another ABI (32-bit x86 on amd64, x32) are refused with ENOSYS.
var DeniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
	"delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
	"io_uring_setup", "ioperm", "iopl", "kexec_file_load", "kexec_load", "keyctl",
	"lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at",
	"nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root",
	"quotactl", "quotactl_fd", "reboot", "request_key", "setns", "settimeofday",
	"swapoff", "swapon", "_sysctl", "sysfs", "syslog", "umount2", "unshare",
	"uselib", "userfaultfd", "ustat", "vhangup",
}

// FallocateModeAllowed is the one fallocate mode the seccomp filter lets
// through: punching a hole (FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE),
// which frees space. Every other mode reserves blocks at once, faster than
// the disk quota's measurement follows and, with FALLOC_FL_KEEP_SIZE, past
// the file size limit; it fails with EOPNOTSUPP, which programs take as "no
// preallocation here" (glibc's posix_fallocate then writes the blocks, as
// on file systems without fallocate) — docs/SECURITY.md "Resource limits
// (bubblewrap)".
const FallocateModeAllowed = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE

// argLow is the offset in struct seccomp_data of the low 32 bits of
// system call argument i (each argument is 64 bits wide, after nr, arch and
// instruction_pointer: 16 bytes).
func argLow(i uint32) uint32 {
	off := 16 + 8*i
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 { // big-endian
		off += 4
	}
	return off
}

var (
	seccompOnce sync.Once
	seccompProg []byte
	seccompSum  string
	seccompErr  error
)

// seccompFilter returns the sandboxes' filter as the raw struct sock_filter
// array bwrap's --seccomp reads, and a short hash of it (part of a
// sandbox's layout: a changed filter rebuilds sandboxes).
func seccompFilter() ([]byte, string, error) {
	seccompOnce.Do(func() {
		seccompProg, seccompErr = assembleSeccomp()
		if seccompErr == nil {
			sum := sha256.Sum256(seccompProg)
			seccompSum = hex.EncodeToString(sum[:6])
		}
	})
	return seccompProg, seccompSum, seccompErr
}

func assembleSeccomp() ([]byte, error) {
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	var names []string
	for _, n := range DeniedSyscalls {
		if _, ok := native.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Names: names, Action: seccomp.ActionErrno}},
	}
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	// The library lets a call of another architecture through to its
	// default action (allow): refuse those before its program runs. Then
	// fallocate, unless it only punches a hole (FallocateModeAllowed).
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
	if nr, ok := native.SyscallNames["fallocate"]; ok {
		prog = append(prog,
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 3},
			bpf.LoadAbsolute{Off: argLow(1), Size: 4}, // mode
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: FallocateModeAllowed, SkipTrue: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP)},
		)
	}
	prog = append(prog, body...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	var buf bytes.Buffer
	for _, ins := range raw {
		// struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; } in
		// the machine's byte order.
		_ = binary.Write(&buf, binary.NativeEndian, ins.Op)
		buf.WriteByte(ins.Jt)
		buf.WriteByte(ins.Jf)
		_ = binary.Write(&buf, binary.NativeEndian, ins.K)
	}
	return buf.Bytes(), nil
}

// seccompFile returns a pipe's read end holding the filter, for bwrap's
// --seccomp (it reads to the end). The caller closes it.
func seccompFile() (*os.File, error) {
	prog, _, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// The filter (a few KiB) fits the pipe's buffer: the write never blocks.
	_, err = w.Write(prog)
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}
