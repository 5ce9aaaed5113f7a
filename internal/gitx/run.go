package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/hostproc"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// maxConfigEntries bounds the GIT_CONFIG_COUNT entries of one call (the
// caller's, the overrides and the credential).
const maxConfigEntries = 4096

// networkCommands are the subcommands that reach a remote.
var networkCommands = map[string]bool{
	"fetch": true, "pull": true, "push": true, "ls-remote": true, "clone": true, "remote": true,
	"submodule": true, "fetch-pack": true, "send-pack": true, "archive": true,
}

// subcommand returns the first argument that is not a global option (skipping
// the values of -c and -C).
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// Run executes one git call and returns its stdout (nil when Call.Stdout is set).
// A failure is an *Error (classified with Classify by callers), ctx's error,
// or a typed error: ErrCommandRejected when a network call meets a
// repository configuration that could redirect it, ErrInvalidArgument for a
// malformed Call.
func (r *Runner) Run(ctx context.Context, c Call) ([]byte, error) {
	if c.Dir == "" {
		return nil, errors.New("gitx: Call.Dir is required")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	env, cfg, err := splitConfigEnv(c.Env)
	if err != nil {
		return nil, err
	}
	if scope := scopeOf(ctx); scope != nil && writesConfig(subcommand(c.Args), c.Args) {
		defer scope.forget() // after the call: it changed the configuration
	}
	cfg, secrets, err := r.callConfig(ctx, c, env, append(cfg, c.Config...))
	if err != nil {
		return nil, err
	}
	env = append(append(r.baseEnv(), env...), configEnv(cfg)...)
	args := append([]string{"-C", c.Dir}, r.hardening()...)
	args = append(args, c.Args...)
	stdin, stdinRest, err := bufferStdin(c.Stdin)
	if err != nil {
		return nil, err
	}
	return r.runRetryingStaleLock(ctx, c, args, env, stdin, stdinRest, secrets)
}

// callConfig completes the per-call configuration cfg (the caller's
// GIT_CONFIG_* and Call.Config): the inspection's overrides (c.Inspection,
// or the repository's configuration: the ReuseInspections scope's for a
// local call, read now otherwise; `git config`, `git init` and `git
// version` run no program from one, so they need none) and, with
// c.Cred, the http.<RemoteURL>.extraHeader carrying it, returning as well
// the credential's forms to scrub from output. Errors: ErrCommandRejected
// (a redirecting variable on a network call, or over maxConfigEntries
// entries), a missing RemoteURL with Cred, the inspection's and
// authHeader's.
func (r *Runner) callConfig(ctx context.Context, c Call, env []string, cfg []ConfigEntry) ([]ConfigEntry, []string, error) {
	sub := subcommand(c.Args)
	ins := c.Inspection
	if ins == nil && sub != "config" && sub != "init" && sub != "version" {
		// A network call reads it afresh whatever the scope holds.
		network := c.RemoteURL != "" || c.Cred != nil || networkCommands[sub]
		var err error
		if ins, err = r.inspectIn(ctx, scopeOf(ctx), c.Dir, env, network); err != nil {
			return nil, nil, err
		}
	}
	if ins != nil {
		if redirects := ins.Redirects(); len(redirects) > 0 && (c.RemoteURL != "" || networkCommands[sub]) {
			return nil, nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected,
				"git %s refused: the repository's configuration sets %s, which could redirect it to another remote; remove it (git config --unset-all)",
				sub, redirects[0].quotedKey())
		}
		cfg = append(cfg, ins.overrides...)
	}
	var secrets []string
	if c.Cred != nil {
		if c.RemoteURL == "" {
			return nil, nil, errors.New("gitx: Call.RemoteURL is required with Call.Cred")
		}
		header, scope, err := authHeader(c.Cred, c.RemoteURL)
		if err != nil {
			return nil, nil, err
		}
		cfg = append(cfg, ConfigEntry{Key: "http." + scope + ".extraHeader", Value: header})
		secrets = secretForms(c.Cred)
	}
	if len(cfg) > maxConfigEntries {
		return nil, nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "git %s: %d per-call configuration entries (max %d): the repository configures too many drivers", sub, len(cfg), maxConfigEntries)
	}
	return cfg, secrets, nil
}

// bufferStdin reads up to maxRetryStdin bytes of in (nil: no stdin) so
// that a call that met a stale lock can be retried with the same input;
// when in is longer, rest replays what was read followed by the remainder
// (such a call is never retried). Errors: in's read error.
func bufferStdin(in io.Reader) (stdin []byte, rest io.Reader, err error) {
	if in == nil {
		return nil, nil, nil
	}
	stdin, err = io.ReadAll(io.LimitReader(in, maxRetryStdin+1))
	if err != nil {
		return nil, nil, fmt.Errorf("gitx: read stdin: %w", err)
	}
	if len(stdin) > maxRetryStdin {
		rest = io.MultiReader(bytes.NewReader(stdin), in)
	}
	return stdin, rest, nil
}

