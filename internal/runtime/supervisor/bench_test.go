package supervisor_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

// The hops of a command through a supervisor, each measured alone (a host
// supervisor, as the local runtime's; in bubblewrap the same program runs as
// the sandbox's init): BenchmarkControlRoundTrip is one request/response on
// a pooled control connection, BenchmarkRunTrue a whole foreground `true`
// (connect, start on a ready shim, the shim's fork/exec, exit, read to the
// end), BenchmarkRawForkExec the floor of the spawn itself.

func BenchmarkControlRoundTrip(b *testing.B) {
	c := benchServe(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Hello(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRunTrue(b *testing.B) {
	c := benchServe(b)
	ctx := context.Background()
	for b.Loop() {
		info, err := c.Run(ctx, supervisor.Spec{Argv: []string{"true"}, Env: env(), Dir: "/"}, nil)
		if err != nil || info.ExitCode != 0 {
			b.Fatalf("%v %+v", err, info)
		}
	}
}

func BenchmarkRawForkExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchServe(b *testing.B) *supervisor.Client {
	c, _ := serveTB(b)
	return c
}
