// Package gitx is the one git runner of sandboxcore (DESIGN.md "Non-negotiables:
// git"; the threat model is docs/SECURITY.md). Every call is hardened:
//
//   - fixed command-line options (hardening) outrank every config file:
//     hooks (core.hooksPath=/dev/null), fsmonitor, external diff, pagers,
//     editors, ssh commands, askpass, credential helpers, GPG programs,
//     proxies, cookie files and untrusted protocols are switched off;
//   - before each call the repository's own configuration is read with the
//     same hardening (Inspect) and every variable that names a program git
//     would run, or a place git would send data, and that the fixed options
//     cannot reach because its name embeds a user-chosen part
//     (filter.<driver>.clean/smudge/process, diff.<driver>.command/textconv,
//     merge.<driver>.driver, http.<url>.proxy …) is overridden for that call
//     through GIT_CONFIG_COUNT entries; keys that would redirect a fetch or
//     push and cannot be overridden (url.<base>.insteadOf, a remote named like
//     a URL) make network calls refuse with ErrCommandRejected. The findings
//     (Inspection.Poisoned) are returned to callers, which log them;
//   - no prompt is possible (GIT_TERMINAL_PROMPT=0, askpass /bin/false, no
//     helpers) and nothing is inherited from the worker's environment but PATH;
//   - credentials go per call through the environment (GIT_CONFIG_COUNT +
//     http.<remote URL>.extraHeader), never argv, a URL or a config file, and
//     every error text is scrubbed of them;
//   - a git lock file left by a dead process (open in no process, and
//     either no live git runs in the repository or it is older than
//     Options.StaleLockAge; locks.go) is removed and the call retried once;
//     a live one is ErrRepoLocked naming the file (Classify).
package gitx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/hostproc"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DefaultStaleLockAge is Options.StaleLockAge when it is zero.
const DefaultStaleLockAge = 2 * time.Minute

// Runner runs git. The zero value is not usable; use New.
type Runner struct {
	binary    string
	allowFile bool
	allowHTTP bool
	// emptyHome is a directory with no config, used as HOME and XDG_CONFIG_HOME.
	emptyHome string
	staleAge  time.Duration
	log       *slog.Logger
}

// Options configure a Runner.
type Options struct {
	// Binary is the git executable; "" means "git" from PATH.
	Binary string
	// AllowFile permits the file:// protocol (SANDBOX_ALLOW_FILE_URLS=1).
	AllowFile bool
	// AllowHTTP permits plain http:// (SANDBOX_ALLOW_HTTP_URLS=1).
	AllowHTTP bool
	// HomeDir is an empty directory used as HOME for git so that no user-level
	// config, credential helper or ssh config applies; "" means os.TempDir()/sandboxcore-git-home.
	HomeDir string
	// StaleLockAge: a git lock file ("*.lock") that made a call fail is
	// removed, and the call retried once, when no process has it open
	// (/proc/*/fd) and either no git process runs in the repository or it
	// has not been modified for this long (locks.go); otherwise the call
	// fails with ErrRepoLocked naming it (Classify). 0 means
	// DefaultStaleLockAge; a negative value never removes a lock.
	StaleLockAge time.Duration
	// Logger receives one warning per removed stale lock; nil means slog.Default().
	Logger *slog.Logger
}

