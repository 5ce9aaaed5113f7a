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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
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
