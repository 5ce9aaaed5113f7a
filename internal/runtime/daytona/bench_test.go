package daytona

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func benchRuntime(b *testing.B, srv *fake.Server, files int) (*Runtime, string) {
	p := newProvider(b, srv, nil)
	dir := b.TempDir()
	for i := 0; i < files; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%40))
		_ = os.MkdirAll(sub, 0o755)
		_ = os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	spec := runtimetest.WorkspaceSpec("daytona", dir)
	spec.Workdir = fake.SandboxWorkspace
	spec.Mounts[0].Target = spec.Workdir
	rt, err := p.Create(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	return rt.(*Runtime), dir
}

// BenchmarkDaytonaExecTrue: one Exec of `true` (sync pass included) against
// BenchmarkRawToolboxExecute, one bare toolbox execute of `true`, same fake.
func BenchmarkDaytonaExecTrue(b *testing.B) {
	srv := newFake(b, fake.Options{})
	rt, _ := benchRuntime(b, srv, 10)
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if _, err := rt.Exec(context.Background(), sandboxapi.ExecRequest{Cmd: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-toolbox-execute", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := rt.run(context.Background(), "true"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplicaSync: an Exec after a one-file change on the host (it
// goes up), and an Exec whose command changes one file (it comes back), on
// a 10-, a 1,666- and a 10,000-file tree, in the same run: the pass's cost
// follows what changed, not the tree (docs/BENCHMARKS.md).
func BenchmarkReplicaSync(b *testing.B) {
	srv := newFake(b, fake.Options{})
	for _, n := range []int{10, 1666, 10000} {
		rt, dir := benchRuntime(b, srv, n)
		b.Run(fmt.Sprintf("files-%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				_ = os.WriteFile(filepath.Join(dir, "d00", "f0000.txt"), []byte(fmt.Sprintf("change %d\n", i)), 0o644)
				if _, err := rt.Exec(context.Background(), sandboxapi.ExecRequest{Cmd: []string{"true"}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("sandbox-change/files-%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				cmd := fmt.Sprintf("echo sandbox %d > d00/f0000.txt", i)
				if _, err := rt.Exec(context.Background(), sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", cmd}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