// New returns a Runner. It fails when git cannot be found.
func New(opts Options) (*Runner, error) {
	bin := opts.Binary
	if bin == "" {
		bin = "git"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("gitx: git not found: %w", err)
	}
	home := opts.HomeDir
	if home == "" {
		home = os.TempDir() + "/sandboxcore-git-home"
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("gitx: home dir: %w", err)
	}
	age := opts.StaleLockAge
	if age == 0 {
		age = DefaultStaleLockAge
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Runner{binary: path, allowFile: opts.AllowFile, allowHTTP: opts.AllowHTTP, emptyHome: home, staleAge: age, log: log}, nil
}

// ConfigEntry is one configuration variable: Key is
// section[.subsection].name (git lists section and name lowercased, the
// subsection exactly as written), Value its value.
type ConfigEntry struct {
	// Key is section[.subsection].name.
	Key string
	// Value is the variable's value ("" is a value, not an unset).
	Value string
}

// Call is one git invocation.
type Call struct {
	// Dir is where git runs (git -C Dir). Required.
	Dir string
	// Args are git's arguments after the hardening options. Put user-supplied
	// refs and paths after "--end-of-options" or "--" (or feed them on stdin).
	Args []string
	// Cred, when set, is sent as an Authorization header to RemoteURL only.
	Cred *sandbox.Credential
	// RemoteURL is the remote this call talks to, exactly as it appears in
	// Args. It scopes Cred (http.<RemoteURL>.extraHeader; required with Cred)
	// and marks the call as a network call: a network call refuses to run
	// while the repository's configuration could redirect it
	// (Inspection.Redirects). Calls whose subcommand reaches a remote (fetch,
	// ls-remote, push, …) are network calls even without it. Always pass
	// URLs, never remote names: a configured remote's URL is the agent's to
	// change.
	RemoteURL string
	// Env adds variables (e.g. GIT_DIR, GIT_INDEX_FILE, GIT_AUTHOR_NAME).
	// GIT_CONFIG_COUNT/GIT_CONFIG_KEY_<n>/GIT_CONFIG_VALUE_<n> entries here
	// are merged with Config (they come first); GIT_CONFIG_PARAMETERS is refused.
	Env []string
	// Config adds per-call configuration that outranks every config file
	// (GIT_CONFIG_COUNT entries). The runner's overrides of the repository's
	// dangerous keys and the credential header come after it, so Config
	// cannot undo them.
	Config []ConfigEntry
	// Inspection, when set, is an Inspect result for the same Dir and Env
	// (the same repository) reused instead of reading the repository's
	// configuration again for this call. nil: Run inspects it itself.
	Inspection *Inspection
	// Stdin feeds git; nil is /dev/null.
	Stdin io.Reader
	// Stdout receives output instead of the returned buffer when set.
	Stdout io.Writer
	// Timeout kills the call; 0 means 10 minutes.
	Timeout time.Duration
}

// Error is a failed git call. Its text never contains the credential.
type Error struct {
	// Args are the call's arguments (Call.Args, credential scrubbed).
	Args []string
	// ExitCode is git's exit status (-1 when it did not exit normally).
	ExitCode int
	// Stderr is git's standard error (at most 64 KiB, credential scrubbed).
	Stderr string
}

// Error implements error: "git <args>: exit <code>: <stderr>".
func (e *Error) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.Args, " "), e.ExitCode, strings.TrimSpace(e.Stderr))
}

// fixedProtocols are the protocols hardening names explicitly; any other
// protocol.<name>.allow found in a repository is overridden to "never".
var fixedProtocols = map[string]bool{"https": true, "ssh": true, "git": true, "ext": true, "fd": true, "file": true, "http": true}

// sshCommand is the only ssh git ever runs: no prompts, host keys pinned on first use.
const sshCommand = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new"

