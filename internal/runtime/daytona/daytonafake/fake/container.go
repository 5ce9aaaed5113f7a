package fake

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
)

// Each sandbox of the fake is one container of Options.Image, the way a
// Daytona runner runs a sandbox: its main process idles under an init, the
// toolbox's commands are execs in it as the sandbox user (SandboxUID, home
// SandboxHome) — so commands really run, isolated from the host and from
// each other.

// Sandbox user and paths inside every container.
const (
	SandboxUser = "daytona"
	SandboxUID  = "1000:1000"
	SandboxHome = "/home/daytona"
	// SandboxWorkspace is a directory the sandbox user owns, as in Daytona's
	// default snapshot (whose user can also sudo): runtimes use it as their workdir.
	SandboxWorkspace = "/workspace"
	labelFake        = "sandboxcore.daytonafake"
	limitedNetwork   = "sandboxcore-daytonafake-limited"
)

// engine runs the sandboxes' containers.
type engine struct {
	*remotefake.Docker
}

func newEngine(image, id string) (*engine, error) {
	d, err := remotefake.NewDocker("daytonafake", image, id, labelFake)
	if err != nil {
		return nil, err
	}
	return &engine{Docker: d}, nil
}

type containerSpec struct {
	name     string
	env      map[string]string
	network  string // "none", "limited", "bridge"
	cpu      float64
	memoryGB int64
}

func (e *engine) create(ctx context.Context, s containerSpec) (string, error) {
	if s.network == "limited" {
		if err := e.ensureLimited(ctx); err != nil {
			return "", err
		}
		s.network = limitedNetwork
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + SandboxHome, "USER=" + SandboxUser}
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	hc := remotefake.SandboxHostConfig(s.network)
	if s.cpu > 0 {
		hc.NanoCPUs = int64(s.cpu * 1e9)
	}
	if s.memoryGB > 0 {
		hc.Memory = s.memoryGB << 30
	}
	cfg := &container.Config{
		Image:  e.Image,
		Cmd:    []string{"/bin/sh", "-c", "while :; do sleep 3600; done"},
		Env:    env,
		Labels: map[string]string{labelFake: e.ID},
	}
	resp, err := e.Client.ContainerCreate(ctx, cfg, hc, &network.NetworkingConfig{}, nil, s.name)
	if err != nil {
		return "", err
	}
	if err := e.Client.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return "", err
	}
	// The image's user, home and workspace, made once as root.
	setup := `grep -q '^daytona:' /etc/passwd || echo 'daytona:x:1000:1000:Daytona:/home/daytona:/bin/sh' >> /etc/passwd
grep -q '^daytona:' /etc/group || echo 'daytona:x:1000:' >> /etc/group
mkdir -p /home/daytona /workspace && chown 1000:1000 /home/daytona /workspace`
	if res, err := e.exec(ctx, resp.ID, execSpec{user: "0:0", cmd: []string{"/bin/sh", "-c", setup}}); err != nil || res.code != 0 {
		if err == nil {
			err = fmt.Errorf("setup exited %d: %s", res.code, res.stderr)
		}
		return "", err
	}
	return resp.ID, nil
}

// ensureLimited makes the network of "limited" sandboxes (no route out).
func (e *engine) ensureLimited(ctx context.Context) error {
	return e.EnsureInternalNetwork(ctx, limitedNetwork)
}

func (e *engine) start(ctx context.Context, id string) error {
	return e.Client.ContainerStart(ctx, id, container.StartOptions{})
}

