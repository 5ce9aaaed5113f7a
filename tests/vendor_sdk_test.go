package tests

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	daytonafake "github.com/sandboxcore/sandboxcore/internal/runtime/daytona/daytonafake/fake"
	e2bfake "github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
)

// A second client of each remote stand-in, written by no one here: the
// vendors' own TypeScript SDKs (tests/vendorsdk, pinned in its
// package-lock.json) run a scripted create → exec → upload/download →
// stop/pause → resume → delete against the fake Daytona and the fake E2B,
// and the stand-in must record no spec violation meanwhile. Where an SDK
// and a stand-in disagree, the stand-in is wrong (docs/DESIGN.md "The
// remote stand-ins"). TestE2BVendorSDK runs in make test-e2e,
// TestDaytonaVendorSDK in make test-e2e-daytona (the pattern ^TestDaytona).

// vendorSDKModules installs tests/vendorsdk's pinned npm packages once per
// test binary.
var vendorSDKModules = sync.OnceValue(func() error { return installNodeProject("vendorsdk") })

// runVendorScript runs node script in tests/vendorsdk with env added to an
// environment rid of any E2B_ or DAYTONA_ setting of the caller's (the
// SDKs read those), and checks that it printed "ok <step>" for each of
// steps, then "ok done".
func runVendorScript(t *testing.T, script string, env []string, steps ...string) {
	t.Helper()
	cmd := exec.Command("node", script)
	cmd.Dir = "vendorsdk"
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") && !strings.HasPrefix(kv, "DAYTONA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "node %s\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("node %s did not finish; stdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())
	}
	for _, step := range append(steps, "done") {
		assert.Contains(t, stdout.String(), "ok "+step+"\n", "step %q", step)
	}
}

// unavailable fails the test under CI=true (every dependency is installed
// there), else skips it: a stand-in could not start.
func unavailable(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s unavailable: %v", what, err)
}

// E2B's SDK (npm e2b) against the fake E2B: control plane and envd.
func TestE2BVendorSDK(t *testing.T) {
	requireNodeProject(t, vendorSDKModules)
	srv, err := e2bfake.New(e2bfake.Options{Logger: quiet})
	if err != nil {
		unavailable(t, "fake E2B", err)
	}
	_, err = srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	// The SDK sends envd's requests to https://{port}-{id}.{domain}, or
	// with its sandboxUrl option to one URL naming the sandbox in headers,
	// which the fake (plain HTTP on the loopback) routes by.
	runVendorScript(t, "e2b.mjs", []string{
		"E2B_API_URL=" + srv.APIURL(), "E2B_API_KEY=" + srv.APIKey(), "E2B_SANDBOX_URL=" + srv.APIURL(), "E2B_TEMPLATE=base",
	}, "create", "list", "exec", "exec background", "upload/download", "pause", "resume", "kill")
	assert.Empty(t, srv.Violations(), "spec violations during the E2B SDK's run")
	assert.Empty(t, srv.SandboxIDs(), "the SDK killed its sandbox")
}

// Daytona's SDK (npm @daytonaio/sdk) against the fake Daytona: API and toolbox.
func TestDaytonaVendorSDK(t *testing.T) {
	requireNodeProject(t, vendorSDKModules)
	srv, err := daytonafake.New(daytonafake.Options{Logger: quiet})
	if err != nil {
		unavailable(t, "fake Daytona", err)
	}
	_, err = srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	runVendorScript(t, "daytona.mjs", []string{"DAYTONA_API_URL=" + srv.APIURL(), "DAYTONA_API_KEY=" + srv.APIKey()},
		"create", "exec", "upload/download", "stop", "start", "delete")
	assert.Empty(t, srv.Violations(), "spec violations during the Daytona SDK's run")
}