// hardening is prepended to every call (DESIGN.md non-negotiables): `-c` on the
// command line outranks every config file, so an agent's `git config
// core.fsmonitor …` in a workspace cannot run code in host-side git. Keys whose
// names embed a user-chosen part (filter.<driver>.clean …) cannot be reached
// this way: Inspect finds those.
func (r *Runner) hardening() []string {
	proto := func(name string, ok bool) string {
		if ok {
			return "protocol." + name + ".allow=always"
		}
		return "protocol." + name + ".allow=never"
	}
	return []string{
		"--no-pager",
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "core.untrackedCache=false",
		"-c", "core.sshCommand=" + sshCommand,
		"-c", "core.askPass=",
		"-c", "core.alternateRefsCommand=true",
		"-c", "core.protectNTFS=true",
		"-c", "core.protectHFS=true",
		// Line endings are the attributes' business only (the checkout
		// baseline of internal/workspace relies on it), never the config's.
		"-c", "core.autocrlf=false",
		"-c", "core.eol=lf",
		"-c", "core.safecrlf=false",
		"-c", "credential.helper=",
		"-c", "diff.external=",
		"-c", "core.pager=cat",
		"-c", "core.editor=false",
		"-c", "sequence.editor=false",
		"-c", "gpg.program=false",
		"-c", "gpg.openpgp.program=false",
		"-c", "gpg.x509.program=false",
		"-c", "gpg.ssh.program=false",
		"-c", "log.showSignature=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
		"-c", "commit.gpgSign=false",
		"-c", "tag.gpgSign=false",
		"-c", "push.gpgSign=false",
		"-c", "submodule.recurse=false",
		"-c", "fetch.recurseSubmodules=false",
		"-c", "protocol.allow=never",
		"-c", proto("https", true),
		"-c", proto("ssh", true),
		"-c", proto("git", false),
		"-c", proto("ext", false),
		"-c", proto("fd", false),
		"-c", proto("file", r.allowFile),
		"-c", proto("http", r.allowHTTP),
		"-c", "http.followRedirects=false",
		"-c", "http.proxy=",
		"-c", "http.sslVerify=true",
		"-c", "http.saveCookies=false",
		"-c", "http.cookieFile=",
		"-c", "safe.bareRepository=all",
		"-c", "advice.detachedHead=false",
		"-c", "init.defaultBranch=main",
	}
}

// baseEnv is the complete environment of a git call: nothing is inherited
// from the worker but PATH.
func (r *Runner) baseEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.emptyHome,
		"XDG_CONFIG_HOME=" + r.emptyHome,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GCM_INTERACTIVE=never",
		"GIT_SSH_COMMAND=" + sshCommand,
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat",
		"LC_ALL=C",
		"LANG=C",
	}
}

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

// authHeader returns the Authorization header and the URL it is scoped to
// (http.<scope>.extraHeader): the remote URL itself, without user info, query
// or fragment. It is never sent to another host or repository, and no
// repository configuration can be more specific for that URL (git's urlmatch:
// the most specific http.<url>.* wins, ties go to the last definition, which
// is this one).
func authHeader(cred *sandbox.Credential, remote string) (header, scope string, err error) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("gitx: credentials need an http(s) remote URL without user info, query or fragment")
	}
	if strings.ContainsAny(cred.Username+cred.Secret, "\r\n\x00") {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "credential contains a line break or NUL")
	}
	basic := base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Secret))
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return "Authorization: Basic " + basic, u.Scheme + "://" + u.Host + path, nil
}

// secretForms are the spellings of a credential that must never appear in
// output: raw, URL-encoded, and the basic-auth base64.
func secretForms(c *sandbox.Credential) []string {
	if c == nil || c.Secret == "" {
		return nil
	}
	return []string{
		base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Secret)),
		c.Secret,
		url.QueryEscape(c.Secret),
		url.PathEscape(c.Secret),
	}
}

func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "<redacted>")
		}
	}
	return s
}

func redactAll(args, secrets []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a, secrets)
	}
	return out
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

