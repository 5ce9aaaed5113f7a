package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"
)

// The toolbox daemon's endpoints, run in the sandbox's container with the
// semantics of Daytona's daemon (apps/daemon/pkg/toolbox at v0.190.0):
// /process/execute pipes the command to the stdin of the daemon's shell
// (toolboxShell: zsh in Daytona's default snapshot and in the test image)
// in a new process group, returns the combined output and kills the group
// on timeout (408); the file endpoints act as the sandbox user.

func (s *Server) handleToolbox(c *call) {
	s.mu.Lock()
	b := s.sandboxes[c.sandboxID]
	var cid, state string
	if b != nil {
		cid, state = b.container, b.state
		b.lastActivity = time.Now()
	}
	s.mu.Unlock()
	if b == nil || state == stDestroyed || state == stDestroying {
		c.error(http.StatusBadRequest, "failed to get runner info: sandbox "+c.sandboxID+" not found")
		return
	}
	if state != stStarted {
		c.error(http.StatusBadRequest, "failed to get runner info: sandbox is "+state+", not started")
		return
	}
	ctx := c.r.Context()
	switch c.op {
	case "ExecuteCommand":
		s.execute(ctx, c, cid)
	case "UploadFile":
		s.upload(ctx, c, cid)
	case "UploadFiles":
		s.uploadFiles(ctx, c, cid)
	case "DownloadFiles":
		s.downloadFiles(ctx, c, cid)
	case "DownloadFile":
		p := c.r.URL.Query().Get("path")
		data, err := s.eng.readFile(ctx, cid, p, 4<<30)
		if err != nil {
			fileError(c, err)
			return
		}
		c.w.Header().Set("Content-Type", "application/octet-stream")
		c.w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, path.Base(p)))
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write(data)
	case "GetFileInfo":
		st, err := s.eng.stat(ctx, cid, c.r.URL.Query().Get("path"))
		if err != nil {
			fileError(c, err)
			return
		}
		c.json(http.StatusOK, map[string]any{
			"name": st.name, "size": st.size, "mode": st.mode, "modTime": st.modifiedAt.String(),
			"modifiedAt": st.modifiedAt.UTC().Format(time.RFC3339Nano), "isDir": st.isDir,
			"owner": "1000", "group": "1000", "permissions": fmt.Sprintf("%04o", st.perm),
		})
	case "GetUserHomeDir":
		// The daemon answers os.UserHomeDir() of the sandbox user.
		c.json(http.StatusOK, map[string]any{"dir": SandboxHome})
	default:
		s.Violation("the adapter called toolbox %s, which the fake does not implement", c.op)
		c.error(http.StatusNotImplemented, "daytonafake: "+c.op+" is not implemented")
	}
}

func fileError(c *call, err error) {
	switch {
	case errors.Is(err, errNoFile):
		c.error(http.StatusNotFound, err.Error())
	case errors.Is(err, errIsDir):
		c.error(http.StatusBadRequest, err.Error())
	case errors.Is(err, errPermission):
		c.error(http.StatusForbidden, err.Error())
	default:
		c.error(http.StatusBadRequest, err.Error())
	}
}

type executeRequest struct {
	Command string            `json:"command"`
	Cwd     *string           `json:"cwd"`
	Envs    map[string]string `json:"envs"`
	Timeout *uint32           `json:"timeout"`
}

