package fake

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Each sandbox of the fake is one container of Options.Image whose main
// process (under an init) is the envd stand-in, run as root and running
// commands as SandboxUser, like E2B's microVMs: so commands really run,
// isolated from the host and from each other.

// Sandbox user and paths inside every container.
const (
	SandboxUser = "user"
	SandboxHome = "/home/user"
	// SandboxWorkspace is a directory the sandbox user owns (in E2B's
	// templates the user may sudo to make one): runtimes use it as their workdir.
	SandboxWorkspace = "/workspace"
	labelFake        = "sandboxcore.e2bfake"
	denyNetwork      = "sandboxcore-e2bfake-noegress"
	envdPath         = "/.e2bfake/envd"
	runDir           = "/run/e2bfake"
)

type engine struct {
	cli   *client.Client
	image string
	id    string // this fake's id, on every container's label
	bin   string // the envd stand-in on the host
	netMu sync.Mutex
}

func newEngine(image, id, bin string) (*engine, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("e2bfake: no Docker daemon answers: %w", err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return nil, fmt.Errorf("e2bfake: image %s is not on the daemon (.ci/test-image.sh builds it): %w", image, err)
	}
	return &engine{cli: cli, image: image, id: id, bin: bin}, nil
}

// setup makes the sandbox user, its home and the workspace, then runs envd.
const setup = `grep -q '^user:' /etc/passwd || echo 'user:x:1000:1000:user:/home/user:/bin/sh' >> /etc/passwd
grep -q '^user:' /etc/group || echo 'user:x:1000:' >> /etc/group
mkdir -p /home/user /workspace && chown 1000:1000 /home/user /workspace
exec ` + envdPath + ` -socket ` + runDir + `/envd.sock -token-file ` + runDir + `/token -user user`

// create starts the container of sandbox id (egress: a network with a
// route out, else an internal one) and waits for its envd. It returns the
// container id and the host directory of envd's socket.
func (e *engine) create(ctx context.Context, tmp, id string, env map[string]string, egress bool, token string) (string, string, error) {
	dir := filepath.Join(tmp, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		return "", "", err
	}
	netMode := "bridge"
	if !egress {
		if err := e.ensureDenyNetwork(ctx); err != nil {
			return "", "", err
		}
		netMode = denyNetwork
	}
	vars := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	init := true
	pids := int64(4096)
	hc := &container.HostConfig{
		Init:        &init,
		NetworkMode: container.NetworkMode(netMode),
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"},
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   container.Resources{PidsLimit: &pids},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: e.bin, Target: envdPath, ReadOnly: true},
			{Type: mount.TypeBind, Source: dir, Target: runDir},
		},
	}
	cfg := &container.Config{
		Image: e.image, User: "0:0", Env: vars,
		Entrypoint: []string{"/bin/sh", "-c", setup},
		Labels:     map[string]string{labelFake: e.id, labelFake + ".sandbox": id},
	}
	resp, err := e.cli.ContainerCreate(ctx, cfg, hc, &network.NetworkingConfig{}, nil, "e2bfake-"+id)
	if err != nil {
		return "", "", err
	}
	if err := e.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = e.remove(context.Background(), resp.ID)
		return "", "", err
	}
	hcl := unixClient(filepath.Join(dir, "envd.sock"))
	for {
		r, err := hcl.Get("http://envd/health")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusNoContent {
				return resp.ID, dir, nil
			}
		}
		select {
		case <-ctx.Done():
			_ = e.remove(context.Background(), resp.ID)
			return "", "", fmt.Errorf("envd did not start: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var (
	transportsMu sync.Mutex
	transports   = map[string]*http.Transport{}
)

// unixClient reaches an envd socket (one connection pool per socket).
func unixClient(sock string) *http.Client {
	transportsMu.Lock()
	defer transportsMu.Unlock()
	t := transports[sock]
	if t == nil {
		t = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		}
		transports[sock] = t
	}
	return &http.Client{Transport: t}
}

// forgetSocket closes the connections to a removed sandbox's envd.
func forgetSocket(sock string) {
	transportsMu.Lock()
	defer transportsMu.Unlock()
	if t := transports[sock]; t != nil {
		t.CloseIdleConnections()
		delete(transports, sock)
	}
}

func (e *engine) ensureDenyNetwork(ctx context.Context) error {
	e.netMu.Lock()
	defer e.netMu.Unlock()
	if _, err := e.cli.NetworkInspect(ctx, denyNetwork, network.InspectOptions{}); err == nil {
		return nil
	}
	_, err := e.cli.NetworkCreate(ctx, denyNetwork, network.CreateOptions{
		Internal: true, Labels: map[string]string{labelFake: "network"},
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
	})
	if err != nil && !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	return nil
}

func (e *engine) pause(ctx context.Context, id string) error { return e.cli.ContainerPause(ctx, id) }

func (e *engine) unpause(ctx context.Context, id string) error {
	return e.cli.ContainerUnpause(ctx, id)
}

func (e *engine) remove(ctx context.Context, id string) error {
	err := e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// removeAll removes every container this fake made.
func (e *engine) removeAll(ctx context.Context) {
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return
	}
	for _, c := range list {
		if c.Labels[labelFake] == e.id {
			_ = e.remove(ctx, c.ID)
		}
	}
}

// env returns the container's environment.
func (e *engine) env(ctx context.Context, id string) ([]string, error) {
	ins, err := e.cli.ContainerInspect(ctx, id)
	if err != nil || ins.Config == nil {
		return nil, err
	}
	return ins.Config.Env, nil
}

// ip returns the container's address on its network ("" without one).
func (e *engine) ip(ctx context.Context, id string) string {
	ins, err := e.cli.ContainerInspect(ctx, id)
	if err != nil || ins.NetworkSettings == nil {
		return ""
	}
	for _, n := range ins.NetworkSettings.Networks {
		if n.IPAddress != "" {
			return n.IPAddress
		}
	}
	return ""
}
