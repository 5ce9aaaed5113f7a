package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
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

// engine runs the sandboxes' containers.
type engine struct {
	*remotefake.Docker
	bin string // the envd stand-in on the host
}

func newEngine(image, id, bin string) (*engine, error) {
	d, err := remotefake.NewDocker("e2bfake", image, id, labelFake)
	if err != nil {
		return nil, err
	}
	return &engine{Docker: d, bin: bin}, nil
}

// setup makes the sandbox user, its home and the workspace, then runs envd.
const setup = `grep -q '^user:' /etc/passwd || echo 'user:x:1000:1000:user:/home/user:/bin/sh' >> /etc/passwd
grep -q '^user:' /etc/group || echo 'user:x:1000:' >> /etc/group
mkdir -p /home/user /workspace && chown 1000:1000 /home/user /workspace
exec ` + envdPath + ` -socket ` + runDir + `/envd.sock -token-file ` + runDir + `/token -user user`

// create starts the container of sandbox id (egress: a network with a
// route out, else an internal one), waits for its envd and initializes it
// with env (initEnvd). It returns the container id and the host directory
// of envd's socket.
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
	hc := remotefake.SandboxHostConfig(netMode)
	hc.Mounts = []mount.Mount{
		{Type: mount.TypeBind, Source: e.bin, Target: envdPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: dir, Target: runDir},
	}
	cfg := &container.Config{
		Image: e.Image, User: "0:0", Env: vars,
		Entrypoint: []string{"/bin/sh", "-c", setup},
		Labels:     map[string]string{labelFake: e.ID, labelFake + ".sandbox": id},
	}
	resp, err := e.Client.ContainerCreate(ctx, cfg, hc, &network.NetworkingConfig{}, nil, "e2bfake-"+id)
	if err != nil {
		return "", "", err
	}
	if err := e.Client.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = e.Remove(context.Background(), resp.ID)
		return "", "", err
	}
	hcl := unixClient(filepath.Join(dir, "envd.sock"))
	for {
		r, err := hcl.Get("http://envd/health")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusNoContent {
				if err := initEnvd(ctx, hcl, env, token); err != nil {
					_ = e.Remove(context.Background(), resp.ID)
					return "", "", err
				}
				return resp.ID, dir, nil
			}
		}
		select {
		case <-ctx.Done():
			_ = e.Remove(context.Background(), resp.ID)
			return "", "", fmt.Errorf("envd did not start: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// initEnvd posts the sandbox's environment variables (a create's envVars)
// to envd's /init, as E2B's orchestrator initializes envd in every sandbox
// it starts: every process gets them.
func initEnvd(ctx context.Context, hcl *http.Client, env map[string]string, token string) error {
	body, err := json.Marshal(map[string]any{"envVars": env})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://envd/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	r, err := hcl.Do(req)
	if err != nil {
		return fmt.Errorf("envd /init: %w", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNoContent {
		return fmt.Errorf("envd /init: %s", r.Status)
	}
	return nil
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

// ensureDenyNetwork makes the network of sandboxes without egress.
func (e *engine) ensureDenyNetwork(ctx context.Context) error {
	return e.EnsureInternalNetwork(ctx, denyNetwork)
}

func (e *engine) pause(ctx context.Context, id string) error { return e.Client.ContainerPause(ctx, id) }

func (e *engine) unpause(ctx context.Context, id string) error {
	return e.Client.ContainerUnpause(ctx, id)
}

// env returns the container's environment.
func (e *engine) env(ctx context.Context, id string) ([]string, error) {
	ins, err := e.Client.ContainerInspect(ctx, id)
	if err != nil || ins.Config == nil {
		return nil, err
	}
	return ins.Config.Env, nil
}

// ip returns the container's address on its network ("" without one).
func (e *engine) ip(ctx context.Context, id string) string {
	ins, err := e.Client.ContainerInspect(ctx, id)
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
