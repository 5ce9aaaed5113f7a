package runspec

import (
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// ValidateExec checks the backend-independent rules of an exec request
// and returns an error wrapping sandbox.ErrInvalidArgument on the first
// violation (nothing may run then):
//   - Cmd is a non-empty argv whose first element is non-empty; no element
//     contains a NUL byte (ValidateCmd);
//   - Cwd passes sandbox.CleanRelPath (relative, no "..", no control
//     characters); symlink escapes are the runtime's own check;
//   - Env passes ValidateEnv;
//   - TimeoutS is 0 (sandbox.DefaultExecTimeout) or in (0, sandbox.MaxExecTimeout] seconds;
//   - MaxOutputBytes is 0 (the default) or in (0, sandbox.MaxOutputBytesLimit] bytes;
//   - Stdin is at most sandbox.MaxStdinBytes bytes;
//   - Network is "" or one of none, limited, default (whether the runtime
//     allows it is procexec.CommandNetwork's decision).
//
// Every runtime adapter (local, bwrap, Docker, Daytona, E2B) calls it first
// in Exec and ExecStream (docs/API.md "Updates", exec).
func ValidateExec(req sandbox.ExecRequest) error {
	bad := func(format string, args ...any) error {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "exec: "+format, args...)
	}
	if err := ValidateCmd("exec", req.Cmd); err != nil {
		return err
	}
	if _, err := sandbox.CleanRelPath(req.Cwd); err != nil {
		return bad("cwd: %s", sandbox.Message(err))
	}
	if err := ValidateEnv(req.Env); err != nil {
		return err
	}
	if req.TimeoutS < 0 {
		return bad("timeout_s %d is negative", req.TimeoutS)
	}
	// Compared in seconds: a huge TimeoutS times time.Second overflows.
	if req.TimeoutS > int(sandbox.MaxExecTimeout/time.Second) {
		return bad("timeout_s %d exceeds the maximum of %d", req.TimeoutS, int(sandbox.MaxExecTimeout/time.Second))
	}
	if req.MaxOutputBytes < 0 {
		return bad("max_output_bytes %d is negative", req.MaxOutputBytes)
	}
	if req.MaxOutputBytes > sandbox.MaxOutputBytesLimit {
		return bad("max_output_bytes %d exceeds the maximum of %d", req.MaxOutputBytes, sandbox.MaxOutputBytesLimit)
	}
	if len(req.Stdin) > sandbox.MaxStdinBytes {
		return bad("stdin is %d bytes, more than the maximum of %d", len(req.Stdin), sandbox.MaxStdinBytes)
	}
	if req.Network != "" && !req.Network.Valid() {
		return bad("network %q: want none, limited or default", sandbox.Clip(string(req.Network), 32))
	}
	return nil
}

// ValidateCmd checks the argv of a command of op ("exec", "process_start"):
// non-empty, its first element non-empty, no element containing a NUL byte
// (execve cannot pass one: it would cut the argument silently). The error
// wraps sandbox.ErrInvalidArgument and names op and the element's index.
func ValidateCmd(op string, cmd []string) error {
	if len(cmd) == 0 {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "%s: cmd is empty", op)
	}
	if cmd[0] == "" {
		return sandbox.Errorf(sandbox.ErrInvalidArgument, "%s: cmd[0] is empty", op)
	}
	for i, a := range cmd {
		if strings.IndexByte(a, 0) >= 0 {
			return sandbox.Errorf(sandbox.ErrInvalidArgument, "%s: cmd[%d] contains a NUL byte", op, i)
		}
	}
	return nil
}

// ValidateEnv checks environment variables (a RuntimeSpec's, an
// ExecRequest's or a ProcessSpec's): every key is non-empty and contains
// neither '=' nor NUL, every value contains no NUL (an environment entry is
// one NUL-terminated "KEY=value" string). Returns an error wrapping
// sandbox.ErrInvalidArgument naming the variable (clipped to 64 bytes).
func ValidateEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "":
			return sandbox.Errorf(sandbox.ErrInvalidArgument, "env: empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			return sandbox.Errorf(sandbox.ErrInvalidArgument, "env: variable name %q contains '=' or NUL", clip(k))
		case strings.IndexByte(v, 0) >= 0:
			return sandbox.Errorf(sandbox.ErrInvalidArgument, "env: value of %q contains a NUL byte", clip(k))
		}
	}
	return nil
}

func clip(s string) string { return sandbox.Clip(s, 64) }
