package hostworker

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// E2BConfig configures the E2B runtime (SANDBOX_RUNTIME_PROVIDER=e2b;
// README.md "Configuration").
type E2BConfig struct {
	APIURL   string        // E2B_API_URL (default e2b.DefaultAPIURL)
	APIKey   string        // E2B_API_KEY, or the content of E2B_API_KEY_FILE; never logged
	Template string        // E2B_TEMPLATE (default e2b.DefaultTemplate)
	Timeout  time.Duration // E2B_SANDBOX_TIMEOUT (default e2b.DefaultTimeout)
	// MaxInstanceLength is E2B_MAX_INSTANCE_LENGTH, the team's max
	// instance length (default e2b.DefaultMaxInstanceLength, 1 h: E2B's
	// Hobby tier; 24h for Pro): whole hours.
	MaxInstanceLength time.Duration
}

// String never prints the key.
func (c E2BConfig) String() string {
	return fmt.Sprintf("e2b(api=%s template=%s timeout=%v max_instance_length=%v key=<redacted>)", c.APIURL, c.Template, c.Timeout, c.MaxInstanceLength)
}

// GoString never prints the key.
func (c E2BConfig) GoString() string { return c.String() }

// e2bFromEnv reads the E2B variables (only with SANDBOX_RUNTIME_PROVIDER=e2b).
// Errors: *ConfigError naming the variable (a key's value is never echoed).
func e2bFromEnv(get func(name, def string) string) (E2BConfig, error) {
	c := E2BConfig{
		APIURL:   get("E2B_API_URL", e2b.DefaultAPIURL),
		Template: get("E2B_TEMPLATE", e2b.DefaultTemplate),
	}
	key, file := get("E2B_API_KEY", ""), get("E2B_API_KEY_FILE", "")
	switch {
	case key != "" && file != "":
		return c, &ConfigError{"E2B_API_KEY_FILE", file, "set E2B_API_KEY or E2B_API_KEY_FILE, not both"}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return c, &ConfigError{"E2B_API_KEY_FILE", file, "cannot read it: " + sandboxapi.Message(err)}
		}
		key = strings.TrimSpace(string(b))
		if key == "" {
			return c, &ConfigError{"E2B_API_KEY_FILE", file, "the file is empty"}
		}
	case key == "":
		return c, &ConfigError{"E2B_API_KEY", "", "required with SANDBOX_RUNTIME_PROVIDER=e2b (or E2B_API_KEY_FILE)"}
	}
	if strings.ContainsAny(key, " \t\r\n\x00") {
		return c, &ConfigError{"E2B_API_KEY", "<set>", "the key holds white space or a control character"}
	}
	c.APIKey = key
	t := get("E2B_SANDBOX_TIMEOUT", e2b.DefaultTimeout.String())
	d, err := time.ParseDuration(t)
	if err != nil {
		if n, nerr := strconv.Atoi(t); nerr == nil { // plain seconds, as E2B's API takes it
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d < time.Second || d > e2b.MaxTimeout || d%time.Second != 0 {
		return c, &ConfigError{"E2B_SANDBOX_TIMEOUT", t, fmt.Sprintf("want whole seconds from 1s to %v, such as 900 or 15m", e2b.MaxTimeout)}
	}
	c.Timeout = d
	m := get("E2B_MAX_INSTANCE_LENGTH", e2b.DefaultMaxInstanceLength.String())
	ml, err := time.ParseDuration(m)
	if err != nil {
		if n, nerr := strconv.Atoi(m); nerr == nil { // plain hours, as E2B's tiers count it
			ml, err = time.Duration(n)*time.Hour, nil
		}
	}
	if err != nil || ml < time.Hour || ml > e2b.MaxTimeout || ml%time.Hour != 0 {
		return c, &ConfigError{"E2B_MAX_INSTANCE_LENGTH", m, fmt.Sprintf("want whole hours from 1h to %v, such as 1 (Hobby) or 24h (Pro)", e2b.MaxTimeout)}
	}
	c.MaxInstanceLength = ml
	if c.Timeout > ml {
		return c, &ConfigError{"E2B_SANDBOX_TIMEOUT", t, fmt.Sprintf("exceeds E2B_MAX_INSTANCE_LENGTH (%v): E2B refuses a longer timeout", ml)}
	}
	// The URL and template are checked by e2b.New; its error names them.
	if _, err := newE2B(Config{DataDir: os.TempDir(), HostID: "check", E2B: c}, &gitx.Runner{}, slog.Default(), true); err != nil {
		name := "E2B_API_URL"
		if strings.Contains(err.Error(), "template") {
			name = "E2B_TEMPLATE"
		}
		return c, &ConfigError{name, get(name, ""), sandboxapi.Message(err)}
	}
	return c, nil
}

// newE2B builds the E2B provider of cfg (dryRun: only validate).
func newE2B(cfg Config, git *gitx.Runner, log *slog.Logger, dryRun bool) (sandbox.RuntimeProvider, error) {
	if git == nil {
		var err error
		if git, err = gitx.New(gitx.Options{HomeDir: filepath.Join(cfg.DataDir, "git-home"), Logger: log}); err != nil {
			return nil, err
		}
	}
	p, err := e2b.New(e2b.Options{APIURL: cfg.E2B.APIURL, APIKey: cfg.E2B.APIKey, Template: cfg.E2B.Template, Timeout: cfg.E2B.Timeout,
		MaxInstanceLength: cfg.E2B.MaxInstanceLength, Deployment: cfg.HostID, StateDir: filepath.Join(cfg.DataDir, "runtimes", "e2b"), Git: git, Logger: log})
	if err != nil {
		return nil, err
	}
	if !dryRun {
		log.Info("runtime provider: e2b", "api", cfg.E2B.APIURL, "template", cfg.E2B.Template, "timeout", cfg.E2B.Timeout,
			"max_instance_length", cfg.E2B.MaxInstanceLength)
	}
	return p, nil
}
