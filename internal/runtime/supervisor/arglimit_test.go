package supervisor_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

// A command whose arguments and environment are too large to start ends
// as execve's E2BIG does for one long argument — exit 126, "argument list
// too long" on stderr — whether the kernel refuses it or the spawn request
// does not fit the shim's control socket (many short arguments: ~800 KB of
// JSON). Before, the second case failed the start with an internal error
// ("write unixpacket: sendmsg: message too long"), which the runtimes
// report as a retryable SandboxUnavailable. The supervisor keeps serving.
func TestCommandTooLargeToStartExits126(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	many := []string{"sh", "-c", "echo ok"}
	for range 200_000 {
		many = append(many, "a")
	}
	for name, argv := range map[string][]string{
		"one long argument":        {"sh", "-c", "echo ok #" + strings.Repeat("x", 200<<10)},
		"many short arguments":     many,
		"a long environment value": {"sh", "-c", "echo ok"},
	} {
		e := env()
		if name == "a long environment value" {
			e = append(e, "BIG="+strings.Repeat("y", 300<<10))
		}
		var out [2]bytes.Buffer
		info, err := c.Run(ctx, supervisor.Spec{Argv: argv, Env: e, Dir: "/"}, func(i int, d []byte) { out[i].Write(d) })
		require.NoError(t, err, name)
		require.Equal(t, 126, info.ExitCode, name)
		require.Contains(t, out[1].String(), "argument list too long", name)
		require.Empty(t, out[0].String(), name)
	}
	var out bytes.Buffer
	info, err := c.Run(ctx, supervisor.Spec{Argv: []string{"sh", "-c", "echo still here"}, Env: env(), Dir: "/"}, func(i int, d []byte) { out.Write(d) })
	require.NoError(t, err)
	require.Zero(t, info.ExitCode)
	require.Equal(t, "still here\n", out.String())
}