func (e *engine) stop(ctx context.Context, id string) error {
	t := 2
	err := e.Client.ContainerStop(ctx, id, container.StopOptions{Timeout: &t})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

type execSpec struct {
	user  string
	cmd   []string
	env   []string
	dir   string
	stdin []byte
	// combined: stdout and stderr into one buffer, in order (the daemon's
	// /process/execute).
	combined bool
	// maxOut bounds each captured stream.
	maxOut int
}

type execResult struct {
	stdout, stderr []byte
	code           int
}

// exec runs one process in the container and waits for it (ctx bounds the
// wait; the process is not killed by ctx: callers kill what they must).
func (e *engine) exec(ctx context.Context, id string, s execSpec) (execResult, error) {
	if s.user == "" {
		s.user = SandboxUID
	}
	resp, err := e.Client.ContainerExecCreate(ctx, id, container.ExecOptions{
		User: s.user, Cmd: s.cmd, Env: s.env, WorkingDir: s.dir,
		AttachStdout: true, AttachStderr: true, AttachStdin: s.stdin != nil,
	})
	if err != nil {
		return execResult{}, err
	}
	hj, err := e.Client.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return execResult{}, err
	}
	defer hj.Close()
	if s.stdin != nil {
		go func() {
			_, _ = hj.Conn.Write(s.stdin)
			_ = hj.CloseWrite()
		}()
	}
	limit := s.maxOut
	if limit <= 0 {
		limit = 64 << 20
	}
	var out, errb bytes.Buffer
	var combined lockedBuf
	ow, ew := io.Writer(&capWriter{w: &out, n: limit}), io.Writer(&capWriter{w: &errb, n: limit})
	if s.combined {
		ow, ew = &capWriter{w: &combined, n: limit}, &capWriter{w: &combined, n: limit}
	}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(ow, ew, hj.Reader)
		done <- err
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return execResult{}, ctx.Err()
	}
	for {
		ins, err := e.Client.ContainerExecInspect(ctx, resp.ID)
		if err != nil {
			return execResult{}, err
		}
		if !ins.Running {
			res := execResult{stdout: out.Bytes(), stderr: errb.Bytes(), code: ins.ExitCode}
			if s.combined {
				res.stdout = combined.Bytes()
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			return execResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Bytes()
}

type capWriter struct {
	w io.Writer
	n int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.n > 0 {
		k := min(len(p), c.n)
		c.n -= k
		if _, err := c.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeFile puts data at the absolute path p, owned by the sandbox user,
// creating its directory as that user when missing.
func (e *engine) writeFile(ctx context.Context, id, p string, data []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: path.Base(p), Mode: 0o644, Size: int64(len(data)), Uid: 1000, Gid: 1000, ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	err := e.Client.CopyToContainer(ctx, id, path.Dir(p), bytes.NewReader(buf.Bytes()), container.CopyToContainerOptions{})
	if err != nil && (cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "no such file or directory")) {
		res, xerr := e.exec(ctx, id, execSpec{cmd: []string{"mkdir", "-p", "--", path.Dir(p)}})
		if xerr != nil {
			return xerr
		}
		if res.code != 0 {
			return fmt.Errorf("%w: %s", errPermission, strings.TrimSpace(string(res.stderr)))
		}
		err = e.Client.CopyToContainer(ctx, id, path.Dir(p), bytes.NewReader(buf.Bytes()), container.CopyToContainerOptions{})
	}
	return err
}

var (
	errNoFile     = errors.New("no such file or directory")
	errIsDir      = errors.New("path must be a file")
	errPermission = errors.New("permission denied")
)

// readFile returns the regular file at p (at most limit bytes).
func (e *engine) readFile(ctx context.Context, id, p string, limit int64) ([]byte, error) {
	rc, st, err := e.Client.CopyFromContainer(ctx, id, p)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, errNoFile
		}
		return nil, err
	}
	defer rc.Close()
	if st.Mode.IsDir() {
		return nil, errIsDir
	}
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err == io.EOF {
		return nil, errNoFile
	}
	if err != nil {
		return nil, err
	}
	if h.Typeflag == tar.TypeSymlink {
		// CopyFromContainer does not follow a final symlink: resolve it.
		target := h.Linkname
		if !strings.HasPrefix(target, "/") {
			target = path.Join(path.Dir(p), target)
		}
		return e.readFile(ctx, id, target, limit)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, errIsDir
	}
	if h.Size > limit {
		return nil, fmt.Errorf("file too large (%d bytes)", h.Size)
	}
	return io.ReadAll(io.LimitReader(tr, limit))
}

type fileStat struct {
	name       string
	size       int64
	mode       string
	perm       uint32
	isDir      bool
	modifiedAt time.Time
}

func (e *engine) stat(ctx context.Context, id, p string) (fileStat, error) {
	st, err := e.Client.ContainerStatPath(ctx, id, p)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fileStat{}, errNoFile
		}
		return fileStat{}, err
	}
	return fileStat{name: st.Name, size: st.Size, mode: st.Mode.String(), perm: uint32(st.Mode.Perm()), isDir: st.Mode.IsDir(), modifiedAt: st.Mtime}, nil
}