var (
	authPatterns   = regexp.MustCompile(`(?i)authentication failed|could not read (username|password)|terminal prompts disabled|http(/[0-9.]+)? 40[13]|returned error: 40[13]|permission denied \(publickey|invalid username or password|access denied|401 unauthorized|403 forbidden`)
	repoMissingPat = regexp.MustCompile(`(?i)repository not found|repository '[^']*' not found|returned error: (404|410)\b|does not appear to be a git repository`)
	notFoundPat    = regexp.MustCompile(`(?i)not found|does not exist`)
	diskPat        = regexp.MustCompile(`(?i)no space left on device|disk quota exceeded`)
	fileTooBigPat  = regexp.MustCompile(`(?i)file too large`)
	lockPat        = regexp.MustCompile(`Unable to create '([^']+\.lock)': File exists`)
	unreachPat     = regexp.MustCompile(`(?i)could not resolve host|connection refused|connection timed out|connection reset|failed to connect|network is unreachable|no route to host|operation timed out|could not connect|the remote end hung up unexpectedly|early eof|unexpected disconnect|rpc failed|transfer closed|ssl_connect|gnutls|tls connection|returned error: 5[0-9][0-9]\b|http(/[0-9.]+)? 5[0-9][0-9]`)
	refPat         = regexp.MustCompile(`(?i)invalid reference|unknown revision|not a valid object name|needed a single revision|couldn't find remote ref|bad revision|not a commit`)
	// nameTooLongPat: the host's filesystem cannot hold a path of the
	// repository or the workspace (ENAMETOOLONG: a name over 255 bytes or a
	// path over 4096).
	nameTooLongPat = regexp.MustCompile(`(?i)file name too long`)
	// invalidPathPat: git refuses to check out a path on this host
	// (core.protectNTFS/protectHFS, ".git" components, verify_path).
	invalidPathPat = regexp.MustCompile(`(?i)invalid path '([^']*)'`)
	// localPathMissingPat: a path named to a local call is not in the commit or tree.
	localPathMissingPat = regexp.MustCompile(`(?i)path '([^']*)' does not exist in|pathspec '([^']*)' did not match`)
	// incompletePat: the remote cannot serve the complete history: it is a
	// shallow or partial (promisor) clone, or its objects are damaged.
	incompletePat = regexp.MustCompile(`(?i)shallow roots are not allowed|shallow update not allowed|from promisor remote|repository corruption on the remote side|did not send all necessary objects`)
	// badRequestPat: the remote refused the request itself (HTTP 400).
	badRequestPat = regexp.MustCompile(`(?i)returned error: 400\b|http(/[0-9.]+)? 400\b`)
	// rateLimitPat: the remote's rate limit (HTTP 429).
	rateLimitPat = regexp.MustCompile(`(?i)returned error: 429\b|http(/[0-9.]+)? 429\b|too many requests`)
)

// IncompleteUpstreamMessage ends the message of an error about a remote
// that cannot serve complete history (Classify; internal/repocache).
const IncompleteUpstreamMessage = "the remote repository cannot serve its complete history (it is a shallow or partial clone, or its objects are damaged); use the repository it was cloned from"

