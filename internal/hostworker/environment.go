package hostworker

import (
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/runtime/procexec"
)

// EnvironmentConfig is what a command sees of the host's toolchains and
// caches (README "Configuration"; docs/RUNTIMES.md "Runtime environment").
type EnvironmentConfig struct {
	// RuntimePath is the PATH of every command of the bubblewrap and local
	// runtimes (SANDBOX_RUNTIME_PATH, ":"-separated absolute directories;
	// default: the worker's own PATH less relative entries, duplicates and
	// anything under the data directory), so toolchains installed on the
	// host (Go in /usr/local/go/bin, Node, Python) run there. Docker keeps
	// its image's PATH; remote runtimes theirs.
	RuntimePath string
	// CacheScope is which workspaces share a dependency cache
	// (SANDBOX_CACHE_SCOPE: user, the default, repo or workspace).
	CacheScope depcache.Scope
	// NoSetup forbids running repositories' setup commands
	// (SANDBOX_SETUP=off; default on): they are shown, never run.
	NoSetup bool
	// RepoImages are the image references (path.Match patterns, e.g.
	// "node:*", "registry.example.com/team/*") whose repository-named
	// image the Docker runtime runs in place of SANDBOX_RUNTIME_IMAGE
	// (SANDBOX_REPO_IMAGES, comma-separated; default none: the image is
	// reported, never used; docs/RUNTIMES.md "Repository environment").
	RepoImages []string
}

// baseEnv is the fixed environment the bubblewrap and local providers add
// to every command: PATH=RuntimePath, or nothing when it is unset (the
// providers' own base PATH).
func (c EnvironmentConfig) baseEnv() map[string]string {
	if c.RuntimePath == "" {
		return nil
	}
	return map[string]string{"PATH": c.RuntimePath}
}

// environmentFromEnv reads EnvironmentConfig; dataDir is the validated
// SANDBOX_DATA_DIR and hostPath the worker's PATH. Errors: *ConfigError
// naming the variable.
func environmentFromEnv(get func(name, def string) string, dataDir, hostPath string) (EnvironmentConfig, error) {
	var c EnvironmentConfig
	scope := get("SANDBOX_CACHE_SCOPE", string(depcache.DefaultScope))
	sc, err := depcache.ParseScope(scope)
	if err != nil {
		return c, &ConfigError{"SANDBOX_CACHE_SCOPE", scope, "want user, repo or workspace"}
	}
	c.CacheScope = sc
	switch v := get("SANDBOX_SETUP", "on"); v {
	case "on":
	case "off":
		c.NoSetup = true
	default:
		return c, &ConfigError{"SANDBOX_SETUP", v, "want on or off"}
	}
	for _, pat := range strings.Split(get("SANDBOX_REPO_IMAGES", ""), ",") {
		if pat = strings.TrimSpace(pat); pat == "" {
			continue
		}
		if _, err := path.Match(pat, ""); err != nil {
			return c, &ConfigError{"SANDBOX_REPO_IMAGES", pat, "each entry must be an image pattern (path.Match syntax, e.g. node:* )"}
		}
		c.RepoImages = append(c.RepoImages, pat)
	}
	if v := get("SANDBOX_RUNTIME_PATH", ""); v != "" {
		for _, d := range strings.Split(v, ":") {
			switch {
			case !filepath.IsAbs(d) || filepath.Clean(d) != d:
				return c, &ConfigError{"SANDBOX_RUNTIME_PATH", v, "each entry must be an absolute clean directory, separated by ':' (" + d + " is not)"}
			case within(d, dataDir):
				return c, &ConfigError{"SANDBOX_RUNTIME_PATH", v, d + " is under SANDBOX_DATA_DIR, whose programs belong to workspaces"}
			}
		}
		c.RuntimePath = v
		return c, nil
	}
	c.RuntimePath = RuntimePathFrom(hostPath, dataDir)
	return c, nil
}

// RuntimePathFrom returns SANDBOX_RUNTIME_PATH's default from the worker's
// PATH: its absolute entries, cleaned, first occurrence kept, less any
// under dataDir; the fixed procexec base PATH when nothing is left.
func RuntimePathFrom(hostPath, dataDir string) string {
	var keep []string
	for _, d := range strings.Split(hostPath, ":") {
		if !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if within(d, dataDir) || slices.Contains(keep, d) {
			continue
		}
		keep = append(keep, d)
	}
	if len(keep) == 0 {
		return procexec.BasePath
	}
	return strings.Join(keep, ":")
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
