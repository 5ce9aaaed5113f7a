package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
)

// BenchmarkRunTrueHops is BenchmarkRunTrue with a timestamp per hop,
// reported as medians: connect_us (dial the control socket), start_us (the
// start request until the command runs: a ready shim forked and executed
// it), exit_us (the first read until it returns with the exit and the end
// of both streams).
func BenchmarkRunTrueHops(b *testing.B) {
	dir := b.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := Listen(sock)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(supervisortest.Binary(b), "serve", "--ctl-fd", "3")
	cmd.ExtraFiles = []*os.File{ln}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_ = ln.Close()
	c := NewClient(sock)
	b.Cleanup(func() {
		_, _ = c.Shutdown(context.Background(), time.Second)
		_ = cmd.Wait()
	})
	ctx := context.Background()
	if _, err := c.Hello(ctx); err != nil {
		b.Fatal(err)
	}
	var dial, start, exit []float64
	for b.Loop() {
		t0 := time.Now()
		k, err := c.dial(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		resp, _, err := exchange(ctx, k, Request{Op: "start", Spec: &Spec{Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Foreground: true}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		for {
			r, data, err := exchange(ctx, k, Request{Op: "read", ID: resp.Info.ID, WaitMS: 30000}, nil)
			if err != nil {
				b.Fatal(err)
			}
			rr, _ := splitRead(r, data)
			if rr.Info.Exited && rr.Chunks[0].EOF && rr.Chunks[1].EOF {
				break
			}
		}
		t3 := time.Now()
		_ = k.Close()
		dial = append(dial, float64(t1.Sub(t0).Microseconds()))
		start = append(start, float64(t2.Sub(t1).Microseconds()))
		exit = append(exit, float64(t3.Sub(t2).Microseconds()))
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(dial), "connect_us")
	b.ReportMetric(med(start), "start_us")
	b.ReportMetric(med(exit), "exit_us")
}