// Classify maps a git failure onto the typed error that names its cause
// (docs/API.md "Errors"; the retryable flag is the kind's, so only what
// sending the call again can cure is retried):
//
//   - a held lock file → ErrRepoLocked naming it (retryable);
//   - a full disk or quota → ErrInsufficientDisk; a file over the host's
//     size limit (EFBIG) → ErrResourceLimit;
//   - a path the host cannot hold (a name over 255 bytes, a path over 4096:
//     ENAMETOOLONG) or that git refuses to check out here ("invalid path")
//     → ErrInvalidWorkspacePath naming it; a path not in the commit named
//     → ErrFileNotFound;
//   - a ref that cannot be created beside another ("'refs/heads/a' exists;
//     cannot create 'refs/heads/a/b'") → ErrConflict naming both;
//   - a remote that cannot serve its complete history (a shallow or
//     partial clone, remote-side corruption) → ErrInvalidArgument saying
//     so (IncompleteUpstreamMessage), never retried;
//   - auth (HTTP 401, 403, refused keys) → ErrRepoAuthFailed;
//   - HTTP 429 → ErrRateLimited (retryable);
//   - an unknown ref → ErrRefNotFound;
//   - HTTP 404, 410, "repository not found" and an unfollowed redirect
//     (Locate) → ErrRepoNotFound (permanent: not retried);
//   - HTTP 400 (the remote refused the request itself, e.g. a push over its
//     size limit) → ErrCommandRejected, not retried;
//   - an unreachable remote, a dropped connection, HTTP 5xx, and on a
//     network call any other "not found" → ErrRepoCacheUnavailable
//     (retryable);
//   - a typed error (e.g. Run's ErrCommandRejected) keeps its kind; a
//     timeout is ErrTimeout; anything else → fallback.
//
// what describes the operation ("clone owner/repo").
func Classify(err error, what string, fallback *sandboxapi.Kind) error {
	if err == nil {
		return nil
	}
	var ge *Error
	if !errors.As(err, &ge) {
		if errors.Is(err, context.DeadlineExceeded) {
			return sandboxapi.Errorf(sandboxapi.ErrTimeout, "%s: %v", what, err)
		}
		if k := sandboxapi.KindOf(err); k != nil {
			return sandboxapi.Errorf(k, "%s: %s", what, sandboxapi.Message(err))
		}
		return sandboxapi.Errorf(fallback, "%s: %v", what, err)
	}
	msg := strings.ReplaceAll(ge.Stderr, "\x00", "")
	network := networkCommands[subcommand(ge.Args)]
	switch {
	case lockPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "%s: lock file held: %s (a live process has it open, or a git process runs in the repository and it is younger than the stale-lock age)", what, lockPat.FindStringSubmatch(msg)[1])
	case diskPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "%s: %s", what, firstLine(msg))
	case fileTooBigPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "%s: a file exceeds the host's file size limit: %s", what, clipLine(msg, fileTooBigPat))
	case nameTooLongPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s: a path is longer than the host's filesystem allows (255 bytes a name, 4096 a path): %s", what, clipLine(msg, nameTooLongPat))
	case invalidPathPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s: git refuses to check out the path %q on this host", what, sandboxapi.Clip(invalidPathPat.FindStringSubmatch(msg)[1], 256))
	case refCollision.MatchString(msg):
		m := refCollision.FindStringSubmatch(msg)
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: %s cannot be created because %s exists (git cannot hold a ref and a directory of the same name)", what, m[2], m[1])
	case incompletePat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %s: %s", what, IncompleteUpstreamMessage, clipLine(msg, incompletePat))
	case authPatterns.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "%s: the remote refused the credentials (or none were given): %s", what, firstLine(msg))
	case rateLimitPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRateLimited, "%s: the remote's rate limit is exhausted (HTTP 429): %s", what, firstLine(msg))
	case refPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "%s: %s", what, firstLine(msg))
	case !network && localPathMissingPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrFileNotFound, "%s: %s", what, firstLine(msg))
	case repoMissingPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s: %s", what, firstLine(msg))
	case redirectPat.MatchString(msg):
		// A redirect the caller did not follow (Locate): a permanent answer, never retried.
		return sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s: the remote redirects the repository elsewhere (moved or renamed): %s", what, firstLine(msg))
	case badRequestPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: the remote refused the request (HTTP 400 Bad Request; e.g. a push over its size limit): %s", what, firstLine(msg))
	case unreachPat.MatchString(msg), network && notFoundPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "%s: %s", what, firstLine(msg))
	}
	return sandboxapi.Errorf(fallback, "%s: %s", what, ge.Error())
}

// clipLine returns the first line of msg that pat matches, cut to 512
// bytes (firstLine when none does).
func clipLine(msg string, pat *regexp.Regexp) string {
	for _, l := range strings.Split(msg, "\n") {
		if pat.MatchString(l) {
			return sandboxapi.Clip(strings.TrimSpace(l), 512)
		}
	}
	return sandboxapi.Clip(firstLine(msg), 512)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "fatal:") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	if len(lines) > 0 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return s
}

// ExitCode returns the git exit code of err, or -1 when err is not an *Error.
func ExitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// Quote renders args for logs; it never contains credentials because they are
// never in args.
func Quote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
