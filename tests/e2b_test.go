package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestE2BPersistenceThroughTheService: a session on SANDBOX_RUNTIME_PROVIDER=e2b
// (the fake E2B, whose proxy cuts envd streams after 1.5 s): hibernate
// pauses the sandbox and keeps a background process and files; a command
// longer than the streams keeps all its output; a timeout kills its tree in
// the sandbox; a sandbox deleted behind the service's back comes back with
// the agent's uncommitted files.
func TestE2BPersistenceThroughTheService(t *testing.T) {
	srv, err := fake.New(fake.Options{StreamLimit: 1500 * time.Millisecond, Logger: quiet})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fake E2B: %v", err)
		}
		t.Skipf("fake E2B unavailable: %v", err)
	}
	_, err = srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.Close()
		assert.Empty(t, srv.Violations(), "spec violations")
	})
	h := startHost(t, "e2b", func(c *hostworker.Config) {
		c.RuntimeProvider = "e2b"
		c.E2B = hostworker.E2BConfig{APIURL: srv.APIURL(), APIKey: srv.APIKey(), Template: "base", Timeout: 10 * time.Minute}
	})
	require.Equal(t, "e2b", h.Activities.Runtimes.Kind())
	s, hd, _ := newEditSession(t, h)
	ctx := ctxFor(t, 4*time.Minute)
	sh := func(script string, timeout int) sandboxapi.ExecResult {
		t.Helper()
		res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: timeout})
		require.NoError(t, err)
		return res
	}

	res := sh(`echo work > work.txt; setsid sh -c 'echo $$ > /tmp/bg.pid; while :; do sleep 0.2; done' </dev/null >/dev/null 2>&1 & sleep 0.3; cat /tmp/bg.pid`, 60)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	pid := strings.TrimSpace(string(res.Stdout))
	ids := srv.SandboxIDs()
	require.Len(t, ids, 1)

	hib, err := s.Hibernate(ctx)
	require.NoError(t, err)
	assert.True(t, hib.Stopped)
	assert.Equal(t, "paused", srv.State(ids[0]), "hibernate = pause")
	res = sh(`kill -0 "$(cat /tmp/bg.pid)" && cat /tmp/bg.pid work.txt`, 60)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Equal(t, pid+"\nwork\n", string(res.Stdout), "the background process and the files survived the pause")
	assert.Equal(t, ids, srv.SandboxIDs(), "resumed, not recreated")

	res = sh(`for i in 1 2 3 4; do echo tick $i; sleep 1; done`, 60)
	require.Equal(t, 0, res.ExitCode)
	assert.Equal(t, "tick 1\ntick 2\ntick 3\ntick 4\n", string(res.Stdout), "no output lost across stream cuts")

	start := time.Now()
	res = sh(`(sleep 5; echo late > late.txt) & while :; do sleep 0.2; done`, 2)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 124, res.ExitCode)
	assert.Less(t, time.Since(start), 20*time.Second)

	require.True(t, srv.Kill(ids[0]))
	res = sh(`sleep 4; cat work.txt; test ! -e late.txt && echo no-late; git status --porcelain`, 60)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Equal(t, "work\nno-late\n?? work.txt\n", string(res.Stdout), "recreated with the agent's files; the timed-out tree never wrote")
	assert.NotEqual(t, ids, srv.SandboxIDs())
	b, err := os.ReadFile(filepath.Join(hd.LocalPath, "work.txt"))
	require.NoError(t, err)
	assert.Equal(t, "work\n", string(b))
}
