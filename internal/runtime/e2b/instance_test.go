package e2b

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/e2bfake/fake"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestCommandsNeverOutliveTheInstance: E2B runs a sandbox at most its max
// instance length from its start, silently shortening a timeout that would
// reach past it and pausing the sandbox at its end
// (packages/api/internal/orchestrator/keep_alive.go:19-44 and 72-80,
// packages/api/internal/sandbox/store.go:80-84 of e2b-dev/infra @54693ff,
// which the stand-in copies). The runtime never asks past the end, runs a
// command only in an instance with room for its timeout — pausing and
// resuming the sandbox first when the current one has not — and refuses a
// timeout no instance can hold.
func TestCommandsNeverOutliveTheInstance(t *testing.T) {
	const maxLen = 15 * time.Second // guard 750 ms, collect 1.5 s
	srv := newFake(t, fake.Options{MaxInstanceLength: maxLen})
	p := newProvider(t, srv, func(o *Options) { o.MaxInstanceLength, o.Timeout = maxLen, 14*time.Second })
	ctx := context.Background()
	bare, wt := runtimetest.GitFixture(t)
	spec := gitSpec(bare, wt)
	rt, err := p.Create(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), spec.ID) })
	sb := sandboxOf(t, rt)
	started := func() time.Time {
		det, err := p.getSandbox(ctx, sb)
		require.NoError(t, err)
		require.NotNil(t, det)
		return det.StartedAt
	}
	exec := func(script string, timeoutS int) (sandboxapi.ExecResult, error) {
		return rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}, TimeoutS: timeoutS})
	}

	// Room in this instance: it runs there.
	first := started()
	res, err := exec("echo one", 2)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, first, started(), "no new instance")

	// Late in the instance, a command that would outlast it: the sandbox
	// gets a new instance first and the command runs whole in it.
	time.Sleep(time.Until(first.Add(9 * time.Second)))
	issued := time.Now()
	res, err = exec("sleep 5; echo two", 8)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	require.Equal(t, "two\n", string(res.Stdout))
	require.False(t, res.TimedOut)
	require.True(t, started().After(issued), "the command ran in a new instance")
	require.Zero(t, srv.AutoPauses(), "never paused under a command")
	require.Zero(t, srv.Shortened(), "never asked for a timeout past the instance's end")

	// A timeout no instance can hold is refused; nothing runs.
	_, err = exec("touch never", 14)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.Contains(t, err.Error(), "E2B_MAX_INSTANCE_LENGTH")
	res, err = exec("test ! -e never", 2)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
}

// TestMaxInstanceLengthIsChecked: the sandboxes' timeout cannot exceed the
// max instance length (E2B refuses a create asking for more: 400 "Timeout
// cannot be greater than N hours", packages/api/internal/handlers/
// timeout_helper.go:30-35 of e2b-dev/infra).
func TestMaxInstanceLengthIsChecked(t *testing.T) {
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	opts := func(mut func(*Options)) Options {
		o := Options{APIKey: "e2b_test_key", Deployment: "d", StateDir: t.TempDir(), Git: git}
		mut(&o)
		return o
	}
	p, err := New(opts(func(*Options) {}))
	require.NoError(t, err)
	require.Equal(t, DefaultMaxInstanceLength, p.opts.MaxInstanceLength)
	require.Equal(t, time.Minute, p.guard)
	require.Equal(t, 2*time.Minute, p.collect)
	_, err = New(opts(func(o *Options) { o.Timeout = 2 * time.Hour }))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a timeout past the Hobby cap")
	_, err = New(opts(func(o *Options) { o.Timeout, o.MaxInstanceLength = 2*time.Hour, 24*time.Hour }))
	require.NoError(t, err, "a Pro team")
	_, err = New(opts(func(o *Options) { o.MaxInstanceLength = 25 * time.Hour }))
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}
