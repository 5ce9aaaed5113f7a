// Package gitx is the one git runner of sandboxcore (DESIGN.md "Non-negotiables:
// git"). Every call is hardened: hooks, fsmonitor, external diff, textconv and
// filters from any repository config are neutralized; prompts are impossible;
// only allow-listed protocols are used; credentials go per call through the
// environment (GIT_CONFIG_COUNT + http.extraHeader), never argv, a URL or a
// config file; every error text is scrubbed of the credential.
package gitx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Runner runs git. The zero value is not usable; use New.
type Runner struct {
	binary    string
	allowFile bool
	allowHTTP bool
	// emptyHome is a directory with no config, used as HOME and XDG_CONFIG_HOME.
	emptyHome string
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
	return &Runner{binary: path, allowFile: opts.AllowFile, allowHTTP: opts.AllowHTTP, emptyHome: home}, nil
}

// Call is one git invocation.
type Call struct {
	// Dir is where git runs (git -C Dir). Required.
	Dir string
	// Args are git's arguments after the hardening options. Put user-supplied
	// refs and paths after "--end-of-options" or "--".
	Args []string
	// Cred, when set, is sent as an Authorization header to RemoteURL only.
	Cred *sandbox.Credential
	// RemoteURL scopes Cred (http.<url>.extraHeader); required with Cred.
	RemoteURL string
	// Env adds variables (e.g. GIT_INDEX_FILE, GIT_AUTHOR_NAME).
	Env []string
	// Stdin feeds git; nil is /dev/null.
	Stdin io.Reader
	// Stdout receives output instead of the returned buffer when set.
	Stdout io.Writer
	// Timeout kills the call; 0 means 10 minutes.
	Timeout time.Duration
}

// Error is a failed git call. Its text never contains the credential.
type Error struct {
	Args     []string
	ExitCode int
	Stderr   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.Args, " "), e.ExitCode, strings.TrimSpace(e.Stderr))
}

// hardening is prepended to every call (DESIGN.md non-negotiables): `-c` on the
// command line outranks every config file, so an agent's `git config
// core.fsmonitor …` in a workspace cannot run code in host-side git.
func (r *Runner) hardening() []string {
	proto := func(name string, ok bool) string {
		if ok {
			return "protocol." + name + ".allow=always"
		}
		return "protocol." + name + ".allow=never"
	}
	return []string{
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "core.untrackedCache=false",
		"-c", "core.sshCommand=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
		"-c", "core.askPass=",
		"-c", "credential.helper=",
		"-c", "diff.external=",
		"-c", "core.pager=cat",
		"-c", "core.editor=false",
		"-c", "sequence.editor=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
		"-c", "commit.gpgSign=false",
		"-c", "tag.gpgSign=false",
		"-c", "submodule.recurse=false",
		"-c", "protocol.allow=never",
		"-c", proto("https", true),
		"-c", proto("ssh", true),
		"-c", proto("git", false),
		"-c", proto("ext", false),
		"-c", proto("fd", false),
		"-c", proto("file", r.allowFile),
		"-c", proto("http", r.allowHTTP),
		"-c", "http.followRedirects=false",
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
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
		"LANG=C",
	}
}

// Run executes one git call and returns its stdout (nil when Call.Stdout is set).
// A failure is an *Error (classified with Classify by callers) or ctx's error.
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

	args := append([]string{"-C", c.Dir}, r.hardening()...)
	args = append(args, c.Args...)
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Env = append(r.baseEnv(), c.Env...)
	var secrets []string
	if c.Cred != nil {
		if c.RemoteURL == "" {
			return nil, errors.New("gitx: Call.RemoteURL is required with Call.Cred")
		}
		header, scope, err := authHeader(c.Cred, c.RemoteURL)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env,
			"GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http."+scope+".extraHeader",
			"GIT_CONFIG_VALUE_0="+header,
		)
		secrets = secretForms(c.Cred)
	}
	if c.Stdin != nil {
		cmd.Stdin = c.Stdin
	}
	var stdout bytes.Buffer
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	} else {
		cmd.Stdout = &stdout
	}
	stderr := &capped{max: 64 << 10}
	cmd.Stderr = stderr
	// Own process group (killed whole on timeout); SIGKILL when the worker dies
	// so no orphaned git keeps writing into a cache after a crash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s: %w", redact(strings.Join(c.Args, " "), secrets), ctx.Err())
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return nil, &Error{Args: redactAll(c.Args, secrets), ExitCode: code, Stderr: redact(stderr.String(), secrets)}
	}
	if c.Stdout != nil {
		return nil, nil
	}
	return stdout.Bytes(), nil
}

