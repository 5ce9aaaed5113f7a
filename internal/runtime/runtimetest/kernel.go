package runtimetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// KernelInterfaces are the host kernel's settings and triggers no command
// of an isolated runtime may open for writing (docs/SECURITY.md "What each
// runtime isolates"): sysctls (a core_pattern or modprobe path the kernel
// runs as root in the host's namespaces), the SysRq trigger, interrupt
// affinities, the uevent helper, binfmt_misc, power states, and the raw
// memory and kernel-log devices. A missing path passes.
var KernelInterfaces = []string{
	"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/hostname",
	"/proc/sys/vm/drop_caches", "/proc/sys/fs/binfmt_misc/register", "/proc/sys/net/ipv4/ip_forward",
	"/proc/sysrq-trigger", "/proc/irq/default_smp_affinity", "/proc/bus/pci/devices",
	"/sys/kernel/uevent_helper", "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state",
	"/sys/fs/cgroup/cgroup.procs", "/dev/kmsg", "/dev/mem", "/dev/port",
}

// kernelProbeScript opens each argument for appending (never writing a
// byte) and prints "writable <path>" for each that opened; then lists every
// file under the kernel's settings trees that access(2) calls writable.
const kernelProbeScript = `for f in "$@"; do
  [ -e "$f" ] || continue
  if (exec 3>>"$f") 2>/dev/null; then echo "writable $f"; fi
done
for d in /proc/sys /proc/irq /proc/bus /proc/fs /sys/kernel /sys/fs /sys/power /sys/module /sys/firmware; do
  [ -d "$d" ] && find "$d" -xdev -type f -writable 2>/dev/null | sed 's/^/writable /'
done
exit 0`

// kernelInterfacesReadOnly checks, in every network mode, that no command
// can open a kernel interface for writing: the sandbox's user is not the
// host's root, and /proc/sys and its neighbours are read-only.
func (s *suite) kernelInterfacesReadOnly(t *testing.T) {
	if !s.newEnv(t).Provider.Capabilities().Isolated {
		t.Skip("not an isolated runtime: its commands are host processes of the worker's user")
	}
	for _, mode := range sandboxapi.NetworkModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx, _, rt := s.setup(t, func(sp *sandbox.RuntimeSpec) { sp.Network = mode })
			res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(kernelProbeScript, KernelInterfaces...), TimeoutS: 60})
			requireExit(t, res, 0)
			out := strings.TrimSpace(string(res.Stdout))
			require.Empty(t, out, "kernel interfaces a command of network %s could open for writing", mode)
		})
	}
}
