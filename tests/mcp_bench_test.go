package tests

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxcore/sandboxcore/internal/tools"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BenchmarkMCPShellTrue measures a sandbox_shell of `true` through
// `sandboxctl mcp` over stdio (the MCP Go SDK's client spawning the CLI)
// against the same exec (["/bin/sh","-c","true"], keep_output, the tool's
// default timeout and cap) sent through sandboxclient, interleaved in the
// same run on the same workspace. Reported: the p50 of each and the p50 of
// their difference per pair (added-p50-ms: what MCP adds).
func BenchmarkMCPShellTrue(b *testing.B) {
	bin := buildCLI(b)
	h := startHost(b, uniq(b, "bench-mcp"))
	ctx := context.Background()
	user := uniq(b, "u")
	req := editRequest(user, "p", "mcp", benchRepo(b))
	s, _, err := h.client.Acquire(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--repo", req.RepoURL, "--user", req.UserID, "--project", req.ProjectID, "--conversation", req.ConversationID)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddr, "SANDBOX_TASK_QUEUE="+h.Config.TaskQueue)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	viaMCP := func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tools.Shell, Arguments: map[string]any{"command": "true"}})
		if err != nil || res.IsError {
			b.Fatalf("sandbox_shell: %v %+v", err, res)
		}
	}
	exec := sandboxapi.ExecRequest{Cmd: []string{"/bin/sh", "-c", "true"}, TimeoutS: tools.DefaultShellTimeoutS,
		MaxOutputBytes: tools.DefaultShellOutputBytes, KeepOutput: true}
	viaClient := func() {
		res, err := s.Exec(ctx, exec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
	viaMCP() // warm: the first call acquires the workspace in the MCP process
	viaClient()
	var m, c, d []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		viaMCP()
		t1 := time.Now()
		viaClient()
		t2 := time.Now()
		m = append(m, ms(t1.Sub(t0)))
		c = append(c, ms(t2.Sub(t1)))
		d = append(d, ms(t1.Sub(t0)-t2.Sub(t1)))
	}
	b.StopTimer()
	b.ReportMetric(p50(m), "mcp-p50-ms")
	b.ReportMetric(p50(c), "client-p50-ms")
	b.ReportMetric(p50(d), "added-p50-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func p50(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
