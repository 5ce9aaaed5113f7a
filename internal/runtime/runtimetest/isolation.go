package runtimetest

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (s *suite) envIsolation(t *testing.T) {
	const secretName = "RUNTIMETEST_WORKER_SECRET"
	const secretValue = "sk-runtimetest-5f1c0ffee"
	t.Setenv(secretName, secretValue)
	ctx, _, rt := s.setup(t, func(sp *sandbox.RuntimeSpec) {
		sp.Env = map[string]string{"RUNTIMETEST_SPEC": "from-spec", "RUNTIMETEST_BOTH": "spec"}
	})
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"RUNTIMETEST_REQ": "from-req", "RUNTIMETEST_BOTH": "req"}})
	requireExit(t, res, 0)
	out := string(res.Stdout)
	require.NotContains(t, out, secretValue, "the worker's environment leaked into the runtime")
	require.NotContains(t, out, secretName, "the worker's environment leaked into the runtime")
	lines := strings.Split(out, "\n")
	require.Contains(t, lines, "RUNTIMETEST_SPEC=from-spec")
	require.Contains(t, lines, "RUNTIMETEST_REQ=from-req")
	require.Contains(t, lines, "RUNTIMETEST_BOTH=req", "ExecRequest.Env wins over RuntimeSpec.Env")
	hasPath := false
	for _, l := range lines {
		hasPath = hasPath || strings.HasPrefix(l, "PATH=/")
	}
	require.True(t, hasPath, "PATH is set")
	// The documented base (docs/RUNTIMES.md "Runtime environment").
	require.Contains(t, lines, "LANG=C.UTF-8")
	require.Contains(t, lines, "TERM=dumb")
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(`case "$HOME" in /*) ;; *) exit 3;; esac; touch "$HOME/.runtimetest-home" && echo "$PATH"`),
		Env: map[string]string{"PATH": "/runtimetest/bin:/usr/bin:/bin"}})
	requireExit(t, res, 0)
	require.Equal(t, "/runtimetest/bin:/usr/bin:/bin\n", string(res.Stdout), "a command's env sets PATH too; HOME is an absolute, writable directory")
}

// netProbeScript tries to open a TCP connection to 127.0.0.1:$1 with whatever
// tool the runtime has; it exits 99 when it has none.
const netProbeScript = `port=$1
if command -v bash >/dev/null 2>&1; then
	exec bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' bash "$port"
elif command -v nc >/dev/null 2>&1; then
	exec nc -z -w 3 127.0.0.1 "$port"
elif command -v python3 >/dev/null 2>&1; then
	exec python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3)' "$port"
elif command -v curl >/dev/null 2>&1; then
	exec curl -s -m 3 -o /dev/null "http://127.0.0.1:$port/"
elif command -v wget >/dev/null 2>&1; then
	exec wget -q -T 3 -O /dev/null "http://127.0.0.1:$port/"
fi
exit 99`

// listen opens a loopback listener on the host and counts accepted connections.
func listen(t *testing.T) (port string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

func (s *suite) networkIsolation(t *testing.T) {
	env := s.newEnv(t)
	isolated := env.Provider.Capabilities().Isolated
	switch {
	case isolated && s.opts.SkipNetworkIsolation != "":
		t.Fatalf("provider %s reports Isolated=true: it must pass network isolation, not skip it (%s)", env.Provider.Kind(), s.opts.SkipNetworkIsolation)
	case !isolated && s.opts.SkipNetworkIsolation == "":
		t.Fatalf("provider %s reports Isolated=false and cannot block the network: set Options.SkipNetworkIsolation to say why", env.Provider.Kind())
	case !isolated:
		t.Skip(s.opts.SkipNetworkIsolation)
	}
	ctx, _, rt := s.create(t, env, func(sp *sandbox.RuntimeSpec) { sp.Network = sandboxapi.NetworkNone })
	port, accepted := listen(t)
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(netProbeScript, port), TimeoutS: 30})
	require.NoError(t, err)
	require.NotEqual(t, 99, res.ExitCode, "no network probe tool (bash, nc, python3, curl or wget) in the runtime")
	require.NotEqual(t, 0, res.ExitCode, "a connection to 127.0.0.1:%s succeeded with network none", port)
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, accepted.Load(), "the host's loopback listener accepted a connection from a network-none runtime")
}
