package hostworker

import (
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/workspace"
)

// ContentConfig is how a host completes a checkout with what a plain
// worktree lacks (README "Configuration"; docs/API.md "Submodules", "Git LFS").
type ContentConfig struct {
	// Submodules: "checkout" (default) checks each submodule out at its
	// recorded commit through the repo cache with the user's credential;
	// "off" leaves them uninitialised, reported in the handle and status
	// (SANDBOX_SUBMODULES).
	Submodules string
	// LFS configures Git LFS content: SANDBOX_LFS ("fetch", the default, or
	// "off": pointers stay, flagged), SANDBOX_LFS_TIMEOUT (bound of one
	// workspace's fetch, default 5m) and SANDBOX_LFS_MAX_BYTES (content one
	// workspace fetches at most, smallest files first; 0, the default: no cap).
	LFS workspace.LFSOptions
}

// contentFromEnv reads ContentConfig. Errors: *ConfigError naming the variable.
func contentFromEnv(get func(name, def string) string) (ContentConfig, error) {
	c := ContentConfig{Submodules: strings.ToLower(get("SANDBOX_SUBMODULES", "checkout"))}
	switch c.Submodules {
	case "checkout", "off":
	default:
		return c, &ConfigError{"SANDBOX_SUBMODULES", c.Submodules, "want checkout or off"}
	}
	switch v := strings.ToLower(get("SANDBOX_LFS", "fetch")); v {
	case "fetch":
	case "off":
		c.LFS.Disabled = true
	default:
		return c, &ConfigError{"SANDBOX_LFS", v, "want fetch or off"}
	}
	v := get("SANDBOX_LFS_TIMEOUT", workspace.DefaultLFSTimeout.String())
	d, err := sandbox.ParseDuration(v)
	if err != nil || d < time.Second {
		return c, &ConfigError{"SANDBOX_LFS_TIMEOUT", v, "want a duration of at least 1s, such as 5m, or a number of seconds"}
	}
	c.LFS.Timeout = d
	v = get("SANDBOX_LFS_MAX_BYTES", "0")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return c, &ConfigError{"SANDBOX_LFS_MAX_BYTES", v, "want a number of bytes (0: no cap)"}
	}
	c.LFS.MaxBytes = n
	return c, nil
}
