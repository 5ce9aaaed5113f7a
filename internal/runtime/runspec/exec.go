package runspec

import (
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ValidateExec checks the backend-independent rules of an exec request
// and returns an error wrapping sandboxapi.ErrInvalidArgument on the first
// violation (nothing may run then):
//   - Cmd is a non-empty argv whose first element is non-empty; no element
//     contains a NUL byte (ValidateCmd);
//   - Cwd passes sandboxapi.CleanRelPath (relative, no "..", no control
//     characters); symlink escapes are the runtime's own check;
//   - Env passes ValidateEnv;
//   - TimeoutS is 0 (sandboxapi.DefaultExecTimeout) or in (0, sandboxapi.MaxExecTimeout] seconds;
//   - MaxOutputBytes is 0 (the default) or in (0, sandboxapi.MaxOutputBytesLimit] bytes;
//   - Stdin is at most sandboxapi.MaxStdinBytes bytes;
//   - Network is "" or one of none, limited, default (whether the runtime
//     allows it is procexec.CommandNetwork's decision).
//
// Every runtime adapter (local, bwrap, Docker, Daytona, E2B) calls it first
// in Exec and ExecStream (docs/API.md "Updates", exec).
func ValidateExec(req sandboxapi.ExecRequest) error {
	bad := func(format string, args ...any) error {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "exec: "+format, args...)
	}
	if err := ValidateCmd("exec", req.Cmd); err != nil {
		return err
	}
	if _, err := sandboxapi.CleanRelPath(req.Cwd); err != nil {
		return bad("cwd: %s", sandboxapi.Message(err))
	}
	if err := ValidateEnv(req.Env); err != nil {
		return err
	}
	if req.TimeoutS < 0 {
		return bad("timeout_s %d is negative", req.TimeoutS)
	}
	// Compared in seconds: a huge TimeoutS times time.Second overflows.
	if req.TimeoutS > int(sandboxapi.MaxExecTimeout/time.Second) {
		return bad("timeout_s %d exceeds the maximum of %d", req.TimeoutS, int(sandboxapi.MaxExecTimeout/time.Second))
	}
	if req.MaxOutputBytes < 0 {
		return bad("max_output_bytes %d is negative", req.MaxOutputBytes)
	}
	if req.MaxOutputBytes > sandboxapi.MaxOutputBytesLimit {
		return bad("max_output_bytes %d exceeds the maximum of %d", req.MaxOutputBytes, sandboxapi.MaxOutputBytesLimit)
	}
	if len(req.Stdin) > sandboxapi.MaxStdinBytes {
		return bad("stdin is %d bytes, more than the maximum of %d", len(req.Stdin), sandboxapi.MaxStdinBytes)
	}
	if req.Network != "" && !req.Network.Valid() {
		return bad("network %q: want none, limited or default", sandboxapi.Clip(string(req.Network), 32))
	}
	return nil
}

// ValidateCmd checks the argv of a command of op ("exec", "process_start"):
// non-empty, its first element non-empty, no element containing a NUL byte
// (execve cannot pass one: it would cut the argument silently). The error
// wraps sandboxapi.ErrInvalidArgument and names op and the element's index.
func ValidateCmd(op string, cmd []string) error {
	if len(cmd) == 0 {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: cmd is empty", op)
	}
	if cmd[0] == "" {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: cmd[0] is empty", op)
	}
	for i, a := range cmd {
		if strings.IndexByte(a, 0) >= 0 {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: cmd[%d] contains a NUL byte", op, i)
		}
	}
	return nil
}

// ValidateEnv checks environment variables (a RuntimeSpec's, an
// ExecRequest's or a ProcessSpec's): every key is non-empty and contains
// neither '=' nor NUL, every value contains no NUL (an environment entry is
// one NUL-terminated "KEY=value" string). Returns an error wrapping
// sandboxapi.ErrInvalidArgument naming the variable (clipped to 64 bytes).
func ValidateEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "":
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "env: empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "env: variable name %q contains '=' or NUL", clip(k))
		case strings.IndexByte(v, 0) >= 0:
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "env: value of %q contains a NUL byte", clip(k))
		}
	}
	return nil
}

func clip(s string) string { return sandboxapi.Clip(s, 64) }
