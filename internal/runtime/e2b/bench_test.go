package e2b

import (
	"context"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BenchmarkE2BExecTrue: one Exec of `true` (replica pass included) against
// raw-envd-start, one bare process.Process/Start of `true` followed to its
// end, on the same fake and sandbox.
func BenchmarkE2BExecTrue(b *testing.B) {
	srv := newFake(b, fake.Options{})
	p := newProvider(b, srv, nil)
	dir := b.TempDir()
	spec := runtimetest.WorkspaceSpec("e2b", dir)
	spec.Workdir = fake.SandboxWorkspace
	spec.Mounts[0].Target = spec.Workdir
	ctx := context.Background()
	rt, err := p.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if _, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	env, err := rt.(*Runtime).ensure(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("raw-envd-start", func(b *testing.B) {
		for b.Loop() {
			if code, _, err := env.run(ctx, "true"); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
	})
}
