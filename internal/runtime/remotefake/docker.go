package remotefake

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Docker is the Docker daemon a fake runs its sandboxes on: one container
// of Image per sandbox, each labelled Label=ID so that the fake removes
// what it made and nothing else.
type Docker struct {
	// Client is the daemon's client.
	Client *client.Client
	// Image is the sandboxes' image (never pulled).
	Image string
	// ID is this fake's id, the value of Label on every container it makes.
	ID string
	// Label is the fake's container label ("sandboxcore.daytonafake", …).
	Label string
	netMu sync.Mutex
}

// NewDocker connects to the daemon of the environment (DOCKER_HOST, …) and
// checks that it answers and holds image; name ("daytonafake", …) prefixes
// the errors. Errors: no client, no daemon answering within 10 s, image
// missing (.ci/test-image.sh builds sandboxcore-test:latest).
func NewDocker(name, image, id, label string) (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("%s: no Docker daemon answers: %w", name, err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return nil, fmt.Errorf("%s: image %s is not on the daemon (.ci/test-image.sh builds it): %w", name, image, err)
	}
	return &Docker{Client: cli, Image: image, ID: id, Label: label}, nil
}

// SandboxHostConfig is the host configuration of every sandbox container:
// an init as PID 1, the network mode netMode, every capability dropped but
// those a sandbox user's commands and a root setup need (chown, file
// access, kill, setuid/setgid), no new privileges, at most 4096 processes.
func SandboxHostConfig(netMode string) *container.HostConfig {
	init := true
	pids := int64(4096)
	return &container.HostConfig{
		Init:        &init,
		NetworkMode: container.NetworkMode(netMode),
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"},
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   container.Resources{PidsLimit: &pids},
	}
}

// EnsureInternalNetwork creates the Docker network name when missing: an
// internal one (no route out) whose containers cannot reach each other
// (inter-container communication off). One made meanwhile by another
// process counts as made.
func (d *Docker) EnsureInternalNetwork(ctx context.Context, name string) error {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if _, err := d.Client.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		return nil
	}
	_, err := d.Client.NetworkCreate(ctx, name, network.CreateOptions{
		Internal: true, Labels: map[string]string{d.Label: "network"},
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
	})
	if err != nil && !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	return nil
}

// Remove removes container id and its volumes, running or not; a missing
// one is no error.
func (d *Docker) Remove(ctx context.Context, id string) error {
	err := d.Client.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// RemoveAll removes every container labelled with this fake's ID
// (failures ignored: it runs when the fake closes).
func (d *Docker) RemoveAll(ctx context.Context) {
	list, err := d.Client.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return
	}
	for _, c := range list {
		if c.Labels[d.Label] == d.ID {
			_ = d.Remove(ctx, c.ID)
		}
	}
}
