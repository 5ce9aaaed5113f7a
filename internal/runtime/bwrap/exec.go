package bwrap

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// DrainGrace bounds how long an exec call waits, after bwrap has exited or
// been killed, for its output pipes; then they are closed and the call
// returns. It is also the exec.Cmd WaitDelay.
const DrainGrace = procexec.DrainGrace

// shWrapper runs as "/bin/sh -c shWrapper sandboxcore argv…" inside the
// sandbox: sh gives the usual exit codes for a missing (127) or
// non-executable (126) command, which bwrap's own execvp would report as 1.
const shWrapper = `unset PWD; exec "$@"`

// statusFD is the descriptor bwrap writes its JSON status to (--json-status-fd);
// procexec.Command.Status provides it.
const statusFD = 3

// run runs req in a sandbox laid out by cfg under killCtx (from
// procexec.Lifecycle.Exec, derived from callerCtx) and classifies the outcome
// (see procexec.Run); bwrap failing before the command ran is an error
// wrapping sandbox.ErrRuntimeUnavailable with bwrap's message.
func (p *Provider) run(killCtx, callerCtx context.Context, cfg sandboxConfig, env []string, req sandbox.ExecRequest, onChunk func(sandbox.ExecChunk)) (sandbox.ExecResult, error) {
	out := procexec.NewOutput(req.OutputCap(), onChunk)
	if strings.HasPrefix(req.Cmd[0], "-") {
		// sh's exec would take it for an option.
		return out.Notice(127, req.Cmd[0], "command not found"), nil
	}
	args := p.args(cfg, env)
	args = append(args[:len(args)-1:len(args)-1], "--json-status-fd", strconv.Itoa(statusFD), "--", "/bin/sh", "-c", shWrapper, "sandboxcore")
	args = append(args, req.Cmd...)

	return procexec.Run(killCtx, callerCtx, out, procexec.Command{
		Name:       req.Cmd[0],
		Path:       p.bin,
		Args:       append([]string{p.bin}, args...),
		Dir:        "/",
		Env:        []string{}, // bwrap itself needs nothing from the worker's environment
		Credential: cfg.cred,
		Pdeathsig:  syscall.SIGKILL,
		Stdin:      req.Stdin,
		Timeout:    req.Timeout(),
		StartFailed: func(err error) (sandbox.ExecResult, error) {
			return sandbox.ExecResult{}, sandbox.Wrap(sandbox.ErrRuntimeUnavailable, err, "exec %s: start bwrap", req.Cmd[0])
		},
		Status: func(status []byte, res sandbox.ExecResult) error {
			if !bytes.Contains(status, []byte(`"exit-code"`)) {
				// bwrap failed before the command ran; its message is on stderr.
				return sandbox.Errorf(sandbox.ErrRuntimeUnavailable, "bubblewrap could not build the sandbox (exit %d): %s",
					res.ExitCode, clipN(strings.TrimSpace(string(res.Stderr)), 400))
			}
			return nil
		},
	})
}
