package docker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestContainerNetwork(t *testing.T) {
	spec := sandbox.RuntimeSpec{ID: "rt-1"}
	mode, policy, err := containerNetwork(spec, "")
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkLimited, policy, `"" is limited`)
	require.Equal(t, sandboxapi.NetworkLimited, mode, `"" mode is the policy`)

	spec.Network = sandboxapi.NetworkDefault
	mode, _, err = containerNetwork(spec, sandboxapi.NetworkNone)
	require.NoError(t, err)
	require.Equal(t, sandboxapi.NetworkNone, mode, "a narrower mode than the policy")

	spec.Network = sandboxapi.NetworkNone
	_, _, err = containerNetwork(spec, sandboxapi.NetworkDefault)
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "a mode above the policy")

	spec.Network = "host"
	_, _, err = containerNetwork(spec, "")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	spec.Network, spec.NetworkAllow = sandboxapi.NetworkLimited, []string{"*.*.*"}
	_, _, err = containerNetwork(spec, "")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a malformed allow-list")
}

func TestContainerResources(t *testing.T) {
	res, err := containerResources(nil)
	require.NoError(t, err)
	require.Equal(t, int64(DefaultPidsLimit), *res.PidsLimit)
	require.Zero(t, res.Memory)
	require.Zero(t, res.NanoCPUs)

	res, err = containerResources(&sandbox.ResourceHints{CPU: 1.5, MemoryMB: 512, Pids: 64})
	require.NoError(t, err)
	require.Equal(t, int64(1_500_000_000), res.NanoCPUs)
	require.Equal(t, int64(512<<20), res.Memory)
	require.Equal(t, res.Memory, res.MemorySwap, "no swap beyond the memory limit")
	require.Equal(t, int64(64), *res.PidsLimit)

	for _, h := range []sandbox.ResourceHints{{CPU: -1}, {MemoryMB: -1}, {Pids: -1}, {DiskGB: -1}} {
		_, err := containerResources(&h)
		require.ErrorContains(t, err, "negative resource hint", "%+v", h)
	}
}

func TestContainerLabels(t *testing.T) {
	spec := sandbox.RuntimeSpec{ID: "rt-1", WorkspaceID: "ws-1", Workdir: "/workspace",
		Labels:       map[string]string{"team": "a", LabelSpecHash: "forged", LabelManagedBy: "someone-else"},
		NetworkAllow: []string{"example.com"}}
	labels, err := containerLabels(spec, sandboxapi.NetworkNone)
	require.NoError(t, err)
	require.Equal(t, "a", labels["team"])
	require.Equal(t, ManagedByValue, labels[LabelManagedBy], "the package's own labels win")
	require.Equal(t, "rt-1", labels[LabelRuntime])
	require.Equal(t, "ws-1", labels[LabelWorkspace])
	require.Equal(t, "none", labels[LabelNetwork])
	require.NotContains(t, labels, LabelSpecHash, "a spec cannot bring its own hash")
	var stored sandbox.RuntimeSpec
	require.NoError(t, json.Unmarshal([]byte(labels[LabelSpec]), &stored))
	require.Equal(t, "/workspace", stored.Workdir)
	require.Nil(t, stored.Labels)
	require.Nil(t, stored.NetworkAllow, "the allow-list is the egress proxy's, never a container's")
	require.Equal(t, "forged", spec.Labels[LabelSpecHash], "the spec's own map is not changed")
}

func TestContainerMountsAndHash(t *testing.T) {
	p := &Provider{sup: "/opt/sandbox-supervisor"}
	mounts, entry, proxyEnv := p.containerMounts("rt-1", sandboxapi.NetworkLimited, []runspec.Bind{
		{Source: "/srv/w", Target: "/workspace", Writable: true}, {Source: "/srv/c", Target: "/srv/c"}})
	require.Len(t, mounts, 4, "the binds, the supervisor and /tmp; no egress socket without a proxy")
	require.False(t, mounts[0].ReadOnly)
	require.True(t, mounts[1].ReadOnly)
	require.Equal(t, SupervisorPath, mounts[2].Target)
	require.True(t, mounts[2].ReadOnly)
	require.Equal(t, "/tmp", mounts[3].Target)
	require.Equal(t, TmpVolume("rt-1"), mounts[3].Source)
	require.Equal(t, []string{SupervisorPath, "serve"}, entry[:2])
	require.NotContains(t, entry, "--egress-socket")
	require.Nil(t, proxyEnv)

	cfg := &container.Config{Image: "img", Labels: map[string]string{"a": "b"}}
	host := &container.HostConfig{Mounts: mounts}
	h1, err := specHash(cfg, host)
	require.NoError(t, err)
	require.Len(t, h1, 24)
	h2, _ := specHash(cfg, host)
	require.Equal(t, h1, h2)
	cfg.Image = "other"
	h3, _ := specHash(cfg, host)
	require.NotEqual(t, h1, h3)
}

func TestExecEndFinish(t *testing.T) {
	end := func(ctx context.Context) (*execEnd, *int) {
		done := make(chan struct{})
		close(done)
		closed := 0
		return &execEnd{ctx: ctx, out: procexec.NewOutput(1<<10, nil), cmd: "tool", copyDone: done, closeConn: func() { closed++ }}, &closed
	}
	e, closed := end(context.Background())
	res, err := e.finish(3)
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, 1, *closed, "the connection is closed")

	e, _ = end(context.Background())
	e.timedOut = true
	res, err = e.finish(137)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, _ = end(ctx)
	e.cancelled, e.timedOut = true, true
	_, err = e.finish(137)
	require.Error(t, err, "a caller that gave up is interrupted, whatever else happened")
}
