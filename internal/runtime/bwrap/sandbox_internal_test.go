package bwrap

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// after returns what follows the first "--" of args (the sandbox's command).
func after(t *testing.T, args []string) []string {
	t.Helper()
	i := slices.Index(args, "--")
	require.GreaterOrEqual(t, i, 0, "a -- before the command")
	return args[i+1:]
}

func TestSandboxArgs(t *testing.T) {
	p := &Provider{}
	cfg := sandboxConfig{scratch: "/scratch/rt-1", workdir: "/workspace", cwd: "/workspace",
		mounts: []bindMount{{src: "/srv/w", target: "/workspace", rw: true}}}

	args := p.sandboxArgs("rt-1", cfg, sandboxapi.NetworkNone, "L1", &cgroupJoin{}, 6)
	require.Equal(t, 1, slices.Index(args[slices.Index(args, "--json-status-fd"):], "5"), "bwrap's status on descriptor 5")
	require.Equal(t, "6", args[slices.Index(args, "--seccomp")+1], "the seccomp filter on its descriptor")
	require.Less(t, slices.Index(args, "--seccomp"), slices.Index(args, "--"))
	require.Contains(t, args, "--disable-userns")
	require.Equal(t, "ALL", args[slices.Index(args, "--cap-drop")+1])
	require.NotContains(t, args, "--block-fd", "no cgroup to join")
	require.Contains(t, args, "--unshare-net")
	cmd := after(t, args)
	require.Equal(t, []string{"/proc/self/fd/4", "serve", "--ctl-fd", "3", "--runtime", "rt-1", "--layout", "L1"}, cmd[:8])
	require.NotContains(t, cmd, "--egress-socket")
	require.NotContains(t, cmd, "--cgroup")
	require.Equal(t, 1, slices.Index(cmd, "--id-prefix")-slices.Index(cmd, "--idle-exit")-1, "--idle-exit takes one value")

	// The limited network with an egress proxy, and a cgroup to join
	// through two descriptors.
	cfg.egressDir = "/egress/rt-1"
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	cj := &cgroupJoin{cg: &cgroup{}, blockR: r, blockW: w, files: []*os.File{r, w}}
	args = p.sandboxArgs("rt-1", cfg, sandboxapi.NetworkLimited, "L2", cj, 9)
	i := slices.Index(args, "--block-fd")
	require.Greater(t, i, 0)
	require.Equal(t, "6", args[i+1])
	require.Less(t, i, slices.Index(args, "--"), "--block-fd is bwrap's, before the command")
	cmd = after(t, args)
	j := slices.Index(cmd, "--egress-socket")
	require.Greater(t, j, 0)
	require.Equal(t, egressMount+"/"+egressSocket, cmd[j+1])
	k := slices.Index(cmd, "--cgroup-fds")
	require.Greater(t, k, 0)
	require.Equal(t, "7,8", cmd[k+1])
}

func TestCgroupForWithoutLimits(t *testing.T) {
	p := &Provider{}
	cj, err := p.cgroupFor("rt-1", sandboxConfig{}, nil)
	require.NoError(t, err)
	require.Nil(t, cj.cg, "no limits: no cgroup")
	require.Nil(t, cj.blockR, "no cgroup: the shims do not block")
	require.NotContains(t, p.sandboxArgs("rt-1", sandboxConfig{cwd: "/w"}, sandboxapi.NetworkNone, "L", cj, 6), "--block-fd")
}

func TestDefaultLimits(t *testing.T) {
	l, err := limitsOf(nil)
	require.NoError(t, err)
	require.Equal(t, limits{Pids: DefaultPidsLimit, MemoryMB: DefaultMemoryMB, DiskGB: DefaultDiskGB}, l, "memory, pids and disk are limited by default")
	l, err = limitsOf(&sandbox.ResourceHints{CPU: 0.5, MemoryMB: 64, Pids: 10, DiskGB: 3})
	require.NoError(t, err)
	require.Equal(t, limits{CPU: 0.5, MemoryMB: 64, Pids: 10, DiskGB: 3}, l)
	l, err = limitsOf(&sandbox.ResourceHints{CPU: 1})
	require.NoError(t, err)
	require.Equal(t, limits{CPU: 1, Pids: DefaultPidsLimit, MemoryMB: DefaultMemoryMB, DiskGB: DefaultDiskGB}, l)
	for _, bad := range []sandbox.ResourceHints{{MemoryMB: -1}, {DiskGB: -1}} {
		_, err = limitsOf(&bad)
		require.Error(t, err)
	}
	require.Equal(t, []string{"--file-size-limit", "3221225472"}, sandboxConfig{limits: limits{DiskGB: 3}}.fileSizeArgs())
	require.Nil(t, sandboxConfig{}.fileSizeArgs())
}
