package docker_test

import (
	"context"
	"io"
	"os/exec"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxcore/sandboxcore/internal/runtime/docker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Benchmarks for `make bench` (: Docker exec overhead
// against plain `docker exec`, and resume-after-hibernate time). They skip
// when Docker or the test image is unavailable (fail under CI=true).

func benchRuntime(b *testing.B) (context.Context, sandbox.Runtime, string) {
	b.Helper()
	ctx := context.Background()
	p := newProvider(b)
	spec := specFor(b.TempDir())
	spec.Network = sandboxapi.NetworkNone
	rt, err := p.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	if _, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}}); err != nil {
		b.Fatal(err)
	}
	return ctx, rt, docker.ContainerName(spec.ID)
}

// BenchmarkDockerExecTrue measures Runtime.Exec of `true` in a running
// container: exec create + attach + demultiplexed output + exec inspect.
func BenchmarkDockerExecTrue(b *testing.B) {
	ctx, rt, _ := benchRuntime(b)
	b.ResetTimer()
	for b.Loop() {
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
}

// BenchmarkRawDockerExecTrue measures plain `docker exec <container> true`
// (the docker CLI, a process per call) on the same kind of container.
func BenchmarkRawDockerExecTrue(b *testing.B) {
	bin, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("no docker CLI")
	}
	_, _, name := benchRuntime(b)
	b.ResetTimer()
	for b.Loop() {
		if out, err := exec.Command(bin, "exec", name, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v %s", err, out)
		}
	}
}

// BenchmarkRawAPIExecTrue measures the minimum the Engine API needs for the
// same call (exec create, attach, read to EOF, inspect) with the same client
// library, without the runtime's wrapper, caps and polling.
func BenchmarkRawAPIExecTrue(b *testing.B) {
	ctx, _, name := benchRuntime(b)
	cli := rawClient(b)
	b.ResetTimer()
	for b.Loop() {
		resp, err := cli.ContainerExecCreate(ctx, name, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		hj, err := cli.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_, _ = stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
		hj.Close()
		ins, err := cli.ContainerExecInspect(ctx, resp.ID)
		if err != nil || ins.Running || ins.ExitCode != 0 {
			b.Fatalf("inspect: %v %+v", err, ins)
		}
	}
}

// BenchmarkDockerResumeAfterHibernate measures the first Exec of `true`
// after Stop (the container is started again), excluding the Stop itself.
func BenchmarkDockerResumeAfterHibernate(b *testing.B) {
	ctx, rt, _ := benchRuntime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := rt.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
}
