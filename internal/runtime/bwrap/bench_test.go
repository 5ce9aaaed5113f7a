package bwrap_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/runtime/bwrap"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BenchmarkBwrapExecTrue measures Runtime.Exec of `true`: a request to the
// runtime's long-lived sandbox, whose supervisor spawns it on a ready shim.
func BenchmarkBwrapExecTrue(b *testing.B) {
	p := newProvider(b, bwrap.Options{})
	spec := specFor(b.TempDir())
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	for b.Loop() {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
}

// BenchmarkRawForkExec is the floor: fork/exec of `true` from the test
// process.
func BenchmarkRawForkExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawBwrapTrue measures a minimal plain `bwrap --unshare-all
// --ro-bind / / true` for comparison.
func BenchmarkRawBwrapTrue(b *testing.B) {
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("no bwrap")
	}
	for b.Loop() {
		if out, err := exec.Command(bin, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v %s", err, out)
		}
	}
}