// authHeader returns the Authorization header and the URL prefix it is scoped
// to (scheme://host[:port]/), so it is never sent to another host.
func authHeader(cred *sandbox.Credential, remote string) (header, scope string, err error) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "", fmt.Errorf("gitx: credentials need an http(s) remote URL")
	}
	if strings.ContainsAny(cred.Username+cred.Secret, "\r\n\x00") {
		return "", "", sandbox.Errorf(sandbox.ErrInvalidArgument, "credential contains a line break or NUL")
	}
	basic := base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Secret))
	return "Authorization: Basic " + basic, u.Scheme + "://" + u.Host + "/", nil
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

func (c *capped) String() string { return c.buf.String() }

var (
	authPatterns = regexp.MustCompile(`(?i)authentication failed|could not read (username|password)|terminal prompts disabled|http(/[0-9.]+)? 40[13]|returned error: 40[13]|permission denied \(publickey|invalid username or password|access denied|401 unauthorized|403 forbidden`)
	notFoundPat  = regexp.MustCompile(`(?i)repository not found|returned error: 404|not found|does not appear to be a git repository|does not exist`)
	diskPat      = regexp.MustCompile(`(?i)no space left on device|disk quota exceeded|file too large`)
	lockPat      = regexp.MustCompile(`Unable to create '([^']+\.lock)': File exists`)
	unreachPat   = regexp.MustCompile(`(?i)could not resolve host|connection refused|connection timed out|failed to connect|network is unreachable|operation timed out|could not connect`)
	refPat       = regexp.MustCompile(`(?i)invalid reference|unknown revision|not a valid object name|needed a single revision|couldn't find remote ref|bad revision|not a commit`)
)

// Classify maps a git failure onto the typed errors of the seed: auth →
// ErrRepoAuthFailed; a held lock → ErrRepoLocked naming the lock file; a full
// disk → ErrInsufficientDisk; an unknown ref → ErrRefNotFound; unreachable or
// missing remote → ErrRepoCacheUnavailable; anything else → fallback. what
// describes the operation ("clone owner/repo").
func Classify(err error, what string, fallback *sandbox.Kind) error {
	if err == nil {
		return nil
	}
	var ge *Error
	if !errors.As(err, &ge) {
		if errors.Is(err, context.DeadlineExceeded) {
			return sandbox.Errorf(sandbox.ErrTimeout, "%s: %v", what, err)
		}
		return sandbox.Errorf(fallback, "%s: %v", what, err)
	}
	msg := ge.Stderr
	switch {
	case lockPat.MatchString(msg):
		return sandbox.Errorf(sandbox.ErrRepoLocked, "%s: lock file held: %s", what, lockPat.FindStringSubmatch(msg)[1])
	case diskPat.MatchString(msg):
		return sandbox.Errorf(sandbox.ErrInsufficientDisk, "%s: %s", what, firstLine(msg))
	case authPatterns.MatchString(msg):
		return sandbox.Errorf(sandbox.ErrRepoAuthFailed, "%s: the remote refused the credentials (or none were given): %s", what, firstLine(msg))
	case refPat.MatchString(msg):
		return sandbox.Errorf(sandbox.ErrRefNotFound, "%s: %s", what, firstLine(msg))
	case unreachPat.MatchString(msg), notFoundPat.MatchString(msg):
		return sandbox.Errorf(sandbox.ErrRepoCacheUnavailable, "%s: %s", what, firstLine(msg))
	}
	return sandbox.Errorf(fallback, "%s: %s", what, ge.Error())
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