// runRetryingStaleLock runs the call (runOnce) and, once, again when it
// failed on a lock file that removeStaleLock found stale and removed —
// never when its stdin could not be buffered (stdinRest) or it already
// wrote to c.Stdout.
func (r *Runner) runRetryingStaleLock(ctx context.Context, c Call, args, env []string, stdin []byte, stdinRest io.Reader, secrets []string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		var in io.Reader
		switch {
		case stdinRest != nil:
			in = stdinRest
		case c.Stdin != nil:
			in = bytes.NewReader(stdin)
		}
		out, wrote, err := r.runOnce(ctx, c, args, env, in, secrets)
		if err == nil || attempt > 0 || stdinRest != nil || wrote {
			return out, err
		}
		var ge *Error
		if !errors.As(err, &ge) {
			return out, err
		}
		m := lockPat.FindStringSubmatch(ge.Stderr)
		if m == nil || !r.removeStaleLock(m[1], c.Dir, env) {
			return out, err
		}
	}
}

// maxRetryStdin bounds the stdin a call may have and still be retried after a stale lock.
const maxRetryStdin = 8 << 20

// runOnce runs git once; wrote reports whether anything reached Call.Stdout.
func (r *Runner) runOnce(ctx context.Context, c Call, args, env []string, stdin io.Reader, secrets []string) (out []byte, wrote bool, err error) {
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout bytes.Buffer
	var counted *countingWriter
	if c.Stdout != nil {
		counted = &countingWriter{w: c.Stdout}
		cmd.Stdout = counted
	} else {
		cmd.Stdout = &stdout
	}
	stderr := &capped{max: 64 << 10}
	cmd.Stderr = stderr
	// hostproc: own process group (killed whole on timeout and when git
	// exits, so no helper outlives the call or keeps its credential), and
	// the whole tree SIGKILLed when the worker dies (parent-death signal
	// and the reaper), so no orphaned git or git-remote-https keeps
	// writing into a cache or pushing with the credential after a crash.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = hostproc.Run(cmd)
	wrote = counted != nil && counted.n > 0
	if err != nil {
		if ctx.Err() != nil {
			return nil, wrote, fmt.Errorf("git %s: %w", redact(strings.Join(c.Args, " "), secrets), ctx.Err())
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return nil, wrote, &Error{Args: redactAll(c.Args, secrets), ExitCode: code, Stderr: redact(stderr.String(), secrets)}
	}
	if c.Stdout != nil {
		return nil, wrote, nil
	}
	return stdout.Bytes(), false, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

// Write forwards p and counts the bytes written.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// splitConfigEnv separates GIT_CONFIG_COUNT/KEY_n/VALUE_n entries of env into
// configuration entries (in index order) and returns the rest of env.
func splitConfigEnv(env []string) (rest []string, cfg []ConfigEntry, err error) {
	count := -1
	keys, values := map[int]string{}, map[int]string{}
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		switch {
		case name == "GIT_CONFIG_PARAMETERS" || name == "GIT_CONFIG":
			return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: %s in Call.Env is not supported; use Call.Config", name)
		case name == "GIT_CONFIG_COUNT":
			if count, err = strconv.Atoi(val); err != nil || count < 0 {
				return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: GIT_CONFIG_COUNT=%q in Call.Env", val)
			}
		case strings.HasPrefix(name, "GIT_CONFIG_KEY_"):
			i, err := strconv.Atoi(strings.TrimPrefix(name, "GIT_CONFIG_KEY_"))
			if err != nil {
				return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: %s in Call.Env", name)
			}
			keys[i] = val
		case strings.HasPrefix(name, "GIT_CONFIG_VALUE_"):
			i, err := strconv.Atoi(strings.TrimPrefix(name, "GIT_CONFIG_VALUE_"))
			if err != nil {
				return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: %s in Call.Env", name)
			}
			values[i] = val
		default:
			rest = append(rest, kv)
		}
	}
	if count < 0 && len(keys) > 0 {
		return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: GIT_CONFIG_KEY_<n> without GIT_CONFIG_COUNT in Call.Env")
	}
	if count > maxConfigEntries {
		return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: GIT_CONFIG_COUNT=%d in Call.Env (max %d)", count, maxConfigEntries)
	}
	for i := 0; i < count; i++ {
		k, ok := keys[i]
		if !ok {
			return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "gitx: GIT_CONFIG_KEY_%d missing in Call.Env", i)
		}
		cfg = append(cfg, ConfigEntry{Key: k, Value: values[i]})
	}
	return rest, cfg, nil
}

// configEnv renders entries as GIT_CONFIG_COUNT/KEY_n/VALUE_n (these are read
// after every config file, so they outrank them; per-URL keys of the same
// URL are taken last-one-wins).
func configEnv(cfg []ConfigEntry) []string {
	if len(cfg) == 0 {
		return nil
	}
	env := make([]string, 0, 2*len(cfg)+1)
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, e := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, e.Key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, e.Value))
	}
	return env
}

// capped keeps at most max bytes.
type capped struct {
	buf bytes.Buffer
	max int
}

// Write keeps what fits and always reports success (git must not block on stderr).
func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// String returns what was kept.
func (c *capped) String() string { return c.buf.String() }
