package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseServe(t *testing.T) {
	o, err := parseServe([]string{"--ctl-fd", "3", "--runtime", "rt-1", "--cgroup", "v2", "--cgroup-fds", "7,8", "--idle-exit", "15m"})
	require.NoError(t, err)
	require.Equal(t, 3, o.ctlFD)
	require.Equal(t, "rt-1", o.runtime)
	require.Equal(t, []int{7, 8}, o.cgFDs)
	require.Equal(t, 15*time.Minute, o.idleExit)
	require.Equal(t, DefaultBufferBytes, o.buffer)
	require.Equal(t, "proc-", o.idPrefix)

	o, err = parseServe([]string{"--listen-abstract", "sbx", "--cgroup-fds", "x"})
	require.NoError(t, err, "--cgroup-fds is read only with --cgroup v1 or v2")
	require.Nil(t, o.cgFDs)

	for _, args := range [][]string{
		nil,
		{"--ctl-fd", "3", "--listen-abstract", "sbx"},
		{"--bogus"},
	} {
		_, err := parseServe(args)
		require.ErrorContains(t, err, "one of --ctl-fd or --listen-abstract is required", "%q", args)
	}
	_, err = parseServe([]string{"--ctl-fd", "3", "--cgroup", "v1", "--cgroup-fds", "7,x"})
	require.ErrorContains(t, err, "--cgroup-fds")
}