func (s *Server) execute(ctx context.Context, c *call, cid string) {
	var req executeRequest
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil {
		c.error(http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		c.error(http.StatusBadRequest, "command cannot be empty or whitespace-only")
		return
	}
	env := []string{}
	for _, k := range sortedKeys(req.Envs) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			c.error(http.StatusBadRequest, "invalid environment variable name")
			return
		}
		env = append(env, k+"="+req.Envs[k])
	}
	// Without a cwd the command runs in the daemon's working directory
	// (execute.go sets cmd.Dir only for a cwd), where relative file paths
	// also lead (daemonPath).
	dir := daemonWorkDir
	if req.Cwd != nil && *req.Cwd != "" {
		dir = daemonPath(*req.Cwd)
	}
	// The daemon's shell reads the command from stdin in its own process
	// group (process/execute.go:55-58); its pid is kept to kill the group
	// on timeout.
	shell := s.toolboxShell(ctx, c.sandboxID, cid)
	tag := randHex(8)
	pidFile := "/tmp/.daytonafake-exec-" + tag
	argv := []string{"/bin/sh", "-c", `echo $$ > "$1"; exec "$2"`, "sh", pidFile, shell}
	type outcome struct {
		res execResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.eng.exec(context.WithoutCancel(ctx), cid, execSpec{cmd: argv, env: env, dir: dir, stdin: []byte(req.Command), combined: true})
		done <- outcome{res, err}
	}()
	var timeout <-chan time.Time
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.After(time.Duration(*req.Timeout) * time.Second)
	}
	select {
	case o := <-done:
		_, _ = s.eng.exec(context.Background(), cid, execSpec{cmd: []string{"rm", "-f", pidFile}})
		if o.err != nil {
			c.json(http.StatusOK, map[string]any{"exitCode": -1, "result": o.err.Error()})
			return
		}
		c.json(http.StatusOK, map[string]any{"exitCode": o.res.code, "result": string(o.res.stdout)})
	case <-timeout:
		s.killGroup(cid, pidFile)
		c.error(http.StatusRequestTimeout, "command execution timeout")
	case <-ctx.Done():
		// The client went away: the daemon's command goes on (it is not
		// tied to the request), as in Daytona.
	}
}

// killGroup kills the process group whose leader's pid is in pidFile.
func (s *Server) killGroup(cid, pidFile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.eng.exec(ctx, cid, execSpec{user: "0:0", cmd: []string{"/bin/sh", "-c", `p=$(cat "$1" 2>/dev/null) && kill -9 -"$p"; rm -f "$1"`, "sh", pidFile}})
}

func (s *Server) upload(ctx context.Context, c *call, cid string) {
	p := c.r.URL.Query().Get("path")
	if p == "" {
		c.error(http.StatusBadRequest, "path is required")
		return
	}
	if !strings.HasPrefix(p, "/") {
		p = path.Join(SandboxHome, p)
	}
	f, _, err := c.r.FormFile("file")
	if err != nil {
		c.error(http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		c.error(http.StatusBadRequest, err.Error())
		return
	}
	if err := s.eng.writeFile(ctx, cid, p, data); err != nil {
		fileError(c, err)
		return
	}
	c.json(http.StatusOK, map[string]any{})
}

// toolboxShell is the shell the daemon runs /process/execute with, chosen
// as its GetShell chooses (apps/daemon/pkg/common/get_shell.go:14-48 of
// daytonaio/daytona v0.190.0): the first of /usr/bin/zsh, /bin/zsh,
// /usr/bin/bash and /bin/bash that the sandbox's /etc/shells lists, else
// the daemon's $SHELL, else sh. The daemon asks at every request; the fake
// once per sandbox (a command that installs a shell is not seen).
func (s *Server) toolboxShell(ctx context.Context, id, cid string) string {
	s.mu.Lock()
	b := s.sandboxes[id]
	if b != nil && b.shell != "" {
		defer s.mu.Unlock()
		return b.shell
	}
	s.mu.Unlock()
	shell := "sh"
	res, err := s.eng.exec(ctx, cid, execSpec{cmd: []string{"sh", "-c", "grep '^[^#]' /etc/shells"}, maxOut: 64 << 10})
	if err == nil && res.code == 0 {
		listed := string(res.stdout)
		for _, sh := range []string{"/usr/bin/zsh", "/bin/zsh", "/usr/bin/bash", "/bin/bash"} {
			if strings.Contains(listed, sh) {
				shell = sh
				break
			}
		}
	}
	// (The daemon's $SHELL: the fake's containers set none.)
	s.mu.Lock()
	if b != nil {
		b.shell = shell
	}
	s.mu.Unlock()
	return shell
}

// ToolboxShell returns the shell the toolbox runs sandbox idOrName's
// commands with ("" until its first command, or when there is no such
// sandbox).
func (s *Server) ToolboxShell(idOrName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.find(idOrName); b != nil {
		return b.shell
	}
	return ""
}
